"""Arrow record batches of the "safetensors" Spark data source's reader, built from a shard's
memory: each column's values are one NumPy view of the shard's map (cast only where Spark has
no such type: F16/BF16 to float, unsigned to wider signed), wrapped as Arrow without a Python
object per value; list offsets computed with NumPy. Batches are bounded (`CHUNK_BYTES` of
values, `CHUNK_ROWS` rows), whatever the shard's size. Batch mode: a sample per row; KV mode:
a name per row, tensors of any shape (ragged lists), missing ones null; `rows=file`: a row
per shard.
"""

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    ByteType, DecimalType, DoubleType, FloatType, IntegerType, LongType, ShortType,
)

# Dataset dtype -> (Spark type, the NumPy type its Arrow values are built from).
_SPARK = {
    "F64": (DoubleType(), np.float64), "F32": (FloatType(), np.float32),
    "F16": (FloatType(), np.float32), "BF16": (FloatType(), np.float32),
    "I64": (LongType(), np.int64), "I32": (IntegerType(), np.int32),
    "I16": (ShortType(), np.int16), "I8": (ByteType(), np.int8),
    "U32": (LongType(), np.int64), "U16": (IntegerType(), np.int32), "U8": (ShortType(), np.int16),
    "U64": (DecimalType(20, 0), None),
}


def _arrow_values(arr: np.ndarray, dtype: str) -> pa.Array:
    flat = arr.reshape(-1)
    target = _SPARK[dtype][1]
    if target is None:  # U64: Spark has no unsigned 64-bit integers
        return pa.array(flat, type=pa.uint64()).cast(pa.decimal128(20, 0))
    return pa.array(flat.astype(target, copy=False))


def _nested(arr: np.ndarray, dtype: str, sample_shape) -> pa.Array:
    """Rows of `arr` (shape [n, *sample_shape]) as Arrow lists nested like the sample."""
    out = _arrow_values(arr, dtype)
    outer = [arr.shape[0], *sample_shape]
    for level in range(len(sample_shape), 0, -1):
        lists = int(np.prod(outer[:level], dtype=np.int64))
        offsets = pa.array(np.arange(lists + 1, dtype=np.int64) * outer[level], type=pa.int64())
        out = pa.LargeListArray.from_arrays(offsets, out).cast(pa.list_(out.type))
    return out


CHUNK_ROWS = 4096
CHUNK_BYTES = 64 << 20


def file_row(f, arrow_schema):
    cols = []
    names = set(f.keys())
    for field in arrow_schema:
        if field.name in names:
            buf = f._f.tensor_bytes(field.name)
            dtype, shape, _ = f._f.info_of(field.name)
            cols.append(pa.array([{"data": bytes(buf), "shape": list(shape), "dtype": dtype}],
                                 type=field.type))
        else:
            cols.append(pa.nulls(1, type=field.type))
    return pa.RecordBatch.from_arrays(cols, schema=arrow_schema)


def batch_rows(f, arrow_schema):
    tensors = {name: f.get_tensor(name) for name in arrow_schema.names}
    n = len(next(iter(tensors.values()))) if tensors else 0
    row_bytes = sum(t[:1].nbytes for t in tensors.values())
    step = max(1, min(CHUNK_ROWS, CHUNK_BYTES // max(row_bytes, 1)))
    for start in range(0, n, step):
        cols = []
        for name in arrow_schema.names:
            t = tensors[name][start:start + step]
            cols.append(_nested(t, f.get_dtype(name), t.shape[1:]))
        yield pa.RecordBatch.from_arrays(cols, schema=arrow_schema)


def kv_rows(f, arrow_schema, sep, name_col, names=None):
    """A row per name (sorted; only those of `names` when given), in batches bounded by
    CHUNK_BYTES of the requested tensors."""
    rows = {}
    for key in f.keys():
        name, _, col = key.rpartition(sep)
        if names is None or name in names:
            rows.setdefault(name, {})[col] = key
    wanted = [c for c in arrow_schema.names if c != name_col]
    chunk, size = [], 0
    for name in sorted(rows):
        chunk.append(name)
        for c in wanted:
            key = rows[name].get(c)
            if key is not None:
                size += f.get_tensor(key).nbytes
        if size >= CHUNK_BYTES or len(chunk) >= CHUNK_ROWS:
            yield _kv_batch(f, arrow_schema, rows, chunk, name_col)
            chunk, size = [], 0
    if chunk:
        yield _kv_batch(f, arrow_schema, rows, chunk, name_col)


def _kv_batch(f, arrow_schema, rows, names, name_col):
    cols = []
    for field in arrow_schema:
        if field.name == name_col:
            cols.append(pa.array(names, type=pa.string()))
            continue
        keys = [rows[n].get(field.name) for n in names]
        tensors = [f.get_tensor(k) if k is not None else None for k in keys]
        dtype = next((f.get_dtype(k) for k in keys if k is not None), None)
        cols.append(_ragged(tensors, dtype, field.type))
    return pa.RecordBatch.from_arrays(cols, schema=arrow_schema)


def _ragged(tensors, dtype, arrow_type):
    """One list value per tensor (None: null), nested as deep as `arrow_type`, each tensor of
    its own shape: the values concatenated once, the offsets of each level from the shapes."""
    rank = 0
    t = arrow_type
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        t, rank = t.value_type, rank + 1
    if dtype is None:  # no tensor of this column among these names
        return pa.nulls(len(tensors), type=arrow_type)
    present = [x for x in tensors if x is not None]
    values = _arrow_values(np.concatenate([x.reshape(-1) for x in present]), dtype)
    out = values
    for level in range(rank - 1, -1, -1):
        if level == 0:
            lens = np.array([x.shape[0] if x is not None else 0 for x in tensors], dtype=np.int64)
        else:
            lens = np.concatenate([np.full(int(np.prod(x.shape[:level])), x.shape[level], np.int64)
                                   for x in present] or [np.zeros(0, np.int64)])
        offsets = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        if offsets[-1] >= 2**31:
            raise ValueError("a KV batch holds over 2^31 values in one column")
        mask = (pa.array([x is None for x in tensors], pa.bool_())
                if level == 0 and len(present) < len(tensors) else None)
        out = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), out, mask=mask)
    return out
