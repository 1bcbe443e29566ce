"""The direct path of `tensorsmith.spark.write_dataset`: Parquet input written by Spark tasks
that each run the Rust Parquet -> shard writer on their own range of rows. Spark only
schedules; nothing goes through Spark's rows, its Arrow conversion or a Python worker's socket.

The driver cuts the input as `tensorsmith dataset write` does (whole batches per task in batch
mode, whole rows in KV mode), so the committed shards are the ones the CLI writes on the same
files and options. Tasks move their shards into the dataset, where no version lists them until the driver
commits, or aborts (every shard of the job removed), as the data source does. Every executor must be able to open
the input paths (a local or shared POSIX filesystem), or read them from object storage (each
task reads only its row groups, by range); the output may be a folder they all see or an
object-store URL (tasks upload their shards, the driver commits).
"""

import json
import logging
import os
import resource
import time
import uuid
from dataclasses import dataclass, field

from . import _native
from ._options import option_texts
from .errors import OptionError

_MODES = {"error": "error", "errorifexists": "error", "overwrite": "overwrite", "append": "append"}


class NotDirect(Exception):
    """The input cannot take the direct path; the message says why."""


def _local_path(p) -> str:
    """A POSIX path from a path or a file: URI; other schemes (but those the Rust reader
    opens, `_READ_SCHEMES`) are not direct."""
    p = os.fspath(p)
    if "://" in p or p.startswith("file:"):
        scheme = p.split(":", 1)[0].lower()
        if scheme != "file":
            raise NotDirect(f"{p!r} is neither on a POSIX filesystem every executor can open "
                            f"nor at a URL tensorsmith reads ({scheme}://)")
        from urllib.parse import unquote, urlparse

        p = unquote(urlparse(p).path)
    return p


# URL schemes the Rust reader opens itself (by range, with the storage options).
_READ_SCHEMES = {"s3", "s3a", "az", "abfs", "abfss", "gs", "hf", "http", "https"}


def _files(paths, storage=()) -> list:
    """Files of the input, in order: a folder gives its Parquet files sorted by name (hidden
    and `_`-prefixed files skipped, as Spark does); so does an object-store URL ending with
    `/` (listed with `storage`, the storage option pairs), which every executor reads by
    range itself. Folders and prefixes are listed by the Rust lister `tensorsmith dataset
    write` uses, which refuses a Hive-partitioned folder (`key=value` subfolders: the
    partition columns are not in its files) by name."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in map(os.fspath, paths):
        scheme = p.split("://", 1)[0].lower() if "://" in p else None
        if scheme in _READ_SCHEMES:
            out += _native.input_files([p], list(storage))
            continue
        p = _local_path(p)
        if os.path.isdir(p):
            out += _native.input_files([p], list(storage))
        else:
            out.append(p)
    if not out:
        raise OptionError(f"no input files in {paths!r}")
    return out


def scan_of(df):
    """(files, columns) of a DataFrame that is a plain scan of Parquet files, possibly with a
    column selection (columns: None for all); NotDirect naming what else it is."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        raise NotDirect("the DataFrame has no JVM plan to inspect (Spark Connect)")
    plan = jdf.queryExecution().optimizedPlan()
    columns = None
    kind = plan.getClass().getSimpleName()
    if kind == "Project":
        exprs = plan.projectList()
        columns = []
        for i in range(exprs.size()):
            e = exprs.apply(i)
            if e.getClass().getSimpleName() != "AttributeReference":
                raise NotDirect(f"the DataFrame computes a column ({e.sql()}), it is not a plain "
                                "column selection")
            columns.append(e.name())
        plan = plan.child()
        kind = plan.getClass().getSimpleName()
    if kind != "LogicalRelation":
        raise NotDirect(f"the DataFrame's plan is not a file scan with a column selection "
                        f"(found {kind})")
    rel = plan.relation()
    if rel.getClass().getSimpleName() != "HadoopFsRelation":
        raise NotDirect(f"the DataFrame reads a {rel.getClass().getSimpleName()}, not files")
    fmt = rel.fileFormat().toString().lower()
    if "parquet" not in fmt:
        raise NotDirect(f"the DataFrame reads {fmt} files, not Parquet")
    if rel.partitionSchema().size() > 0:
        raise NotDirect("the DataFrame reads a partitioned folder (partition columns are not in "
                        "the files)")
    return sorted(df.inputFiles()), columns


