//! `_tensor_index.parquet`: one row per tensor of every shard (tensor_key, file_name, shape
//! `list<int32>`, dtype), a single Parquet file written atomically.

use crate::error::{DatasetError, Result};
use crate::manifest::ShardInfo;
use arrow_array::builder::{Int32Builder, ListBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use tensorsmith::sink::AtomicFile;

/// Strings many index entries share (a shard's file name, a dtype), each held once.
#[derive(Default)]
pub(crate) struct SharedNames(Vec<Arc<str>>);

impl SharedNames {
    pub(crate) fn get(&mut self, s: &str) -> Arc<str> {
        // Few distinct names, most recent last: a short scan from the end.
        if let Some(n) = self.0.iter().rev().find(|n| ***n == *s) {
            return n.clone();
        }
        if self.0.len() == 64 {
            self.0.remove(0);
        }
        self.0.push(s.into());
        self.0.last().expect("pushed").clone()
    }
}

/// One tensor entry of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The tensor's key: its name in the shard (batch mode: the column; KV mode:
    /// `<name><kv_separator><column>`).
    pub tensor_key: String,
    /// Shared by the entries of one shard (a KV write holds an entry per key).
    pub file_name: Arc<str>,
    /// The tensor's shape (batch mode: the shard's samples first).
    pub shape: Vec<u64>,
    /// The tensor's safetensors dtype name (`F32`, …); shared by the entries of one dtype.
    pub dtype: Arc<str>,
}

/// The index file's Arrow schema: `tensor_key`, `file_name` and `dtype` as strings, `shape`
/// as `list<int32>`, none nullable.
pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("tensor_key", DataType::Utf8, false),
        Field::new("file_name", DataType::Utf8, false),
        Field::new(
            "shape",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            false,
        ),
        Field::new("dtype", DataType::Utf8, false),
    ]))
}

/// Writes the index that will become `path` under a temporary name, fsynced: the caller's
/// `commit` renames it into place.
pub(crate) fn prepare(path: &Path, entries: &[IndexEntry]) -> Result<AtomicFile> {
    let mut keys = StringBuilder::new();
    let mut files = StringBuilder::new();
    let mut shapes = ListBuilder::new(Int32Builder::new());
    let mut dtypes = StringBuilder::new();
    for e in entries {
        keys.append_value(&e.tensor_key);
        files.append_value(&e.file_name);
        for &d in &e.shape {
            let d = i32::try_from(d).map_err(|_| {
                DatasetError::input(format!(
                    "tensor '{}': dimension {d} does not fit the index's int32 shape",
                    e.tensor_key
                ))
            })?;
            shapes.values().append_value(d);
        }
        shapes.append(true);
        dtypes.append_value(&e.dtype);
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(keys.finish()),
        Arc::new(files.finish()),
        Arc::new(shapes.finish()),
        Arc::new(dtypes.finish()),
    ];
    let batch = RecordBatch::try_new(schema(), cols).map_err(|source| DatasetError::Arrow {
        path: path.to_path_buf(),
        source,
    })?;
    let pq = |source| DatasetError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let f = AtomicFile::create(path)?;
    let mut w = ArrowWriter::try_new(f, schema(), None).map_err(pq)?;
    w.write(&batch).map_err(pq)?;
    let mut f = w.into_inner().map_err(pq)?;
    f.sync()?;
    Ok(f)
}

/// Reads an index file back.
///
/// # Errors
///
/// - [`DatasetError::Corrupt`]: the file is malformed Parquet, lacks one of the index's
///   columns (or has it of another type), or holds a null or a negative dimension.
/// - [`DatasetError::Parquet`], [`DatasetError::Arrow`]: the Parquet reader fails on it.
/// - [`DatasetError::Io`]: the file cannot be read.
pub fn read(path: &Path) -> Result<Vec<IndexEntry>> {
    let bytes = std::fs::read(path).map_err(|e| DatasetError::io(path, e))?;
    read_bytes(bytes.into(), path)
}

/// Reads index bytes (`path` is named in errors). Columns are found by name and must have
/// the index's types (nullable or not, as Spark writes them); nulls are refused.
///
/// # Errors
///
/// - [`DatasetError::Corrupt`]: the file is malformed Parquet, lacks one of the index's
///   columns (or has it of another type), or holds a null or a negative dimension.
/// - [`DatasetError::Parquet`], [`DatasetError::Arrow`]: the Parquet reader fails on it.
pub fn read_bytes(bytes: bytes::Bytes, path: &Path) -> Result<Vec<IndexEntry>> {
    crate::error::guard_parquet(path, || read_bytes_unguarded(bytes, path))
}

