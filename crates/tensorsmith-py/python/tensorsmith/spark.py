"""A PySpark data source named "safetensors" (Spark 4's Python Data Source API), backed by the
Rust core.

    import tensorsmith.spark
    tensorsmith.spark.register(spark)
    df.write.format("safetensors").option("batch_size", 1024).option("dtype", "F32").save(path)
    spark.read.format("safetensors").load(path)

Writing: every task hands its Arrow batches to the Rust writer, which writes the task's shards
(named after the Spark partition id and the attempt), moves or uploads each to its final name
in the dataset, where no version lists it yet, and returns a report, the task's commit
message. The driver's `commit` creates the dataset's next version from the reports (then the
index and the manifest) and removes every other shard of the job's attempts; `abort` removes
every shard of the job. Options are the dataset options of
`tensorsmith.write_dataset`, same names. Save modes: Spark 4 allows Python data sources only
"append" (adds shards to the dataset at the path, or creates it) and "overwrite" (replaces
it; the old shards go once the new manifest is in place).

Reading: one partition per run of consecutive shards up to 128 MiB (at least one shard). Rows are samples (batch mode) or keys (KV mode: one row per
name, the tensor key split at the last `kv_separator`, with a `name_col` column, default
"key"), columns are arrays nested as the sample shape, so a round trip gives the original
DataFrame. `.option("rows", "file")` gives the original connector's shape instead: one row
per shard file, one struct column (data, shape, dtype) per tensor key.

KV reads of some names only: `.option("keys", "a,b")`, or a filter `name_col = 'a'` /
`name_col IN (...)` with `.option("filter_pushdown", "true")` and Spark's
`spark.sql.python.filterPushdown.enabled` set (Spark then hands the filter to the source; a
source that takes filters fails every read while that setting is off, hence the option).
Only the shards holding those names are read: found through the dataset's tensor index when
it has one, else from the shards' headers.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import uuid
from typing import Any
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource, DataSourceArrowWriter, DataSourceReader, EqualTo, In, InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, StringType, StructField, StructType,
)

from . import _native, _shard_arrow
from ._options import PathOrUrl, StorageOptions, option_texts, storage_pairs
from .errors import OptionError
from .spark_direct import drops, dropped_rows, log, log_dropped
from .spark_read import _SPARK, batch_rows, file_row, kv_rows

_READ_OPTIONS = {"path", "rows", "kv_separator", "name_col", "columns"}


def _nested_type(dtype: str, rank: int):
    t = _SPARK[dtype][0]
    for _ in range(rank):
        t = ArrayType(t, containsNull=False)
    return t


def _join(path: str, name: str) -> str:
    """`name` in the dataset at `path` (a folder or a URL prefix)."""
    if "://" in path:
        return path.rstrip("/") + "/" + name
    return os.path.join(path, name)


class _Manifest:
    """One version's manifest (default: the current version's)."""

    def __init__(self, path: str, manifest: dict | None = None):
        if manifest is None:
            manifest = json.loads(_native.DatasetReader(path).manifest_json())
        self.m = manifest
        self.path = path

    def shards(self):
        return [_join(self.path, s["shard_path"]) for s in self.m["shards"]]

    def sizes(self):
        return {_join(self.path, s["shard_path"]): s["bytes"] for s in self.m["shards"]}

    def schema(self):
        return self.m["schema"]


def _kv_columns(schema: dict, sep: str):
    """KV tensor keys split at the last separator: {column: (dtype, rank)}, {key: (name, column)}."""
    cols, split = {}, {}
    for key, s in schema.items():
        name, found, col = key.rpartition(sep)
        if not found:
            raise OptionError(f"tensor key {key!r} has no separator {sep!r} (set kv_separator)")
        this = (s["dtype"], len(s["shape"]))
        if cols.setdefault(col, this) != this:
            raise OptionError(
                f"column {col!r}: tensors of {cols[col]} and {this} (dtype, rank) cannot share a column")
        split[key] = (name, col)
    return cols, split


def _check_name_col(name_col: str, cols) -> None:
    """KV rows: the name column must not be one of the tensor columns (the row would have two
    columns of that name, a string and a tensor)."""
    if name_col in cols:
        raise OptionError(
            f"name_col: {name_col!r} is a tensor column of this KV dataset (its tensor columns: "
            f"{sorted(cols)}); set the name_col option to another column name for the names")


@dataclass
class _Shards(InputPartition):
    paths: list


def _group(paths, sizes=None, limit=_shard_arrow.GROUP_BYTES):
    """One read partition per run of consecutive shards up to `limit` bytes (`sizes`: each
    shard's bytes by path, from the manifest; else asked of the filesystem)."""
    return [_Shards(g) for g in _shard_arrow.group(paths, limit, sizes)]


# Data source options that are not dataset options: where and how to reach the dataset.
STORAGE_PREFIX = "storage."


def split_storage(options: dict, session: dict | None = None) -> tuple[dict, dict]:
    """(dataset options, storage options) of data source options: `storage.KEY` options are
    the storage options (`storage.endpoint_url`, `storage.key`, ...; fsspec's names, as
    `storage_options=` takes them), given to every task, over `session`'s (the
    `spark.tensorsmith.storage.KEY` settings when the source was registered)."""
    plain, storage = {}, dict(session or {})
    for k, v in options.items():
        if k.lower().startswith(STORAGE_PREFIX):
            storage[k[len(STORAGE_PREFIX):].lower()] = v
        else:
            plain[k] = v
    return plain, storage


@dataclass
class _Report(WriterCommitMessage):
    report: str  # JSON of the task's shards; "" for an empty partition
    task: int = 0
    dropped: int = 0  # rows of its partial last batch the task dropped (tail_strategy=drop)


class SafetensorsDataSource(DataSource):
    # The session's `spark.tensorsmith.storage.KEY` settings, read by `register` (a data
    # source runs where no session is at hand): storage options under the source's own.
    _session_storage: dict = {}

    @classmethod
    def name(cls):
        return "safetensors"

    def _path(self):
        try:
            return self.options["path"]
        except KeyError:
            raise OptionError("no path: use .save(path) or .load(path)") from None

    def _read_opts(self):
        rows = self.options.get("rows", "sample").lower()
        if rows not in ("sample", "file"):
            raise OptionError(f"rows must be 'sample' or 'file', not {rows!r}")
        return rows, self.options.get("kv_separator", "__"), self.options.get("name_col", "key")

    def _storage(self):
        return split_storage(self.options, self._session_storage)[1]

    def _dataset(self):
        """The manifest and the mode (from the first shard) of one version (the current one,
        or the `version` option), read once per instance: the tasks read that version's shards,
        which later commits retire rather than delete."""
        if not hasattr(self, "_opened"):
            path = self._path()
            version = self.options.get("version")
            r = _native.DatasetReader(path, None if version is None else int(version),
                                      storage_pairs(self._storage()))
            self._opened = (_Manifest(path, json.loads(r.manifest_json())), r.mode)
        return self._opened

    def schema(self):
        m, mode = self._dataset()
        rows, sep, name_col = self._read_opts()
        if rows == "file":
            tensor = StructType([StructField("data", BinaryType()),
                                 StructField("shape", ArrayType(IntegerType(), False)),
                                 StructField("dtype", StringType())])
            keys = sorted(m.schema()) if mode == "kv" else list(m.schema())
            return StructType(self._columns([StructField(k, tensor, True) for k in keys]))
        if mode == "batch":
            return StructType(self._columns(
                [StructField(c, _nested_type(s["dtype"], len(s["shape"]) - 1), False)
                 for c, s in m.schema().items()]))
        cols, _ = _kv_columns(m.schema(), sep)
        _check_name_col(name_col, cols)
        return StructType(self._columns(
            [StructField(name_col, StringType(), False)]
            + [StructField(c, _nested_type(d, r), True) for c, (d, r) in cols.items()]))

    def _columns(self, fields):
        """The `columns` read option: only these tensor columns are read (Spark 4's Python
        data sources get no column pruning; a schema given with `.schema(...)` prunes too)."""
        wanted = self.options.get("columns")
        if wanted is None:
            return fields
        wanted = [c.strip() for c in wanted.split(",") if c.strip()]
        have = {f.name for f in fields}
        missing = [c for c in wanted if c not in have]
        if missing:
            raise OptionError(f"columns: {missing} not in the dataset (it has {sorted(have)})")
        keep = set(wanted) | {self._read_opts()[2]}
        return [f for f in fields if f.name in keep]

    def reader(self, schema):
        m, mode = self._dataset()
        pushdown = self.options.get("filter_pushdown", "false").lower() == "true"
        r = (_FilteringReader if pushdown else _Reader)(m.shards(), mode, *self._read_opts(), schema)
        r.sizes, r.storage = m.sizes(), self._storage()
        keys = self.options.get("keys")
        if keys is not None:
            if mode != "kv" or r.rows != "sample":
                raise OptionError("keys: only a KV dataset read a row per name has keys to choose")
            # Names (`s3`) or full tensor keys (`s3__v`, the row of its name), as
            # `dataset export --key` takes them.
            sep, full = self._read_opts()[1], set(m.schema())
            r.names = {
                k.rpartition(sep)[0] if k in full else k
                for k in (k.strip() for k in keys.split(","))
                if k
            }
        return r

    def writer(self, schema, overwrite):
        opts, storage = split_storage(
            {k: v for k, v in self.options.items() if k.lower() != "path"},
            self._session_storage)
        return _Writer(self._path(), option_texts(opts), overwrite, storage_pairs(storage))


class _Reader(DataSourceReader):
    def __init__(self, shards, mode, rows, sep, name_col, schema):
        self.shards, self.mode = shards, mode
        self.rows, self.sep, self.name_col = rows, sep, name_col
        self.spark_schema = schema
        self.names = None  # KV: the names to read (None: all)
        self.sizes, self.storage = None, {}

    def partitions(self):
        if self.names is None:
            return _group(self.shards, self.sizes)
        holding = _shard_arrow.shards_holding(self.shards, self.names, self.sep, self.storage)
        return _group(holding, self.sizes) or [_Shards([])]

    def read(self, partition):
        from . import safe_open

        schema = self.spark_schema
        arrow_schema = pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable)
                                  for f in schema.fields])
        for path in partition.paths:
            with safe_open(path, framework="np", storage_options=self.storage) as f:
                if self.rows == "file":
                    yield file_row(f, arrow_schema)
                elif self.mode == "batch":
                    yield from batch_rows(f, arrow_schema)
                else:
                    yield from kv_rows(f, arrow_schema, self.sep, self.name_col, self.names)


