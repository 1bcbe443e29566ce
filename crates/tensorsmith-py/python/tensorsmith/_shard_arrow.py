"""Arrow record batches built from a shard's memory, for the readers of other engines (the
Spark data source, the Ray datasource): each column's values are one NumPy view of the
shard's map, or on a store its rows read by range a batch at a time (cast only where the
engine lacks the type, by a table dtype -> NumPy type the caller gives), wrapped as Arrow without a Python object per value; list offsets computed
with NumPy. Batches are bounded (`CHUNK_BYTES` of values, `CHUNK_ROWS` rows), whatever the
shard's size. Batch mode: a sample per row; KV mode: a name per row, tensors of any shape
(ragged lists), missing ones null. Also which shards a read needs: groups of consecutive
shards per read task, and the shards holding some KV names."""

import os

import numpy as np
import pyarrow as pa

CHUNK_ROWS = 4096
CHUNK_BYTES = 64 << 20


def arrow_values(arr: np.ndarray, target) -> pa.Array:
    """`arr`'s values, flat, as `target` (a NumPy type; None: U64 as decimal(20, 0), for
    engines without unsigned 64-bit integers)."""
    flat = arr.reshape(-1)
    if target is None:
        return pa.array(flat, type=pa.uint64()).cast(pa.decimal128(20, 0))
    return pa.array(flat.astype(target, copy=False))


def nested(arr: np.ndarray, target, sample_shape) -> pa.Array:
    """Rows of `arr` (shape [n, *sample_shape]) as Arrow lists nested like the sample."""
    out = arrow_values(arr, target)
    outer = [arr.shape[0], *sample_shape]
    for level in range(len(sample_shape), 0, -1):
        lists = int(np.prod(outer[:level], dtype=np.int64))
        offsets = pa.array(np.arange(lists + 1, dtype=np.int64) * outer[level], type=pa.int64())
        out = pa.LargeListArray.from_arrays(offsets, out).cast(pa.list_(out.type))
    return out


