//! A dataset back to one Parquet file. Batch mode: one row per sample, one column per
//! tensor: a scalar sample is a number, a sample of shape [d1] a list, [d1, d2, ...] a list
//! of nested fixed-size lists (so `dataset write` of the export gives the same tensors).
//! BF16 has no Arrow type and is widened to float32 (exactly). KV mode: one row per tensor,
//! `tensor_key` and the tensor struct `struct<data: binary, shape: list<int32>, dtype: string>`.

use crate::error::{DatasetError, Result};
use crate::read::dataset::{Dataset, DatasetMode};
use arrow_array::builder::{BinaryBuilder, Int32Builder, ListBuilder, StringBuilder};
use arrow_array::types::*;
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, ListArray, PrimitiveArray, RecordBatch, StructArray,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use std::path::Path;
use std::sync::Arc;
use tensorsmith::bytes::StorageOptions;
use tensorsmith::dtype::DType;
use tensorsmith::sink::AtomicFile;

fn leaf(dtype: DType, bytes: &[u8]) -> Result<ArrayRef> {
    fn prim<T: ArrowPrimitiveType>(bytes: &[u8]) -> ArrayRef {
        let n = bytes.len() / std::mem::size_of::<T::Native>();
        let buf = arrow_buffer::Buffer::from_slice_ref(bytes);
        Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::new(buf, 0, n), None))
    }
    Ok(match dtype {
        DType::I8 => prim::<Int8Type>(bytes),
        DType::I16 => prim::<Int16Type>(bytes),
        DType::I32 => prim::<Int32Type>(bytes),
        DType::I64 => prim::<Int64Type>(bytes),
        DType::U8 => prim::<UInt8Type>(bytes),
        DType::U16 => prim::<UInt16Type>(bytes),
        DType::U32 => prim::<UInt32Type>(bytes),
        DType::U64 => prim::<UInt64Type>(bytes),
        DType::F16 => prim::<Float16Type>(bytes),
        DType::F32 => prim::<Float32Type>(bytes),
        DType::F64 => prim::<Float64Type>(bytes),
        DType::BF16 => {
            let wide = tensorsmith::cast::cast(bytes, DType::BF16, DType::F32, Default::default())?;
            prim::<Float32Type>(&wide)
        }
        d => {
            return Err(DatasetError::input(format!(
                "dtype {d} has no Arrow column type"
            )))
        }
    })
}

/// `n` samples of `shape` over `values` (n * product(shape) elements).
fn nest(values: ArrayRef, n: usize, shape: &[u64]) -> Result<ArrayRef> {
    if shape.is_empty() {
        return Ok(values);
    }
    let mut arr = values;
    for &d in shape[1..].iter().rev() {
        let field = Arc::new(Field::new("item", arr.data_type().clone(), false));
        let d = i32::try_from(d)
            .map_err(|_| DatasetError::input(format!("dimension {d} is too large for Arrow")))?;
        arr = Arc::new(FixedSizeListArray::try_new(field, d, arr, None).map_err(arrow_msg)?);
    }
    let field = Arc::new(Field::new("item", arr.data_type().clone(), false));
    let len = shape[0] as usize;
    let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(len, n));
    Ok(Arc::new(
        ListArray::try_new(field, offsets, arr, None).map_err(arrow_msg)?,
    ))
}

fn arrow_msg(e: arrow_schema::ArrowError) -> DatasetError {
    DatasetError::input(e.to_string())
}

/// Writes the dataset in `dir` to `out` (Parquet, atomically); returns the rows written.
///
/// # Errors
///
/// Those of [`Dataset::open`], and:
///
/// - [`DatasetError::Tensor`]: a shard cannot be read, or the output cannot be written.
/// - [`DatasetError::VersionRemoved`]: `dataset clean` removed the version read while it was
///   exported.
/// - [`DatasetError::Parquet`], [`DatasetError::Arrow`]: the Parquet output cannot be built.
pub fn export(dir: &Path, out: &Path) -> Result<u64> {
    export_keys(dir, out, None, "__")
}