class _FilteringReader(_Reader):
    """The reader with filter pushdown (`filter_pushdown` option)."""

    def pushFilters(self, filters):
        """KV rows: `name_col = 'a'` and `name_col IN (...)` are taken (exactly: Spark need
        not check them again); every other filter is Spark's."""
        for f in filters:
            vals = [f.value] if isinstance(f, EqualTo) else f.value if isinstance(f, In) else None
            if (self.mode == "kv" and self.rows == "sample" and vals is not None
                    and f.attribute == (self.name_col,) and all(isinstance(v, str) for v in vals)):
                self.names = set(vals) if self.names is None else self.names & set(vals)
            else:
                yield f


def _arrow_type(t):
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(t)


# Heartbeats of the jobs this driver runs, by job id (kept out of the writer, which is
# pickled to the executors).
_HEARTBEATS = {}


def _stop_heartbeat(job_id):
    beat = _HEARTBEATS.pop(job_id, None)
    if beat is not None:
        beat.stop()


class _Writer(DataSourceArrowWriter):
    def __init__(self, path, options, overwrite, storage=()):
        _native.check_options(options)  # on the driver: a typo fails before any task runs
        self.path = path
        self.options = options
        self.storage = list(storage)  # (key, value) pairs: to the tasks, never printed
        self.mode = "overwrite" if overwrite else "append"
        # One id per job: the staging folder every task writes into (on a store: the
        # job's heartbeat object its tasks check before each upload). The driver marks it
        # and renews its heartbeat until the commit or the abort, so a clean never takes a
        # live job's shards and those of a driver that died are known as stale.
        self.job_id = uuid.uuid4().hex
        _HEARTBEATS[self.job_id] = _native.JobHeartbeat(path, self.job_id, self.storage)

    def write(self, iterator):
        from pyspark import TaskContext

        first = next(iterator, None)
        if first is None:
            return _Report("")
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        stream = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], iterator))
        report = _native.write_job_task(stream, self.path, self.job_id, task, self.options,
                                        self.storage)
        dropped = dropped_rows(report, self.options)
        if dropped:
            log.warning("tensorsmith: task %d dropped its last %d row(s) (tail_strategy=drop: "
                        "fewer than batch_size)", task, dropped)
        return _Report(report, task, dropped)

    def commit(self, messages):
        done = [m for m in messages if m is not None and m.report]
        _stop_heartbeat(self.job_id)
        _native.commit_job_reports(self.path, self.job_id, [m.report for m in done],
                                   self.options, self.mode, self.storage)
        if drops(self.options):
            log_dropped({m.task: m.dropped for m in done})

    def abort(self, messages):
        _stop_heartbeat(self.job_id)
        _native.abort_job_shards(self.path, self.job_id, self.storage)


