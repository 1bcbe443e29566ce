"""Ray Data: datasets written from a Ray Dataset and read back as one.

    import ray, tensorsmith.ray
    tensorsmith.ray.write_dataset(ds, "out/", batch_size=1024, dtype="F32")
    ds = tensorsmith.ray.read_dataset("out/", columns=["x"])

Writing is the Spark data source's protocol, the one commit protocol of local folders and
object stores alike: the driver starts a job (its heartbeat); each Ray write task pulls its
blocks as one Arrow stream through the Rust task writer, which writes and fsyncs the task's
shards (named after the task's index and its attempt) and moves or uploads each into the
dataset under its final name, where no version lists it yet, and returns a report; once
every task has succeeded, the driver commits the reports (`on_write_complete`: manifest,
index, KV duplicates across tasks, the dataset's next version by an exclusive create), and if
one failed it aborts (`on_write_failed`: every shard of the job removed, nothing committed).
A task Ray retries after a failure writes its rows again under new shard names: an attempt
that raised (an exception in its input, which the task raises as itself, not wrapped in an
Arrow stream error) removes its shards before it returns; one that was killed (a killed
worker; a timeout) leaves them to the commit or the abort, which remove every shard of the
job's attempts that the committed version does not list. Only the shards its last,
successful attempt reports are committed, so every row is written once. The write keeps the
dataset's block order (Ray's `preserve_order`, for its duration), so shards sort in row order:
where each block holds whole batches, the shards are those `tensorsmith dataset write`
writes for the same rows; otherwise each task's tail is handled as the CLI handles a
thread's.

Every write task and the driver must see the same path: on several nodes, a shared
filesystem mounted at the same place (object-store URLs are refused: not supported).

Reading: one read task per run of consecutive shards up to 128 MiB, Arrow blocks built from
the shards' maps without a Python object per value (as the Spark reader builds them; F16 and
BF16 as float32); `columns` opens only those tensors, `keys` (KV mode) only the shards holding
those names. The version read is the one current when `read_dataset` is called.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import ray
from ray.data import Datasink, Datasource, ReadTask
from ray.data.block import BlockAccessor, BlockMetadata

from . import _native, _shard_arrow
from ._options import Names, PathOrUrl, StorageOptions, option_texts, storage_pairs
from .errors import DatasetExists, OptionError

# Dataset dtype -> the NumPy type Arrow values are built from (Arrow has no bfloat16, and
# few compute kernels take float16).
_TARGETS = {
    "F64": np.float64, "F32": np.float32, "F16": np.float32, "BF16": np.float32,
    "F8_E4M3": np.float32, "F8_E5M2": np.float32,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}


def _arrow_type(dtype, rank):
    t = pa.from_numpy_dtype(np.dtype(_TARGETS[dtype]))
    for _ in range(rank):
        t = pa.list_(t)
    return t


def _plain(table: pa.Table) -> pa.Table:
    """Ray's tensor columns (an extension type over flat values plus a shape) as nested
    fixed-size lists, which the writer reads as tensors; other columns as they are."""
    cols, changed = [], False
    for col in table.columns:
        shape = getattr(col.type, "shape", None)
        if isinstance(col.type, pa.ExtensionType) and shape is not None and None not in shape:
            storage = col.combine_chunks().storage
            values = storage.flatten()
            for d in reversed(shape):
                values = pa.FixedSizeListArray.from_arrays(values, d)
            cols.append(values)
            changed = True
        else:
            cols.append(col)
    return pa.table(cols, names=table.column_names) if changed else table


def _location(path):
    """A store URL as given (every task reaches it with the storage options), else an
    absolute POSIX path every Ray node sees at the same place."""
    path = os.fspath(path)
    if "://" in str(path):
        return str(path)
    return os.path.abspath(path)


def _join(path, name):
    return path.rstrip("/") + "/" + name if "://" in path else os.path.join(path, name)


class _Pulled:
    """An iterator of blocks that remembers the exception it raised."""

    def __init__(self, it):
        self.it, self.error = iter(it), None

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self.it)
        except StopIteration:
            raise
        except BaseException as e:
            self.error = e
            raise


class _Sink(Datasink):
    def __init__(self, path, options, mode, storage=()):
        _native.check_options(options)  # on the driver: a typo fails before any task
        self.path, self.options, self.mode = path, options, mode
        self.storage = list(storage)  # (key, value) pairs: to the tasks, never printed
        self.job_id = uuid.uuid4().hex
        self.manifest = None
        self._beat = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_beat"] = None  # the driver's heartbeat stays on the driver
        return state

    def on_write_start(self, schema=None):
        self._beat = _native.JobHeartbeat(self.path, self.job_id, self.storage)

    def write(self, blocks, ctx):
        task = ctx.task_idx
        pulled = _Pulled(blocks)
        tables = (_plain(BlockAccessor.for_block(b).to_arrow()) for b in pulled)
        tables = (t for t in tables if t.num_rows)
        first = next(tables, None)
        if first is None:
            return ""
        schema = first.schema

        def same(t):
            # Blocks of one dataset may differ in metadata or nullability only.
            return t if t.schema.equals(schema) else t.cast(schema)

        batches = itertools.chain.from_iterable(
            same(t).to_batches() for t in itertools.chain([first], tables))
        stream = pa.RecordBatchReader.from_batches(schema, batches)
        try:
            return _native.write_job_task(stream, self.path, self.job_id, task,
                                          self.options, self.storage)
        except BaseException:
            # The task writer removed this attempt's shards before raising.
            if pulled.error is None:
                raise
        # The input's own exception (a block that failed upstream), not the Arrow stream
        # error wrapping it (a DatasetCorrupt), and with its own cause chain (raised outside
        # the handler): Ray's retry policies (`retry_exceptions`, `retried_map_errors`) see
        # the error as it was raised.
        raise pulled.error

    def _stop(self):
        if self._beat is not None:
            self._beat.stop()
            self._beat = None

    def on_write_complete(self, write_result):
        reports = [r for r in write_result.write_returns if r]
        self._stop()
        self.manifest = json.loads(_native.commit_job_reports(
            self.path, self.job_id, reports, self.options, self.mode, self.storage))

    def on_write_failed(self, error):
        self._stop()
        _native.abort_job_shards(self.path, self.job_id, self.storage)


def write_dataset(ds: ray.data.Dataset, path: PathOrUrl, *, mode: str = "error",
                  ray_remote_args: dict[str, Any] | None = None, concurrency: int | None = None,
                  storage_options: StorageOptions = None, **options: Any) -> dict[str, Any]:
    """Writes Ray Dataset `ds` as a dataset at `path` (options and modes of
    `tensorsmith.write_dataset`: batch_size or name_col, dtype, columns, ...; `mode` "error",
    "overwrite" or "append"). Returns the manifest. Fails (leaving nothing) if any write task
    fails after Ray's retries. `path` is a folder every node sees, or an object-store URL
    (`s3://bucket/prefix`, with `storage_options` as `tensorsmith.write_dataset` takes them):
    each task uploads its shards to their final names, the driver commits the version."""
    path = _location(path)
    storage = storage_pairs(storage_options)
    mode = str(mode).lower()
    if mode not in ("error", "errorifexists", "overwrite", "append"):
        raise OptionError(f"mode must be 'error', 'overwrite' or 'append', not {mode!r}")
    if mode in ("error", "errorifexists") and _native.dataset_exists(path, storage):
        raise DatasetExists(f"{path}: a dataset is already there (mode='error')")
    if "://" not in path:
        os.makedirs(path, exist_ok=True)
    sink = _Sink(path, option_texts(options), mode, storage)
    ctx = ray.data.DataContext.get_current()
    keep = ctx.execution_options.preserve_order
    ctx.execution_options.preserve_order = True
    try:
        ds.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
    finally:
        ctx.execution_options.preserve_order = keep
    return sink.manifest


class _Source(Datasource):
    def __init__(self, path, columns, keys, version, kv_separator, name_col, storage_options):
        path = _location(path)
        self.storage = storage_options or {}
        r = _native.DatasetReader(path, version, storage_pairs(self.storage))
        m = json.loads(r.manifest_json())
        self.mode, self.version = r.mode, r.version
        self.sep, self.name_col = kv_separator, name_col
        self.shards = [_join(path, s["shard_path"]) for s in m["shards"]]
        self.sizes = {_join(path, s["shard_path"]): s["bytes"] for s in m["shards"]}
        self.names = None
        wanted = [columns] if isinstance(columns, str) else columns
        if self.mode == "batch":
            if keys is not None:
                raise OptionError("keys: only a KV dataset has keys to choose")
            have = {c: s for c, s in m["schema"].items()}
            fields = [pa.field(c, _arrow_type(s["dtype"], len(s["shape"]) - 1), False)
                      for c, s in have.items()]
        else:
            cols = {}
            for key, s in m["schema"].items():
                name, found, col = key.rpartition(kv_separator)
                if not found:
                    raise OptionError(f"tensor key {key!r} has no separator {kv_separator!r} "
                                      "(set kv_separator)")
                this = (s["dtype"], len(s["shape"]))
                if cols.setdefault(col, this) != this:
                    raise OptionError(f"column {col!r}: tensors of {cols[col]} and {this} "
                                      "(dtype, rank) cannot share a column")
            if name_col in cols:
                raise OptionError(
                    f"name_col: {name_col!r} is a tensor column of this KV dataset (its tensor "
                    f"columns: {sorted(cols)}); pass another name_col for the names")
            fields = [pa.field(name_col, pa.string(), False)] + [
                pa.field(c, _arrow_type(d, r), True) for c, (d, r) in sorted(cols.items())]
            if keys is not None:
                self.names = {keys} if isinstance(keys, str) else set(keys)
                self.shards = _shard_arrow.shards_holding(self.shards, self.names, self.sep,
                                                          self.storage)
        if wanted is not None:
            have = [f.name for f in fields]
            missing = [c for c in wanted if c not in have]
            if missing:
                raise OptionError(f"columns: {missing} not in the dataset (it has {have})")
            keep = set(wanted) | ({name_col} if self.mode == "kv" else set())
            fields = [f for f in fields if f.name in keep]
        self.schema = pa.schema(fields)

    def estimate_inmemory_data_size(self):
        return sum(self.sizes[s] for s in self.shards)

    def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
        tasks = []
        for paths in _shard_arrow.group(self.shards, sizes=self.sizes):
            meta = BlockMetadata(num_rows=None, size_bytes=sum(self.sizes[p] for p in paths),
                                 input_files=tuple(paths), exec_stats=None)
            tasks.append(ReadTask(self._reader(paths), meta, schema=self.schema,
                                  per_task_row_limit=per_task_row_limit))
        return tasks

    def _reader(self, paths):
        schema, mode, sep, name_col, names = (self.schema, self.mode, self.sep, self.name_col,
                                              self.names)
        storage = self.storage

        def read():
            from . import safe_open

            for path in paths:
                with safe_open(path, framework="np", storage_options=storage) as f:
                    if mode == "batch":
                        rows = _shard_arrow.batch_rows(f, schema, _TARGETS)
                    else:
                        rows = _shard_arrow.kv_rows(f, schema, sep, name_col, _TARGETS, names)
                    for b in rows:
                        yield pa.Table.from_batches([b])

        return read


def read_dataset(path: PathOrUrl, columns: Names = None, keys: Names = None, *,
                 version: int | None = None, kv_separator: str = "__", name_col: str = "key",
                 storage_options: StorageOptions = None, **read_args: Any) -> ray.data.Dataset:
    """A dataset as a Ray Dataset: batch mode, a row per sample, a column per tensor column
    (lists nested as the sample's shape); KV mode, a row per name (`name_col`) and a column
    per tensor column (missing tensors null). `columns` reads only those; `keys` (KV) only
    those names. `path` may be an object-store URL, with `storage_options`. `read_args` go
    to `ray.data.read_datasource`."""
    return ray.data.read_datasource(
        _Source(path, columns, keys, version, kv_separator, name_col, storage_options),
        **read_args)


__all__ = ["write_dataset", "read_dataset"]
