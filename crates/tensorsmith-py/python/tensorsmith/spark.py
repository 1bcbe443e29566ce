"""A PySpark data source named "safetensors" (Spark 4's Python Data Source API), backed by the
Rust core.

    import tensorsmith.spark
    tensorsmith.spark.register(spark)
    df.write.format("safetensors").option("batch_size", 1024).option("dtype", "F32").save(path)
    spark.read.format("safetensors").load(path)

Writing: every task hands its Arrow batches to the Rust writer, which writes the task's shards
(named after the Spark partition id) into the job's staging folder and returns a report, the
task's commit message. The driver's `commit` moves the shards in and writes the index and the
manifest, last; `abort` deletes every shard of the job. Options are the dataset options of
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

import itertools
import json
import os
import shutil
import subprocess
import sys
import uuid
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
from ._options import option_texts
from .errors import OptionError
from .spark_read import _SPARK, batch_rows, file_row, kv_rows

_READ_OPTIONS = {"path", "rows", "kv_separator", "name_col", "columns"}


def _nested_type(dtype: str, rank: int):
    t = _SPARK[dtype][0]
    for _ in range(rank):
        t = ArrayType(t, containsNull=False)
    return t


class _Manifest:
    """One version's manifest (default: the current version's)."""

    def __init__(self, path: str, manifest: dict | None = None):
        if manifest is None:
            manifest = json.loads(_native.DatasetReader(path).manifest_json())
        self.m = manifest
        self.path = path

    def shards(self):
        return [os.path.join(self.path, s["shard_path"]) for s in self.m["shards"]]

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


@dataclass
class _Shards(InputPartition):
    paths: list


def _group(paths, limit=_shard_arrow.GROUP_BYTES):
    """One read partition per run of consecutive shards up to `limit` bytes."""
    return [_Shards(g) for g in _shard_arrow.group(paths, limit)]


@dataclass
class _Report(WriterCommitMessage):
    report: str  # JSON of the task's shards; "" for an empty partition


class SafetensorsDataSource(DataSource):
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

    def _dataset(self):
        """The manifest and the mode (from the first shard) of one version (the current one,
        or the `version` option), read once per instance: the tasks read that version's shards,
        which later commits retire rather than delete."""
        if not hasattr(self, "_opened"):
            path = self._path()
            version = self.options.get("version")
            r = _native.DatasetReader(path, None if version is None else int(version))
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
        opts = {k: v for k, v in self.options.items() if k.lower() != "path"}
        return _Writer(self._path(), option_texts(opts), overwrite)


class _Reader(DataSourceReader):
    def __init__(self, shards, mode, rows, sep, name_col, schema):
        self.shards, self.mode = shards, mode
        self.rows, self.sep, self.name_col = rows, sep, name_col
        self.spark_schema = schema
        self.names = None  # KV: the names to read (None: all)

    def partitions(self):
        if self.names is None:
            return _group(self.shards)
        return _group(_shard_arrow.shards_holding(self.shards, self.names, self.sep)) or [_Shards([])]

    def read(self, partition):
        from . import safe_open

        schema = self.spark_schema
        arrow_schema = pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable)
                                  for f in schema.fields])
        for path in partition.paths:
            with safe_open(path, framework="np") as f:
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
    def __init__(self, path, options, overwrite):
        _native.check_options(options)  # on the driver: a typo fails before any task runs
        self.path = path
        self.options = options
        self.mode = "overwrite" if overwrite else "append"
        # One id per job: the staging folder every task writes into. The driver marks it
        # and renews its heartbeat until the commit or the abort, so a clean never takes a
        # live job's folder and the folder of a driver that died is known as stale.
        self.job_id = uuid.uuid4().hex
        _HEARTBEATS[self.job_id] = _native.JobHeartbeat(path, self.job_id)

    def write(self, iterator):
        from pyspark import TaskContext

        first = next(iterator, None)
        if first is None:
            return _Report("")
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        stream = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], iterator))
        return _Report(_native.write_job_task(stream, self.path, self.job_id, task, self.options))

    def commit(self, messages):
        reports = [m.report for m in messages if m is not None and m.report]
        _stop_heartbeat(self.job_id)
        _native.commit_job_reports(self.path, self.job_id, reports, self.options, self.mode)

    def abort(self, messages):
        _stop_heartbeat(self.job_id)
        _native.abort_job_shards(self.path, self.job_id)


def write_dataset(spark, source, path, mode="error", tasks=None, **options):
    """Writes Parquet input as a dataset at `path`, Spark only scheduling: `source` is Parquet
    files or folders (paths or file: URIs), or a DataFrame that is a plain scan of Parquet
    files, possibly with a column selection (its columns become the `columns` option). The
    driver cuts the input as `tensorsmith dataset write` does; each of `tasks` Spark tasks
    (default: the default parallelism) runs the Rust Parquet -> shard writer on its rows; the
    driver commits (abort: every shard of the job removed). The shards are those `tensorsmith
    dataset write` writes on the same files and options. Every executor must be able to open
    the paths (a local or shared POSIX filesystem). Anything else (another scheme, another
    plan) is written through the "safetensors" data source instead, with a warning saying why.
    `mode` is "error", "overwrite" or "append". Returns a `DirectWrite` (manifest, per-task
    timeline), or None after a fallback.
    """
    import warnings

    from . import spark_direct

    try:
        if hasattr(source, "_jdf") or hasattr(source, "inputFiles"):
            files, columns = spark_direct.scan_of(source)
            if columns is not None and "columns" not in options:
                key = options.get("name_col")
                options = {**options, "columns": [c for c in columns if c != key]}
        else:
            files = spark_direct._files(source)
        return spark_direct.write(spark, files, path, mode, tasks, options)
    except spark_direct.NotDirect as why:
        warnings.warn(f"tensorsmith.spark.write_dataset: not the direct path ({why}); writing "
                      "through the safetensors data source instead", stacklevel=2)
    df = source if hasattr(source, "write") else spark.read.parquet(
        *([os.fspath(source)] if isinstance(source, (str, os.PathLike)) else map(os.fspath, source)))
    register(spark, check=False)
    w = df.write.format("safetensors").mode("overwrite" if str(mode).lower() == "overwrite"
                                             else "append")
    if str(mode).lower() in ("error", "errorifexists") and os.path.exists(
            os.path.join(os.fspath(path), "dataset_manifest.json")):
        raise spark_direct._native_exists(os.fspath(path))
    for k, v in option_texts(options).items():
        w = w.option(k, v)
    w.save(os.fspath(path))
    return None


def _worker_python(spark):
    """The interpreter Spark starts its Python workers with: `spark.pyspark.python`, else
    $PYSPARK_PYTHON, else `python3` (Spark's own order)."""
    try:
        conf = spark.conf.get("spark.pyspark.python", None)
    except Exception:  # noqa: BLE001 - an unset key on some Spark versions
        conf = None
    return conf or os.environ.get("PYSPARK_PYTHON") or "python3"


def check_workers(spark):
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
           f"environment, or .config(\"spark.pyspark.python\", {sys.executable!r}) on the session")
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


def register(spark=None, check=True):
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
    spark.dataSource.register(SafetensorsDataSource)
    return SafetensorsDataSource


def _register_active():
    try:
        from pyspark.sql import SparkSession

        s = SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001 - importing must never fail because of Spark's state
        return
    if s is not None:
        s.dataSource.register(SafetensorsDataSource)


_register_active()

__all__ = ["SafetensorsDataSource", "register", "write_dataset"]
