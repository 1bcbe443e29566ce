//! KV mode's key column: the Arrow types a key may come from (strings, integers, either
//! dictionary-encoded), a row's key as text, the error for a null key, and the column names
//! the separator rules out. Shared by the plan's check and the KV task, so both read a key
//! the same way.

use crate::error::DatasetError;
use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_schema::DataType;

/// Key columns hold strings or integers, or dictionary-encode them (a pandas Categorical).
pub(crate) fn is_key_type(t: &DataType) -> bool {
    if let DataType::Dictionary(k, v) = t {
        return k.is_dictionary_key_type() && is_key_type(v);
    }
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
        DataType::Dictionary(k, _) => {
            macro_rules! entry {
                ($t:ty) => {{
                    let d = col.as_dictionary::<$t>();
                    (d.values(), d.key(r))
                }};
            }
            let (values, i) = match k.as_ref() {
                DataType::Int8 => entry!(Int8Type),
                DataType::Int16 => entry!(Int16Type),
                DataType::Int32 => entry!(Int32Type),
                DataType::Int64 => entry!(Int64Type),
                DataType::UInt8 => entry!(UInt8Type),
                DataType::UInt16 => entry!(UInt16Type),
                DataType::UInt32 => entry!(UInt32Type),
                DataType::UInt64 => entry!(UInt64Type),
                _ => unreachable!("checked by Plan::new"),
            };
            return key_of(values.as_ref(), i?);
        }
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
    fn dictionary_keys_read_as_their_values() {
        use arrow_array::types::{Int32Type, UInt8Type};
        use arrow_array::{Array, DictionaryArray};
        let d: DictionaryArray<Int32Type> = vec![Some("bob"), None, Some("alice"), Some("bob")]
            .into_iter()
            .collect();
        assert!(super::is_key_type(d.data_type()));
        let got: Vec<_> = (0..4).map(|r| super::key_of(&d, r)).collect();
        assert_eq!(
            got,
            [
                Some("bob".into()),
                None,
                Some("alice".into()),
                Some("bob".into())
            ]
        );
        let n = DictionaryArray::<UInt8Type>::try_new(
            arrow_array::UInt8Array::from(vec![1, 0]),
            std::sync::Arc::new(arrow_array::Int64Array::from(vec![7, 9])),
        )
        .unwrap();
        assert_eq!(super::key_of(&n, 0), Some("9".into()));
        let floats = arrow_schema::DataType::Dictionary(
            Box::new(arrow_schema::DataType::Int32),
            Box::new(arrow_schema::DataType::Float32),
        );
        assert!(!super::is_key_type(&floats));
    }

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
