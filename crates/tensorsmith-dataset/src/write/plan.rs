//! The plan of a write: the options checked against the input schema, before anything is
//! written (which columns become tensors and how, which are read, the KV key column).

use crate::column::ColumnPlan;
use crate::error::{DatasetError, Result};
use crate::input::files::Input;
use crate::input::schema::check_same_columns;
use crate::kv::keys::{is_key_type, misread_column};
use crate::options::{Naming, WriteOptions};

/// The options checked against the input schema: which columns become tensors and how.
pub(crate) struct Plan {
    pub plans: Vec<ColumnPlan>,
    /// Columns read: the tensor columns, then the key column (KV mode).
    pub read_cols: Vec<String>,
}

impl Plan {
    pub fn new(input: &Input, opts: &WriteOptions) -> Result<Plan> {
        opts.check()?;
        let schema = input.schema().clone();
        let name_col = match &opts.naming {
            Naming::Kv { name_col } => Some(name_col.clone()),
            Naming::Batch(_) => None,
        };
        let columns: Vec<String> = match &opts.columns {
            Some(c) => c.clone(),
            None => schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .filter(|n| Some(n) != name_col.as_ref())
                .collect(),
        };
        if opts.columns.is_none() {
            // Every column is written: every file must have the same ones.
            check_same_columns(input.files())?;
        }
        if columns.is_empty() {
            return Err(DatasetError::option("columns", "no column to write"));
        }
        if let Some(c) = opts.shapes.keys().find(|c| !columns.contains(c)) {
            return Err(DatasetError::option(
                "shapes",
                format!("names '{c}', which is not a written column"),
            ));
        }
        if name_col.is_some() {
            check_kv_column_names(&columns, &opts.kv_separator)?;
        }
        let mut read_cols = columns.clone();
        if let Some(n) = &name_col {
            read_cols.push(n.clone());
            let f = schema.field_with_name(n).map_err(|_| {
                DatasetError::option("name_col", format!("no column '{n}' in the input"))
            })?;
            if !is_key_type(f.data_type()) {
                return Err(DatasetError::option(
                    "name_col",
                    format!(
                        "'{n}' is {}: keys come from strings or integers",
                        f.data_type()
                    ),
                ));
            }
        }
        input
            .check_columns(&read_cols)
            .map_err(|e| e.in_file(input.name()))?;
        let plans = columns
            .iter()
            .map(|c| {
                ColumnPlan::new(
                    &schema,
                    c,
                    opts.dtype,
                    opts.shapes.get(c).cloned(),
                    opts.f16_rounding,
                )
                .map_err(|e| e.in_file(input.name()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Plan { plans, read_cols })
    }
}

/// KV tensor keys are `<name><sep><column>`, and every reader splits them at the last `sep`:
/// a column whose name holds the separator would be read back as another column.
fn check_kv_column_names(columns: &[String], sep: &str) -> Result<()> {
    for c in columns {
        if let Some(seen) = misread_column(c, sep) {
            return Err(DatasetError::column(
                c,
                format!(
                    "the name holds the KV separator '{sep}': readers split a tensor key \
                     <name>{sep}{c} at its last '{sep}' and would see a column '{seen}'; \
                     choose another separator with the kv_separator option (--kv-separator in \
                     the CLI), or rename the column"
                ),
            ));
        }
    }
    Ok(())
}