def batch_rows(f, arrow_schema, targets):
    """Batch mode: the columns of `arrow_schema` of shard `f` (a `safe_open` handle), a row
    per sample. A mapped shard's columns are views of its map; a shard on a store without
    digests to check is read a batch of rows at a time, each column's rows by one ranged read
    (`_ranged_rows`): only the columns asked for travel, and memory holds one batch."""
    names = arrow_schema.names
    shapes = {name: f.get_shape(name) for name in names}
    n = shapes[names[0]][0] if names else 0
    row_bytes = sum(_nbytes(f, name) // max(shapes[name][0], 1) for name in names)
    step = max(1, min(CHUNK_ROWS, CHUNK_BYTES // max(row_bytes, 1)))
    rows = _ranged_rows(f, names) if _ranged(f) else _view_rows(f, names)
    for start in range(0, n, step):
        cols = []
        for name in names:
            t = rows(name, start, min(start + step, n))
            cols.append(nested(t, targets[f.get_dtype(name)], t.shape[1:]))
        yield pa.RecordBatch.from_arrays(cols, schema=arrow_schema)


def _nbytes(f, key):
    """A tensor's bytes, from the header (nothing read)."""
    from ._numpy import dtype_of

    dtype, shape, layout = f._f.info_of(key)
    return int(np.prod(shape, dtype=np.int64)) * dtype_of(dtype, layout).itemsize


def _ranged(f):
    """Whether `f` is read by range (not mapped: a shard on a store) with no digests to check
    (those are checked over whole tensors, by `get_tensor`)."""
    return f._f.local_file(0) is None and "tensorsmith.digest" not in (f.metadata() or {})


def _view_rows(f, names):
    """rows(name, a, b): rows a..b of column `name`, a slice of the whole tensor (a view of
    a mapped shard)."""
    tensors = {name: f.get_tensor(name) for name in names}

    def rows(name, a, b):
        return tensors[name][a:b]

    return rows


def _ranged_rows(f, names):
    """rows(name, a, b): rows a..b of column `name` read by one ranged read into a new array
    (a tensor not stored raw: sliced from the whole, as `_view_rows`)."""
    from ._numpy import dtype_of

    if any(f._f.raw_range(name) is None for name in names):
        return _view_rows(f, names)
    where = {}
    for name in names:
        dtype, shape, layout = f._f.info_of(name)
        i, start, end = f._f.raw_range(name)
        row = (end - start) // max(shape[0], 1)
        where[name] = (dtype_of(dtype, layout), list(shape[1:]), i, start, row)

    def rows(name, a, b):
        dt, inner, i, start, row = where[name]
        out = np.empty([b - a, *inner], dtype=dt)
        if b > a and row:
            f._f.read_into(i, start + a * row, (b - a) * row, out.ctypes.data)
        return out

    return rows


def kv_rows(f, arrow_schema, sep, name_col, targets, names=None):
    """KV mode: a row per name (sorted; only those of `names` when given), in batches
    bounded by CHUNK_BYTES of the requested tensors."""
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
                size += _nbytes(f, key)  # from the header: a tensor on a store is read once
        if size >= CHUNK_BYTES or len(chunk) >= CHUNK_ROWS:
            yield _kv_batch(f, arrow_schema, rows, chunk, name_col, targets)
            chunk, size = [], 0
    if chunk:
        yield _kv_batch(f, arrow_schema, rows, chunk, name_col, targets)


def _kv_batch(f, arrow_schema, rows, names, name_col, targets):
    cols = []
    for field in arrow_schema:
        if field.name == name_col:
            cols.append(pa.array(names, type=pa.string()))
            continue
        keys = [rows[n].get(field.name) for n in names]
        tensors = [f.get_tensor(k) if k is not None else None for k in keys]
        dtype = next((f.get_dtype(k) for k in keys if k is not None), None)
        cols.append(_ragged(tensors, dtype, field.type, targets))
    return pa.RecordBatch.from_arrays(cols, schema=arrow_schema)


def _ragged(tensors, dtype, arrow_type, targets):
    """One list value per tensor (None: null), nested as deep as `arrow_type`, each tensor of
    its own shape: the values concatenated once, the offsets of each level from the shapes."""
    rank = 0
    t = arrow_type
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        t, rank = t.value_type, rank + 1
    if dtype is None:  # no tensor of this column among these names
        return pa.nulls(len(tensors), type=arrow_type)
    present = [x for x in tensors if x is not None]
    values = arrow_values(np.concatenate([x.reshape(-1) for x in present]), targets[dtype])
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


# Shards per read task: consecutive shards up to this many bytes (Spark's own
# spark.sql.files.maxPartitionBytes default), at least one: fewer, larger tasks cost an
# engine less per byte than a task per small shard.
GROUP_BYTES = 128 << 20


def group(paths, limit=GROUP_BYTES, sizes=None):
    """`paths` cut into runs of consecutive shards of at most `limit` bytes (at least one).
    `sizes`: each shard's bytes by path (the manifest's; else asked of the filesystem)."""
    groups, cur, size = [], [], 0
    for p in paths:
        n = sizes[p] if sizes is not None else os.path.getsize(p)
        if cur and size + n > limit:
            groups.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += n
    if cur:
        groups.append(cur)
    return groups


def shards_holding(shards, names, sep, storage_options=None):
    """The shards (in manifest order) holding a tensor of one of `names`: from the tensor
    index beside them when every entry of it names one of them (else it is another write's),
    otherwise from each shard's header (the only way on object storage)."""
    import pyarrow.parquet as pq

    from . import safe_open

    by_name = {os.path.basename(s): s for s in shards}
    index = os.path.join(os.path.dirname(shards[0]), "_tensor_index.parquet") if shards else ""
    holding = None
    if "://" not in index and os.path.exists(index):
        t = pq.read_table(index, columns=["tensor_key", "file_name"])
        keys, files = t.column(0).to_pylist(), t.column(1).to_pylist()
        if files and all(f in by_name for f in files):
            holding = {f for k, f in zip(keys, files) if k.rpartition(sep)[0] in names}
    if holding is None:
        holding = set()
        for s in shards:
            with safe_open(s, framework="np", storage_options=storage_options) as f:
                if any(k.rpartition(sep)[0] in names for k in f.keys()):
                    holding.add(os.path.basename(s))
    return [s for s in shards if os.path.basename(s) in holding]
