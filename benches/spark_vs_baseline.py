#!/usr/bin/env python3
"""The Spark data source and the direct path side by side with Spark's own share and a
mapInArrow script, in one local[2] session, runs interleaved, best of several, as ratios.
Run with the main venv after a release build of the extension:

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/spark_vs_baseline.py

Environment: SP_BENCH_MIB (input size, default 1024), SP_BENCH_RUNS (default 3, best of),
SP_BENCH_BATCH (rows per shard and per Arrow batch, default 4096), SP_BENCH_DIR (scratch,
default target/bench-data/spark; removed at the end unless SP_BENCH_KEEP=1).

Input: one Parquet file written by pyarrow with its defaults (snappy, dictionary falling back
to PLAIN), row groups of 16384 rows (64 MiB), one column `v` of list<float32>, 1024
standard-normal floats (4 KiB) per row. The DataFrame is `spark.read.parquet(input)`;
spark.sql.execution.arrow.maxRecordsPerBatch is the batch size, so every Arrow batch a Python
worker gets is one shard's rows. Page cache warm; outputs removed between runs.
Writing:
    noop     a do-nothing DataSourceArrowWriter (pulls every batch, writes nothing): Spark's
             share of any data source writer
    raw      the least a durable writer does: a DataSourceArrowWriter writing each batch's
             values buffer (a zero-copy view) to a file of its own and fsyncing it, no header,
             no commit: Spark's share plus the disk's
    raw_late the same, every file of a task fsynced once at the task's end (the kernel writes
             back meanwhile)
    script   df.mapInArrow: each batch's list values as a NumPy view reshaped [rows, 1024],
             safetensors.numpy.save_file, fsync
    ours     df.write.format("safetensors") batch_size=B dtype=F32 (shards fsynced, commit)
    direct   tensorsmith.spark.write_dataset(spark, [input], out, batch_size=B, dtype=F32)
             (default parallelism: 2 tasks); its per-task timeline is printed
Reading back ours' dataset (count and the sum of v[0] in one aggregation):
    parquet  spark.read.parquet(input)
    ours     spark.read.format("safetensors").load(dataset)
    memory   a do-nothing Python data source yielding in-memory Arrow batches of the same rows
             (Spark's share of any Python reader)
Targets (1 GiB): ours <= 1.10x noop; ours never slower than script; direct >= 3x script and
faster than noop; reading ours >= 1.0x parquet (else: shown against memory).
A warm-up round of every job comes first and is not counted.
"""

import os
import pathlib
import resource
import shutil
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = pathlib.Path(__file__).resolve().parents[1]
MIB = int(os.environ.get("SP_BENCH_MIB", "1024"))
RUNS = int(os.environ.get("SP_BENCH_RUNS", "3"))
BATCH = int(os.environ.get("SP_BENCH_BATCH", "4096"))
DIR = pathlib.Path(os.environ.get("SP_BENCH_DIR", REPO / "target" / "bench-data" / "spark"))
WIDTH = 1024
ROWS = MIB * (1 << 20) // (WIDTH * 4)

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.datasource import (  # noqa: E402
    DataSource, DataSourceArrowWriter, DataSourceReader, InputPartition, WriterCommitMessage,
)

import tensorsmith.spark  # noqa: E402


class NoopWriter(DataSourceArrowWriter):
    def write(self, iterator):
        n = 0
        for b in iterator:
            n += b.num_rows
        return WriterCommitMessage()

    def commit(self, messages):
        pass

    def abort(self, messages):
        pass