fn read_bytes_unguarded(bytes: bytes::Bytes, path: &Path) -> Result<Vec<IndexEntry>> {
    let pq = |source| DatasetError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    crate::parquet_guard::check_file_footer(&bytes)
        .map_err(|why| DatasetError::malformed_parquet(path, why))?;
    let b = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).map_err(pq)?;
    crate::parquet_guard::check_pages(&bytes, b.metadata())
        .map_err(|why| DatasetError::malformed_parquet(path, why))?;
    let fits = |name: &str, ok: &dyn Fn(&DataType) -> bool| {
        b.schema()
            .field_with_name(name)
            .is_ok_and(|f| ok(f.data_type()))
    };
    let utf8 = |t: &DataType| *t == DataType::Utf8;
    let shape = |t: &DataType| matches!(t, DataType::List(f) if *f.data_type() == DataType::Int32);
    if !(fits("tensor_key", &utf8)
        && fits("file_name", &utf8)
        && fits("dtype", &utf8)
        && fits("shape", &shape))
    {
        return Err(DatasetError::Corrupt {
            path: path.to_path_buf(),
            msg: "not a tensor index: needs tensor_key, file_name, dtype (string) and shape (list<int32>)".into(),
        });
    }
    let r = b.build().map_err(pq)?;
    let bad = |m: &str| DatasetError::Corrupt {
        path: path.to_path_buf(),
        msg: m.to_string(),
    };
    let mut out = Vec::new();
    let mut names = SharedNames::default();
    for b in r {
        let b = b.map_err(|source| DatasetError::Arrow {
            path: path.to_path_buf(),
            source,
        })?;
        let col = |n: &str| {
            b.column_by_name(n)
                .ok_or_else(|| bad("missing a column of the tensor index"))
        };
        let (k, f, s, d) = (
            col("tensor_key")?,
            col("file_name")?,
            col("shape")?,
            col("dtype")?,
        );
        let (k, f, d) = (
            k.as_string::<i32>(),
            f.as_string::<i32>(),
            d.as_string::<i32>(),
        );
        let s = s.as_list::<i32>();
        for i in 0..b.num_rows() {
            if k.is_null(i) || f.is_null(i) || d.is_null(i) || s.is_null(i) {
                return Err(bad("a null in the tensor index"));
            }
            let dims = s.value(i);
            if dims.null_count() > 0
                || dims
                    .as_primitive::<Int32Type>()
                    .values()
                    .iter()
                    .any(|&x| x < 0)
            {
                return Err(bad("a null or negative dimension in the tensor index"));
            }
            out.push(IndexEntry {
                tensor_key: k.value(i).to_string(),
                file_name: names.get(f.value(i)),
                shape: dims
                    .as_primitive::<Int32Type>()
                    .values()
                    .iter()
                    .map(|&x| x as u64)
                    .collect(),
                dtype: names.get(d.value(i)),
            });
        }
    }
    Ok(out)
}

/// Index entries of existing shards, from their headers.
pub fn entries_from_headers(dir: &Path, shards: &[ShardInfo]) -> Result<Vec<IndexEntry>> {
    let mut out = Vec::new();
    let mut names = SharedNames::default();
    for s in shards {
        let f = tensorsmith::safetensors::SafetensorsFile::open(dir.join(&s.shard_path))?;
        entries_of(f.index(), &s.shard_path, &mut names, &mut out);
    }
    Ok(out)
}

/// The index entries of one shard's header (`index`), appended to `out`.
pub(crate) fn entries_of(
    index: &tensorsmith::index::TensorIndex,
    shard: &str,
    names: &mut SharedNames,
    out: &mut Vec<IndexEntry>,
) {
    for t in &index.tensors {
        out.push(IndexEntry {
            tensor_key: t.name.clone(),
            file_name: names.get(shard),
            shape: t.shape.to_vec(),
            dtype: names.get(t.dtype.safetensors_name()),
        });
    }
}

/// A new index file's name in `_tensorsmith/index/` for version `version`.
pub(crate) fn new_file_name(version: u64) -> String {
    format!("{version:08}-{}.parquet", uuid::Uuid::new_v4().simple())
}
