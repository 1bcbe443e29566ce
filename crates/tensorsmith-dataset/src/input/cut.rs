//! How a row range is cut out of a sequence of record batches, for the inputs that are read
//! through (IPC files and streams, in memory): the batches projected to the wanted columns,
//! their types checked, and the range served as zero-copy slices to a `RowSink`.

use crate::error::{DatasetError, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use std::ops::Range;
use std::path::Path;

/// Called with (batch, first input row of the batch, the input's name for errors).
pub type RowSink<'a> = dyn FnMut(&RecordBatch, u64, &Path) -> Result<()> + 'a;

pub(crate) fn arrow_err(path: &Path) -> impl Fn(arrow_schema::ArrowError) -> DatasetError + '_ {
    move |source| DatasetError::Arrow {
        path: path.to_path_buf(),
        source,
    }
}

/// How a row range is cut out of a sequence of record batches (IPC and in-memory input).
pub(crate) struct Cut<'a> {
    pub range: &'a Range<u64>,
    pub columns: &'a [String],
    pub batch_rows: usize,
    /// What every batch must hold (for the projected columns).
    pub schema: &'a SchemaRef,
    /// Named in errors.
    pub name: &'a Path,
}

impl Cut<'_> {
    /// Serves the rows of the range from `batches`, the first of which starts at global row
    /// `base`, as zero-copy slices of the projected batches. Returns the row after the last
    /// batch taken (reading stops once the range is served).
    pub fn serve(
        &self,
        batches: impl Iterator<Item = Result<RecordBatch>>,
        mut base: u64,
        f: &mut RowSink,
    ) -> Result<u64> {
        let (range, name) = (self.range, self.name);
        let first_row = base;
        for b in batches {
            if base >= range.end {
                break;
            }
            let b = b?;
            let n = b.num_rows() as u64;
            let (lo, hi) = (range.start.max(base), range.end.min(base + n));
            if lo < hi {
                let b = self.project(&b)?;
                let mut off = lo;
                while off < hi {
                    let len = (hi - off).min(self.batch_rows.max(1) as u64);
                    let s = b.slice((off - base) as usize, len as usize);
                    f(&s, off, name).map_err(|e| e.in_file_from(name, first_row))?;
                    off += len;
                }
            }
            base += n;
        }
        Ok(base)
    }

    /// The batch with only the wanted columns, each of the schema's type (a batch of another
    /// shape is an error, not a panic further on).
    fn project(&self, b: &RecordBatch) -> Result<RecordBatch> {
        let bs = b.schema();
        let idx = self
            .columns
            .iter()
            .map(|c| {
                let i = bs.index_of(c).map_err(|_| {
                    DatasetError::column(c, "missing from a record batch").in_file(self.name)
                })?;
                let (got, want) = (bs.field(i).data_type(), self.schema.field_with_name(c));
                match want {
                    Ok(w) if w.data_type() == got => Ok(i),
                    _ => Err(DatasetError::column(
                        c,
                        format!("type {got} in a record batch, not the input schema's"),
                    )
                    .in_file(self.name)),
                }
            })
            .collect::<Result<Vec<usize>>>()?;
        b.project(&idx).map_err(arrow_err(self.name))
    }
}
