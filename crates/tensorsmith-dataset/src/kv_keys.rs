//! KV mode's key column: the Arrow types a key may come from (strings, integers), a row's key
//! as text, the error for a null key, and the column names the separator rules out. Shared
//! by the plan's check and the KV task, so both read a key the same way.

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

/// Where a reader would split the tensor keys of KV column `column` when it is not at the
/// separator written before it: readers split `<name><sep><column>` at the last `sep`, so a
/// column name that holds `sep` (or begins with the end of one, `_x` after `__`) gives its
/// tensors to another column. Returns the column such a reader would see.
pub(crate) fn misread_column<'a>(column: &'a str, sep: &str) -> Option<&'a str> {
    let key = format!("{sep}{column}");
    let last = (1..key.len())
        .rev()
        .filter(|&i| key.is_char_boundary(i))
        .find(|&i| key[i..].starts_with(sep))?;
    // The key from `last + sep.len()` on, which is the column from `last` on.
    Some(&column[last..])
}

#[cfg(test)]
mod tests {
    use super::misread_column;

    #[test]
    fn a_column_that_holds_or_continues_the_separator_is_misread() {
        assert_eq!(misread_column("img__emb", "__"), Some("emb"));
        assert_eq!(misread_column("_x", "__"), Some("x"));
        assert_eq!(misread_column("a/b", "/"), Some("b"));
        assert_eq!(misread_column("img_emb", "__"), None);
        assert_eq!(misread_column("x_", "__"), None);
        assert_eq!(misread_column("emb", "__"), None);
        assert_eq!(misread_column("é::ü", "::"), Some("ü"));
    }
}