/// As [`export`]; a KV dataset's `keys`, when given, choose the only rows written, in the
/// order given, read from the shards that hold them: with the dataset's tensor index, no other
/// shard is opened. Each is a full tensor key (`s3__v`) or a name (`s3`: every key
/// `NAME{sep}COLUMN`, in key order), as the Spark source's `keys` option takes it. One that
/// matches nothing is an error; batch datasets have no keys to choose.
///
/// # Errors
///
/// Those of [`Dataset::open`], and:
///
/// - [`DatasetError::Input`]: keys are given for a batch dataset or columns for a KV one, or a
///   key, name or column matches nothing in the dataset.
/// - [`DatasetError::Tensor`]: a shard cannot be read, or the output cannot be written.
/// - [`DatasetError::VersionRemoved`]: `dataset clean` removed the version read while it was
///   exported.
/// - [`DatasetError::Parquet`], [`DatasetError::Arrow`]: the Parquet output cannot be built.
pub fn export_keys(dir: &Path, out: &Path, keys: Option<&[String]>, sep: &str) -> Result<u64> {
    export_dataset(&Dataset::open(dir)?, out, keys, sep)
}

/// As [`export_keys`], of a dataset already open (a local folder or a store's).
///
/// # Errors
///
/// - [`DatasetError::Input`]: keys are given for a batch dataset or columns for a KV one, or a
///   key, name or column matches nothing in the dataset.
/// - [`DatasetError::Tensor`]: a shard cannot be read, or the output cannot be written.
/// - [`DatasetError::VersionRemoved`]: `dataset clean` removed the version read while it was
///   exported.
/// - [`DatasetError::Parquet`], [`DatasetError::Arrow`]: the Parquet output cannot be built.
pub fn export_dataset(ds: &Dataset, out: &Path, keys: Option<&[String]>, sep: &str) -> Result<u64> {
    export_choosing(ds, out, &StorageOptions::new(), keys, None, sep)
}