def _conf_storage(spark) -> dict:
    """Storage options from the session's `spark.tensorsmith.storage.KEY` settings."""
    prefix = "spark.tensorsmith.storage."
    try:
        conf = spark.conf.getAll  # Spark 4: a dict of every set runtime option
        items = conf.items() if isinstance(conf, dict) else conf().items()
    except Exception:  # noqa: BLE001 - older sessions: the SparkConf only
        items = spark.sparkContext.getConf().getAll()
    return {k[len(prefix):]: v for k, v in items if k.startswith(prefix)}


def write_dataset(spark: Any, source: Any, path: PathOrUrl, mode: str = "error",
                  tasks: int | None = None, storage_options: StorageOptions = None,
                  **options: Any) -> Any:
    """Writes Parquet input as a dataset at `path`, Spark only scheduling: `source` is Parquet
    files or folders (paths or file: URIs, or object-store URLs: `s3://…/in/` lists a prefix,
    and each task reads only its row groups by range), or a DataFrame that is a plain scan of Parquet
    files, possibly with a column selection (its columns become the `columns` option). The
    driver cuts the input as `tensorsmith dataset write` does; each of `tasks` Spark tasks
    (default: the default parallelism) runs the Rust Parquet -> shard writer on its rows; the
    driver commits (abort: every shard of the job removed). The shards are those `tensorsmith
    dataset write` writes on the same files and options. Every executor must be able to open
    the input paths (a local or shared POSIX filesystem). Anything else (another scheme,
    another plan) is written through the "safetensors" data source instead, with a warning
    saying why. `path` may be an object-store URL (`s3://bucket/prefix`): each task uploads
    its shards straight to their final names and the driver commits the version with a
    conditional put; `storage_options` (a dict, as `tensorsmith.write_dataset` takes it) and
    the session's `spark.tensorsmith.storage.KEY` settings (the dict wins) reach every task.
    `mode` is "error", "overwrite" or "append". Returns a `DirectWrite` (manifest, per-task
    timeline), or None after a fallback.
    """
    import warnings

    from . import spark_direct

    storage = {**_conf_storage(spark), **(storage_options or {})}
    pairs = storage_pairs(storage)
    try:
        if hasattr(source, "_jdf") or hasattr(source, "inputFiles"):
            files, columns = spark_direct.scan_of(source)
            files = spark_direct._files(files, pairs)
            if columns is not None and "columns" not in options:
                key = options.get("name_col")
                options = {**options, "columns": [c for c in columns if c != key]}
        else:
            files = spark_direct._files(source, pairs)
        return spark_direct.write(spark, files, path, mode, tasks, options, pairs)
    except spark_direct.NotDirect as why:
        warnings.warn(f"tensorsmith.spark.write_dataset: not the direct path ({why}); writing "
                      "through the safetensors data source instead", stacklevel=2)
    df = source if hasattr(source, "write") else spark.read.parquet(
        *([os.fspath(source)] if isinstance(source, (str, os.PathLike)) else map(os.fspath, source)))
    register(spark, check=False)
    w = df.write.format("safetensors").mode("overwrite" if str(mode).lower() == "overwrite"
                                             else "append")
    if str(mode).lower() in ("error", "errorifexists") and _native.dataset_exists(
            os.fspath(path), pairs):
        raise spark_direct._native_exists(os.fspath(path))
    for k, v in option_texts(options).items():
        w = w.option(k, v)
    for k, v in pairs:
        w = w.option(STORAGE_PREFIX + k, v)
    w.save(os.fspath(path))
    return None