class RawWriter(DataSourceArrowWriter):
    def __init__(self, out, late):
        self.out, self.late = out, late

    def write(self, iterator):
        import uuid as _uuid

        written = []
        for b in iterator:
            vals = b.column(0).values
            path = f"{self.out}/raw-{_uuid.uuid4().hex}"
            with open(path, "wb") as f:
                f.write(memoryview(vals.buffers()[1])[vals.offset * 4:(vals.offset + len(vals)) * 4])
                f.flush()
                if not self.late:
                    os.fsync(f.fileno())
            written.append(path)
        if self.late:
            for path in written:
                fd = os.open(path, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
        return WriterCommitMessage()

    def commit(self, messages):
        pass

    def abort(self, messages):
        pass


class RawSource(DataSource):
    @classmethod
    def name(cls):
        return "bench_raw"

    def schema(self):
        return "v array<float>"

    def writer(self, schema, overwrite):
        return RawWriter(self.options["path"], self.options.get("late") == "1")


class NoopSource(DataSource):
    """Writes nothing; reads `rows` rows of in-memory Arrow batches (one batch, yielded again
    and again), in `parts` partitions."""

    @classmethod
    def name(cls):
        return "bench_noop"

    def schema(self):
        return "v array<float>"

    def writer(self, schema, overwrite):
        return NoopWriter()

    def reader(self, schema):
        return MemoryReader(int(self.options["rows"]), int(self.options["parts"]))


class MemoryReader(DataSourceReader):
    def __init__(self, rows, parts):
        self.rows, self.parts = rows, parts

    def partitions(self):
        per = -(-self.rows // self.parts)
        return [InputPartition((i * per, min(self.rows, (i + 1) * per))) for i in range(self.parts)]

    def read(self, partition):
        a, b = partition.value
        values = np.random.default_rng(0).standard_normal(BATCH * WIDTH, dtype=np.float32)
        offsets = pa.array(np.arange(BATCH + 1, dtype=np.int32) * WIDTH)
        full = pa.RecordBatch.from_arrays([pa.ListArray.from_arrays(offsets, pa.array(values))], ["v"])
        for s in range(a, b, BATCH):
            yield full.slice(0, min(BATCH, b - s))


def script_writer(out):
    def write(batches):
        import os as _os
        import uuid as _uuid

        import numpy as _np
        import pyarrow as _pa
        from safetensors.numpy import save_file

        n = 0
        for b in batches:
            col = b.column(0)
            vals = col.values.to_numpy(zero_copy_only=False)
            x = vals.reshape(b.num_rows, -1)
            path = f"{out}/part-{_uuid.uuid4().hex}.safetensors"
            save_file({"v": _np.ascontiguousarray(x, dtype=_np.float32)}, path)
            fd = _os.open(path, _os.O_RDONLY)
            _os.fsync(fd)
            _os.close(fd)
            n += b.num_rows
        yield _pa.RecordBatch.from_arrays([_pa.array([n], _pa.int64())], ["n"])
    return write


def make_input(path):
    rng = np.random.default_rng(1)
    w = None
    step = 16384
    for s in range(0, ROWS, step):
        k = min(step, ROWS - s)
        vals = rng.standard_normal(k * WIDTH, dtype=np.float32)
        col = pa.ListArray.from_arrays(pa.array(np.arange(k + 1, dtype=np.int32) * WIDTH), pa.array(vals))
        t = pa.table({"v": col})
        if w is None:
            w = pq.ParquetWriter(path, t.schema)
        w.write_table(t, row_group_size=step)
    w.close()


def clean(p):
    shutil.rmtree(p, ignore_errors=True)


def main():
    DIR.mkdir(parents=True, exist_ok=True)
    src = DIR / "in.parquet"
    if not src.exists():
        t0 = time.time()
        make_input(src)
        print(f"input: {src.stat().st_size / 2**20:.0f} MiB on disk, {ROWS} rows, "
              f"written in {time.time() - t0:.1f} s", flush=True)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("spark-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tensorsmith.spark.register(spark)
    spark.dataSource.register(NoopSource)
    spark.dataSource.register(RawSource)
    df = spark.read.parquet(str(src))
    parts = df.rdd.getNumPartitions()
    opts = {"batch_size": str(BATCH), "dtype": "F32"}
    out = {k: DIR / f"out-{k}" for k in ("ours", "script", "direct", "raw", "raw_late")}

    def noop():
        df.write.format("bench_noop").mode("append").save()

    def raw():
        clean(out["raw"])
        out["raw"].mkdir()
        df.write.format("bench_raw").mode("append").save(str(out["raw"]))

    def raw_late():
        clean(out["raw_late"])
        out["raw_late"].mkdir()
        df.write.format("bench_raw").option("late", "1").mode("append").save(str(out["raw_late"]))

    def ours():
        clean(out["ours"])
        df.write.format("safetensors").options(**opts).mode("overwrite").save(str(out["ours"]))

    def script():
        clean(out["script"])
        out["script"].mkdir()
        n = df.mapInArrow(script_writer(str(out["script"])), "n long").agg(F.sum("n")).first()[0]
        assert n == ROWS, n

    timelines = []

    def direct():
        clean(out["direct"])
        r = tensorsmith.spark.write_dataset(spark, [str(src)], out["direct"], mode="overwrite",
                                            **opts)
        timelines.append(r.timeline)

    def agg(d):
        r = d.agg(F.count(F.lit(1)), F.sum(F.col("v")[0])).first()
        assert r[0] == ROWS, r

    def read_parquet():
        agg(spark.read.parquet(str(src)))

    def read_ours():
        agg(spark.read.format("safetensors").load(str(out["ours"])))

    def read_memory():
        agg(spark.read.format("bench_noop").option("rows", ROWS).option("parts", parts).load())

    writes = [("noop", noop), ("raw", raw), ("raw_late", raw_late), ("script", script),
              ("ours", ours), ("direct", direct)]
    reads = [("parquet", read_parquet), ("ours", read_ours), ("memory", read_memory)]
    only = os.environ.get("SP_BENCH_ONLY")  # some writes, no reads (a quicker look)
    if only:
        writes = [(n, f) for n, f in writes if n in only.split(",")]
        reads = []
    # A warm-up round, not counted: Python workers started, modules imported, JIT warm.
    for name, f in writes + reads:
        f()
    timelines.clear()
    best = {}
    for run in range(RUNS):
        k = run % len(writes)
        for name, f in writes[k:] + writes[:k]:
            t0 = time.perf_counter()
            f()
            dt = time.perf_counter() - t0
            best[("write", name)] = min(best.get(("write", name), dt), dt)
            print(f"run {run} write {name}: {dt:.2f} s", flush=True)
        k = run % max(1, len(reads))
        for name, f in reads[k:] + reads[:k]:
            t0 = time.perf_counter()
            f()
            dt = time.perf_counter() - t0
            best[("read", name)] = min(best.get(("read", name), dt), dt)
            print(f"run {run} read {name}: {dt:.2f} s", flush=True)
    w = {n: best[("write", n)] for n, _ in writes}
    r = {n: best[("read", n)] for n, _ in reads}
    print(f"\n{MIB} MiB, {ROWS} rows x {WIDTH} float32, batch {BATCH}, {parts} Spark partitions, "
          f"best of {RUNS} (local[2])")
    for n, t in w.items():
        print(f"  write {n:8s} {t:6.2f} s  {MIB / 1024 / t:5.2f} GiB/s")
    for n, t in r.items():
        print(f"  read  {n:8s} {t:6.2f} s")
    ratios = [
        ("ours", "noop", "ours / noop data source", "the time (target <= 1.10)"),
        ("raw", "noop", "raw / noop", "(the least a durable writer adds)"),
        ("raw_late", "noop", "raw_late / noop", "(the same, fsyncs at the task's end)"),
        ("ours", "raw", "ours / raw", ""),
        ("ours", "raw_late", "ours / raw_late", ""),
        ("script", "ours", "script / ours", "(ours faster if > 1)"),
        ("script", "direct", "script / direct", "(target >= 3)"),
        ("noop", "direct", "noop / direct", "(target > 1)"),
    ]
    for a, b, label, say in ratios:
        if a in w and b in w:
            print(f"  {label:30s} {w[a] / w[b]:.2f}x {say}")
    if r:
        print(f"  {'read: parquet / ours':30s} {r['parquet'] / r['ours']:.2f}x (target >= 1.0)")
        print(f"  {'read: memory / ours':30s} {r['memory'] / r['ours']:.2f}x (Spark's Python reader share)")
    if timelines:
        fastest = min(timelines, key=lambda tl: max(t["end"] for t in tl) - min(t["start"] for t in tl))
        t0 = min(t["start"] for t in fastest)
        print("  direct, per-task timeline of the fastest run (s from the first task's start):")
        for t in fastest:
            print(f"    task {t['task']}: rows {t['rows'][0]}..{t['rows'][1]}  {t['start'] - t0:6.2f} -> "
                  f"{t['end'] - t0:6.2f}  ({t['seconds']:.2f} s, worker pid {t['pid']}, "
                  f"worker peak RSS {t['maxrss_mib']:.0f} MiB)")
    print(f"  driver peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    spark.stop()
    if os.environ.get("SP_BENCH_KEEP") != "1":
        clean(DIR)


if __name__ == "__main__":
    main()