/// As [`export_dataset`]; a batch dataset's `columns`, when given, choose the only columns
/// written (in the shards' column order): on a store, only their bytes are read. One the
/// dataset lacks is an error; KV datasets choose by `keys`. `out` is a local file or an
/// object-store URL (`s3://`, `az://`, `gs://`) written with the store settings `storage`:
/// streamed up in parts, visible only when complete (a failed export leaves no object).
///
/// # Errors
///
/// - [`DatasetError::Input`]: keys are given for a batch dataset or columns for a KV one, or a
///   key, name or column matches nothing in the dataset.
/// - [`DatasetError::Tensor`]: a shard cannot be read, or the output cannot be written.
/// - [`DatasetError::VersionRemoved`]: `dataset clean` removed the version read while it was
///   exported.
/// - [`DatasetError::Parquet`], [`DatasetError::Arrow`]: the Parquet output cannot be built.
pub fn export_choosing(
    ds: &Dataset,
    out: &Path,
    storage: &StorageOptions,
    keys: Option<&[String]>,
    columns: Option<&[String]>,
    sep: &str,
) -> Result<u64> {
    let dir = ds.dir();
    if keys.is_some() && ds.mode() == DatasetMode::Batch {
        return Err(DatasetError::input(format!(
            "{}: a batch-mode dataset has no tensor keys to export by (keys name KV tensors)",
            dir.display()
        )));
    }
    if let Some(cols) = columns {
        if ds.mode() == DatasetMode::Kv {
            return Err(DatasetError::input(format!(
                "{}: a KV dataset's tensors are chosen by key, not by column",
                dir.display()
            )));
        }
        let have = &ds.manifest().schema;
        if let Some(c) = cols.iter().find(|c| !have.contains_key(*c)) {
            let mut names: Vec<&String> = have.keys().collect();
            names.sort();
            return Err(DatasetError::input(format!(
                "{}: no column '{c}' in the dataset (it has {names:?})",
                dir.display()
            )));
        }
    }
    let chosen = |name: &str| columns.is_none_or(|c| c.iter().any(|x| x == name));
    let pq = |source| DatasetError::Parquet {
        path: out.to_path_buf(),
        source,
    };
    let file = AtomicFile::create_with(out, storage)?;
    let mut rows = 0u64;
    let file = match ds.mode() {
        DatasetMode::Batch => {
            let mut writer: Option<ArrowWriter<AtomicFile>> = None;
            let mut file = Some(file);
            for i in 0..ds.manifest().shards.len() {
                let f = ds.file(i)?;
                let tensors: Vec<_> = f
                    .index()
                    .tensors
                    .iter()
                    .filter(|t| chosen(&t.name))
                    .collect();
                // Every column: a shard on a store is fetched whole, once; some columns: their
                // bytes alone, by range (`ShardFile::will_read` decides by the bytes asked).
                let asked = tensors
                    .iter()
                    .map(|t| t.data_range())
                    .map(|r| r.end - r.start);
                f.will_read(asked.sum()).map_err(|e| ds.removed_or(e))?;
                let mut cols = Vec::new();
                let mut fields = Vec::new();
                for t in tensors {
                    let n = *t.shape.first().unwrap_or(&0) as usize;
                    let bytes = f.tensor_bytes(&t.name).map_err(|e| ds.removed_or(e))?;
                    let v = leaf(t.dtype, &bytes)?;
                    let a = nest(v, n, &t.shape[1..])?;
                    fields.push(Field::new(&t.name, a.data_type().clone(), false));
                    cols.push(a);
                }
                let schema = Arc::new(Schema::new(fields));
                let batch = RecordBatch::try_new(schema.clone(), cols).map_err(arrow_msg)?;
                rows += batch.num_rows() as u64;
                if writer.is_none() {
                    writer = Some(
                        ArrowWriter::try_new(file.take().expect("once"), schema, None)
                            .map_err(pq)?,
                    );
                }
                writer.as_mut().expect("set").write(&batch).map_err(pq)?;
            }
            writer
                .expect("a dataset has a shard")
                .into_inner()
                .map_err(pq)?
        }
        DatasetMode::Kv => {
            let sfields = Fields::from(vec![
                Field::new("data", DataType::Binary, false),
                Field::new(
                    "shape",
                    DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
                    false,
                ),
                Field::new("dtype", DataType::Utf8, false),
            ]);
            let schema = Arc::new(Schema::new(vec![
                Field::new("tensor_key", DataType::Utf8, false),
                Field::new("tensor", DataType::Struct(sfields.clone()), false),
            ]));
            let mut w = ArrowWriter::try_new(file, schema.clone(), None).map_err(pq)?;
            let keys = match keys {
                Some(k) => {
                    let mut all: Vec<String> = ds.manifest().schema.keys().cloned().collect();
                    all.sort();
                    resolve_keys(dir, &all, k, sep)?
                }
                None => ds.tensor_keys()?,
            };
            // The shards of which these keys are most are downloaded whole, once; the rest
            // are read tensor by tensor, by range.
            ds.will_read_keys(&keys)?;
            for chunk in keys.chunks(1024) {
                let (mut k, mut data, mut shape, mut dtype) = (
                    StringBuilder::new(),
                    BinaryBuilder::new(),
                    ListBuilder::new(Int32Builder::new()),
                    StringBuilder::new(),
                );
                for key in chunk {
                    let t = ds.tensor(key)?;
                    k.append_value(key);
                    data.append_value(&t.data);
                    for &d in &t.shape {
                        shape.values().append_value(d as i32);
                    }
                    shape.append(true);
                    dtype.append_value(t.dtype.safetensors_name());
                }
                let st = StructArray::try_new(
                    sfields.clone(),
                    vec![
                        Arc::new(data.finish()),
                        Arc::new(shape.finish()),
                        Arc::new(dtype.finish()),
                    ],
                    None,
                )
                .map_err(arrow_msg)?;
                let batch =
                    RecordBatch::try_new(schema.clone(), vec![Arc::new(k.finish()), Arc::new(st)])
                        .map_err(arrow_msg)?;
                rows += batch.num_rows() as u64;
                w.write(&batch).map_err(pq)?;
            }
            w.into_inner().map_err(pq)?
        }
    };
    file.commit()?;
    Ok(rows)
}

/// The tensor keys that `wanted` (full keys or names) select, in the order given.
fn resolve_keys(dir: &Path, all: &[String], wanted: &[String], sep: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for w in wanted {
        if all.iter().any(|k| k == w) {
            out.push(w.clone());
            continue;
        }
        let of_name: Vec<&String> = all
            .iter()
            .filter(|k| k.rsplit_once(sep).is_some_and(|(name, _)| name == w))
            .collect();
        if of_name.is_empty() {
            return Err(DatasetError::input(format!(
                "{}: no tensor key or name '{w}' in the dataset (a key is NAME{sep}COLUMN)",
                dir.display()
            )));
        }
        out.extend(of_name.into_iter().cloned());
    }
    Ok(out)
}
