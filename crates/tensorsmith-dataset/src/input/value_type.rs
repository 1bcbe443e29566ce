//! When two input files' columns hold the same values though their Arrow types differ in
//! names only.

use arrow_schema::DataType;

/// Whether two columns hold the same values: their types equal but for the names and
/// nullability of list items (`list<item: float>`, what pyarrow before 13 wrote, and
/// `list<element: float not null>` are one column; nulls are refused row by row anyway).
/// Struct fields keep their names (a tensor-struct column reads its fields by name).
pub(crate) fn same_values_type(a: &DataType, b: &DataType) -> bool {
    match (a, b) {
        (DataType::List(x), DataType::List(y))
        | (DataType::LargeList(x), DataType::LargeList(y)) => {
            same_values_type(x.data_type(), y.data_type())
        }
        (DataType::FixedSizeList(x, n), DataType::FixedSizeList(y, m)) => {
            n == m && same_values_type(x.data_type(), y.data_type())
        }
        (DataType::Struct(xs), DataType::Struct(ys)) => {
            xs.len() == ys.len()
                && xs.iter().zip(ys).all(|(x, y)| {
                    x.name() == y.name() && same_values_type(x.data_type(), y.data_type())
                })
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{Field, Fields};
    use std::sync::Arc;

    #[test]
    fn list_item_names_and_nullability_do_not_count_struct_field_names_do() {
        let list = |name: &str, null: bool| {
            DataType::List(Arc::new(Field::new(name, DataType::Float32, null)))
        };
        assert!(same_values_type(
            &list("item", true),
            &list("element", false)
        ));
        assert!(!same_values_type(
            &list("item", true),
            &DataType::List(Arc::new(Field::new("item", DataType::Float64, true)))
        ));
        let fixed = |n| DataType::FixedSizeList(Arc::new(Field::new("x", DataType::Int8, true)), n);
        assert!(same_values_type(&fixed(3), &fixed(3)) && !same_values_type(&fixed(3), &fixed(4)));
        let st = |a: &str| {
            DataType::Struct(Fields::from(vec![
                Field::new(a, DataType::Binary, false),
                Field::new("shape", list("item", true), true),
            ]))
        };
        assert!(same_values_type(&st("data"), &st("data")));
        assert!(!same_values_type(&st("data"), &st("bytes")));
        assert!(!same_values_type(
            &list("item", true),
            &DataType::LargeList(Arc::new(Field::new("item", DataType::Float32, true)))
        ));
    }
}
