//! Input handed over in memory, with no file behind it: record batches (row count known, any
//! row range served by zero-copy slices, so tasks split them as they split Parquet) and a
//! one-pass stream of batches (row count unknown, read once). Errors name them
//! `<arrow batches>` and `<arrow stream>`.

use crate::error::{DatasetError, Result};
use crate::input::cut::{arrow_err, Cut, RowSink};
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::SchemaRef;
use std::ops::Range;
use std::path::Path;
use std::sync::Mutex;

pub const BATCHES_NAME: &str = "<arrow batches>";
pub const STREAM_NAME: &str = "<arrow stream>";

#[derive(Debug)]
pub(crate) struct Batches {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    /// Global row of each batch's first row.
    starts: Vec<u64>,
    rows: u64,
}

impl Batches {
    /// Batches all of `schema`; `name` is what errors call them.
    pub fn new(schema: SchemaRef, batches: Vec<RecordBatch>, name: &str) -> Result<Batches> {
        let name = Path::new(name);
        let mut starts = Vec::with_capacity(batches.len());
        let mut rows = 0u64;
        for (i, b) in batches.iter().enumerate() {
            check_schema(&schema, b)
                .map_err(|e| DatasetError::input(format!("record batch {i}: {e}")).in_file(name))?;
            starts.push(rows);
            rows += b.num_rows() as u64;
        }
        Ok(Batches {
            schema,
            batches,
            starts,
            rows,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn read_range(
        &self,
        range: Range<u64>,
        columns: &[String],
        batch_rows: usize,
        f: &mut RowSink,
    ) -> Result<()> {
        // The first batch holding range.start (batches before it are not looked at).
        let first = self.starts.partition_point(|&s| s <= range.start).max(1) - 1;
        let cut = Cut {
            range: &range,
            columns,
            batch_rows,
            schema: &self.schema,
            name: Path::new(BATCHES_NAME),
        };
        let base = self.starts.get(first).copied().unwrap_or(0);
        cut.serve(
            self.batches[first.min(self.batches.len())..]
                .iter()
                .map(|b| Ok(b.clone())),
            base,
            f,
        )?;
        Ok(())
    }
}

/// Same column names and types, in the same order (nullability and metadata may differ).
fn check_schema(schema: &SchemaRef, b: &RecordBatch) -> std::result::Result<(), String> {
    let got = b.schema();
    if got.fields().len() != schema.fields().len() {
        return Err(format!(
            "{} columns, the schema has {}",
            got.fields().len(),
            schema.fields().len()
        ));
    }
    for (g, w) in got.fields().iter().zip(schema.fields()) {
        if g.name() != w.name() || g.data_type() != w.data_type() {
            return Err(format!(
                "column '{}' ({}) where the schema has '{}' ({})",
                g.name(),
                g.data_type(),
                w.name(),
                w.data_type()
            ));
        }
    }
    Ok(())
}

/// A one-pass stream: the reader is taken by the first read.
pub(crate) struct Stream {
    schema: SchemaRef,
    reader: Mutex<Option<Box<dyn RecordBatchReader + Send>>>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl Stream {
    pub fn new(reader: Box<dyn RecordBatchReader + Send>) -> Stream {
        Stream {
            schema: reader.schema(),
            reader: Mutex::new(Some(reader)),
        }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn take(&self) -> Result<Box<dyn RecordBatchReader + Send>> {
        let mut slot = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        slot.take().ok_or_else(|| {
            DatasetError::input("the stream was already read: a stream input is read once")
                .in_file(Path::new(STREAM_NAME))
        })
    }

    fn batches(
        reader: Box<dyn RecordBatchReader + Send>,
    ) -> impl Iterator<Item = Result<RecordBatch>> {
        reader.map(|b| b.map_err(arrow_err(Path::new(STREAM_NAME))))
    }

    pub fn read_range(
        &self,
        range: Range<u64>,
        columns: &[String],
        batch_rows: usize,
        f: &mut RowSink,
    ) -> Result<()> {
        let cut = Cut {
            range: &range,
            columns,
            batch_rows,
            schema: &self.schema,
            name: Path::new(STREAM_NAME),
        };
        cut.serve(Self::batches(self.take()?), 0, f)?;
        Ok(())
    }
}