# Rows dropped by tail_strategy=drop are logged here (tasks: in the executor's log; the job's
# sum: on the driver).
log = logging.getLogger("tensorsmith.spark")


def drops(options: dict) -> bool:
    """Whether the options drop each task's partial last batch (batch mode, tail_strategy
    drop)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    return opts.get("tail_strategy", "").lower() == "drop" and "batch_size" in opts


def dropped_rows(report: str, options: dict) -> int:
    """Rows a batch-mode task read but wrote into no shard: with `tail_strategy=drop`, its
    partial last batch (each task's tail is its own, as the connector drops it); 0 otherwise.
    `report` is the task's report (JSON text), `options` the dataset options as texts."""
    if not report or not drops(options):
        return 0
    r = json.loads(report)
    return max(0, int(r["rows"]) - sum(int(s["samples_count"]) for s in r["shards"]))


def log_dropped(dropped: dict) -> None:
    """The job's summary of `tail_strategy=drop` (a log line on the driver): how many rows
    each task dropped ({task: rows})."""
    total = sum(dropped.values())
    each = ", ".join(f"task {t}: {n}" for t, n in sorted(dropped.items()))
    log.warning("tensorsmith: tail_strategy=drop: %d row(s) dropped in all (%s)", total,
                each or "no task")


@dataclass
class DirectWrite:
    """What a direct write did: the manifest, one entry per task (task, rows, where and when
    it ran: worker pid, wall-clock start and end, seconds, the worker's peak RSS in MiB, rows
    dropped), and `dropped`: {task: rows} each task dropped with `tail_strategy=drop` (its
    partial last batch; empty for other strategies)."""
    manifest: dict
    timeline: list = field(default_factory=list)
    dropped: dict = field(default_factory=dict)


def _run_range(args):
    """One task, on an executor: rows start..end of the files as task `task` of the job."""
    files, out, job_id, task, start, end, opts, storage = args
    t0 = time.time()
    report = _native.write_job_range(files, out, job_id, task, start, end, opts, storage)
    t1 = time.time()
    # The worker's peak RSS so far (a reused worker: over every task it ran).
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    dropped = dropped_rows(report, opts)
    if dropped:
        log.warning("tensorsmith: task %d dropped its last %d row(s) (tail_strategy=drop: "
                    "fewer than batch_size)", task, dropped)
    return report, {"task": task, "rows": [start, end], "pid": os.getpid(),
                    "start": t0, "end": t1, "seconds": t1 - t0, "maxrss_mib": rss,
                    "dropped": dropped}


def _output(p) -> str:
    """The output: a store URL as given (every task uploads to it), else a POSIX path."""
    p = os.fspath(p)
    if "://" in p and not p.lower().startswith("file:"):
        return p
    return _local_path(p)


def write(spark, files, out, mode, tasks, options, storage=()):
    """The direct write of `files` to `out` (a folder, or a store URL with `storage`, the
    (key, value) storage option pairs); returns a DirectWrite."""
    opts = option_texts(options)
    out = _output(out)
    storage = list(storage)
    try:
        mode = _MODES[str(mode).lower()]
    except KeyError:
        raise OptionError(f"mode must be 'error', 'overwrite' or 'append', not {mode!r}") from None
    if mode == "error" and _native.dataset_exists(out, storage):
        raise _native_exists(out)
    tasks = int(tasks or spark.sparkContext.defaultParallelism)
    ranges = _native.task_ranges(files, opts, tasks, storage)
    job_id = uuid.uuid4().hex
    if "://" not in out:
        os.makedirs(out, exist_ok=True)
    beat = _native.JobHeartbeat(out, job_id, storage)
    try:
        work = [(files, out, job_id, t, a, b, opts, storage) for t, (a, b) in enumerate(ranges)]
        done = (spark.sparkContext.parallelize(work, max(len(work), 1)).map(_run_range).collect()
                if work else [])
        beat.stop()
        manifest = _native.commit_job_reports(out, job_id, [r for r, _ in done], opts, mode,
                                              storage)
    except BaseException:
        beat.stop()
        _native.abort_job_shards(out, job_id, storage)
        raise
    timeline = [t for _, t in done]
    dropped = {}
    if drops(opts):
        dropped = {t["task"]: t["dropped"] for t in timeline}
        log_dropped(dropped)
    return DirectWrite(json.loads(manifest), timeline, dropped)


def _native_exists(out):
    from .errors import DatasetExists

    return DatasetExists(f"{out}: a dataset exists already (mode 'error'); use mode "
                          "'overwrite' or 'append'")
