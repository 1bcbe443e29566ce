//! The plan of a write: the options checked against the input schema, before anything is
//! written (which columns become tensors and how, which are read, the KV key column).

use crate::column::ColumnPlan;
use crate::error::{DatasetError, Result};
use crate::input::Input;
use crate::kv_keys::is_key_type;
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
        if columns.is_empty() {
            return Err(DatasetError::option("columns", "no column to write"));
        }
        if let Some(c) = opts.shapes.keys().find(|c| !columns.contains(c)) {
            return Err(DatasetError::option(
                "shapes",
                format!("names '{c}', which is not a written column"),
            ));
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
