"""Arrow record batches of the "safetensors" Spark data source's reader, built from a shard's
memory by `_shard_arrow` (casts only where Spark has no such type: F16/BF16 to float,
unsigned to wider signed). Batch mode: a sample per row; KV mode: a name per row, tensors of
any shape (ragged lists), missing ones null; `rows=file`: a row per shard.
"""

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    ByteType, DecimalType, DoubleType, FloatType, IntegerType, LongType, ShortType,
)

from . import _shard_arrow

# Dataset dtype -> (Spark type, the NumPy type its Arrow values are built from).
_SPARK = {
    "F64": (DoubleType(), np.float64), "F32": (FloatType(), np.float32),
    "F16": (FloatType(), np.float32), "BF16": (FloatType(), np.float32),
    "I64": (LongType(), np.int64), "I32": (IntegerType(), np.int32),
    "I16": (ShortType(), np.int16), "I8": (ByteType(), np.int8),
    "U32": (LongType(), np.int64), "U16": (IntegerType(), np.int32), "U8": (ShortType(), np.int16),
    "U64": (DecimalType(20, 0), None),
}


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


# Dataset dtype -> the NumPy type Spark's Arrow values are built from (None: decimal).
_TARGETS = {d: t for d, (_, t) in _SPARK.items()}


def batch_rows(f, arrow_schema):
    return _shard_arrow.batch_rows(f, arrow_schema, _TARGETS)


def kv_rows(f, arrow_schema, sep, name_col, names=None):
    return _shard_arrow.kv_rows(f, arrow_schema, sep, name_col, _TARGETS, names)
