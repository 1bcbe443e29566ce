//! Input files must agree on their columns. When the write takes every column (no `columns`
//! option), the columns come from the first file: a column that only a later file has would
//! be left out, one that a later file lacks would fail mid-write. So every file's columns are
//! checked against the first file's, by name and type, before a byte is written; a
//! difference is an error naming both files and the column. (With `columns` given, only
//! those must agree: `Input::check_columns`.)

use crate::error::{DatasetError, Result};
use crate::input::files::InputFile;

/// Every file has the first file's columns (in any order), of the same types, and no other.
pub(crate) fn check_same_columns(files: &[InputFile]) -> Result<()> {
    let Some((first, rest)) = files.split_first() else {
        return Ok(());
    };
    let at = |f: &InputFile, column: &str, msg: String| DatasetError::Input {
        file: Some(f.path.clone()),
        column: Some(column.to_string()),
        row: None,
        msg,
    };
    for f in rest {
        for field in f.schema.fields() {
            match first.schema.field_with_name(field.name()) {
                Err(_) => {
                    return Err(at(
                        f,
                        field.name(),
                        format!(
                            "this file has the column and {} (the first input file) does not; \
                             input files must have the same columns (or name the columns to \
                             write with the columns option)",
                            first.path.display()
                        ),
                    ))
                }
                Ok(want)
                    if !crate::input::value_type::same_values_type(
                        want.data_type(),
                        field.data_type(),
                    ) =>
                {
                    return Err(at(
                        f,
                        field.name(),
                        format!(
                            "type {} here, {} in {} (the first input file)",
                            field.data_type(),
                            want.data_type(),
                            first.path.display()
                        ),
                    ))
                }
                Ok(_) => {}
            }
        }
        if let Some(missing) = first
            .schema
            .fields()
            .iter()
            .find(|w| f.schema.field_with_name(w.name()).is_err())
        {
            return Err(at(
                f,
                missing.name(),
                format!(
                    "{} (the first input file) has the column and this file does not; input \
                     files must have the same columns (or name the columns to write with the \
                     columns option)",
                    first.path.display()
                ),
            ));
        }
    }
    Ok(())
}