def _worker_python(spark):
    """The interpreter Spark starts its Python workers with. PySpark fixes it when the
    SparkContext starts (`sc.pythonExec`: $PYSPARK_PYTHON as the driver's process saw it, which
    spark-submit sets from `spark.pyspark.python`), so that is the answer wherever there is a
    context: a `spark.pyspark.python` given later, as `SparkSession.builder.config` gives it in
    a Python that is already running, is in the conf but not what the workers run. Without a
    context (Spark Connect), the conf, else $PYSPARK_PYTHON, else `python3`."""
    try:
        exe = spark.sparkContext.pythonExec
    except Exception:  # noqa: BLE001 - Spark Connect has no context; test doubles none either
        exe = None
    if isinstance(exe, str) and exe:
        return exe
    try:
        conf = spark.conf.get("spark.pyspark.python", None)
    except Exception:  # noqa: BLE001 - an unset key on some Spark versions
        conf = None
    return conf or os.environ.get("PYSPARK_PYTHON") or "python3"


def check_workers(spark: Any) -> None:
    """Fails early, with the fix, when Spark's Python workers cannot import tensorsmith (the
    usual first failure: a worker interpreter outside the venv, which otherwise shows as a
    ModuleNotFoundError deep in a Java stack trace). Checked where the driver can tell: the
    worker interpreter runs on this machine (local masters always; on a cluster, when the same
    path exists here)."""
    exe = _worker_python(spark)
    found = shutil.which(exe)
    local = str(spark.conf.get("spark.master", "local")).startswith("local")
    if found is None and not local:
        return
    if found is not None and os.path.abspath(found) == sys.executable:
        return
    fix = (f"point them at an interpreter that has it: PYSPARK_PYTHON={sys.executable} in the "
           f"environment before the session starts (a spark.pyspark.python set on the builder "
           f"of a running Python does not reach them; spark-submit's --conf does)")
    if found is None:
        raise RuntimeError(f"Spark's Python workers run {exe!r}, which does not exist here; {fix}")
    try:
        r = subprocess.run([found, "-c", "import tensorsmith"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"Spark's Python workers run {exe!r}, which could not be started "
                           f"({e}); {fix}") from None
    if r.returncode != 0:
        last = (r.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"Spark's Python workers run {exe!r}, which cannot import tensorsmith "
                           f"({last}); {fix}")


def register(spark: Any = None, check: bool = True) -> None:
    """Registers the "safetensors" data source with `spark` (default: the active session).
    With `check`, first makes sure Spark's Python workers can import tensorsmith
    ([`check_workers`])."""
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("no active SparkSession: pass one to tensorsmith.spark.register")
    if check:
        check_workers(spark)
    source = _with_session_storage(spark)
    spark.dataSource.register(source)
    return source


def _with_session_storage(spark):
    """The data source, with the session's `spark.tensorsmith.storage.KEY` settings as its
    storage options when there are any: a subclass made here, which Spark pickles by value
    (settings included) for the workers that run the source."""
    storage = _conf_storage(spark)
    if not storage:
        return SafetensorsDataSource
    return type("SafetensorsDataSourceWithStorage", (SafetensorsDataSource,),
                {"_session_storage": storage, "__module__": __name__})


def _register_active():
    try:
        from pyspark.sql import SparkSession

        s = SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001 - importing must never fail because of Spark's state
        return
    if s is not None:
        s.dataSource.register(_with_session_storage(s))


_register_active()

__all__ = ["SafetensorsDataSource", "register", "write_dataset"]
