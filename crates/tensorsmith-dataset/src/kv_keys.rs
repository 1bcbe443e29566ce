//! KV mode's key column: the Arrow types a key may come from (strings, integers), a row's
//! key as text, and the error for a null key. Shared by the plan's check and the KV task,
//! so both read a key the same way.

use crate::error::DatasetError;
use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_schema::DataType;

/// Key columns hold strings or integers.
pub(crate) fn is_key_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
    )
}
/// The key column's value of row `r` as text; `None` when null.
pub(crate) fn key_of(col: &dyn Array, r: usize) -> Option<String> {
    if col.is_null(r) {
        return None;
    }
    use arrow_array::types::*;
    Some(match col.data_type() {
        DataType::Utf8 => col.as_string::<i32>().value(r).to_string(),
        DataType::LargeUtf8 => col.as_string::<i64>().value(r).to_string(),
        DataType::Utf8View => col.as_string_view().value(r).to_string(),
        DataType::Int8 => col.as_primitive::<Int8Type>().value(r).to_string(),
        DataType::Int16 => col.as_primitive::<Int16Type>().value(r).to_string(),
        DataType::Int32 => col.as_primitive::<Int32Type>().value(r).to_string(),
        DataType::Int64 => col.as_primitive::<Int64Type>().value(r).to_string(),
        DataType::UInt8 => col.as_primitive::<UInt8Type>().value(r).to_string(),
        DataType::UInt16 => col.as_primitive::<UInt16Type>().value(r).to_string(),
        DataType::UInt32 => col.as_primitive::<UInt32Type>().value(r).to_string(),
        DataType::UInt64 => col.as_primitive::<UInt64Type>().value(r).to_string(),
        _ => unreachable!("checked by Plan::new"),
    })
}

pub(crate) fn null_key(name_col: &str, row: u64) -> DatasetError {
    DatasetError::Input {
        file: None,
        column: Some(name_col.to_string()),
        row: Some(row),
        msg: "the key (name_col) is null".into(),
    }
}
