"""Benchmarks of the Python package, side by side with the reference in one run (ratios, since
these machines are noisy):

(a) a 1 GiB DataFrame (262,144 rows x 1024 f32, read from Parquet) written through the
    "safetensors" Spark data source, versus the same job with a pure-Python writer
    (mapInArrow + NumPy + safetensors.numpy.save_file, one shard per batch);
(b) reading a 2 GiB safetensors file (64 tensors of 32 MiB) with tensorsmith.safe_open versus
    safetensors.safe_open: every tensor fetched, then every tensor fetched and summed.

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/python_package.py          # BENCH_ONLY=a or b; BENCH_DIR=...

(a) needs pandas (Spark's mapInArrow requires it; in tests/python/requirements.txt). The data
source's job fsyncs every shard before its commit; the pure-Python writer does not.
BENCH_SPARK_CACHED=1 caches the DataFrame in Spark's memory first (no Parquet decoding in the
timed jobs); BENCH_ARROW_BATCH sets spark.sql.execution.arrow.maxRecordsPerBatch.
"""

import gc
import os
import shutil
import sys
import tempfile
import time

import numpy as np

ROOT = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="ts-bench-", dir=os.getcwd())
ONLY = os.environ.get("BENCH_ONLY", "ab")


def best(f, runs=2):
    ts = []
    for _ in range(runs):
        gc.collect()
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts), ts


def bench_spark():
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession

    import tensorsmith.spark

    rows, width, batch = 262_144, 1024, 1024
    src = os.path.join(ROOT, "in.parquet")
    if not os.path.exists(src):
        w = None
        rng = np.random.default_rng(0)
        for start in range(0, rows, 16384):
            x = rng.standard_normal((16384, width), dtype=np.float32)
            t = pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), width)
                          .cast(pa.list_(pa.float32()))})
            w = w or pq.ParquetWriter(src, t.schema, compression="none")
            w.write_table(t, row_group_size=16384)
        w.close()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.driver.memory", "6g"))
    if os.environ.get("BENCH_ARROW_BATCH"):
        builder = builder.config("spark.sql.execution.arrow.maxRecordsPerBatch",
                                 os.environ["BENCH_ARROW_BATCH"])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    tensorsmith.spark.register(spark)
    df = spark.read.parquet(src)
    if os.environ.get("BENCH_SPARK_CACHED"):
        df = df.cache()
        assert df.count() == rows

    def ours():
        (df.write.format("safetensors").option("batch_size", batch).option("dtype", "F32")
         .mode("overwrite").save(os.path.join(ROOT, "ours")))

    out = os.path.join(ROOT, "python")

    def python_writer():
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)

        def write(batches):
            import uuid

            import pyarrow as pa
            from safetensors.numpy import save_file

            buf, n = [], 0
            tag = uuid.uuid4().hex

            def flush(k):
                x = np.concatenate(buf)
                save_file({"x": x}, os.path.join(out, f"part-{tag}-{k:05d}.safetensors"))
                return pa.RecordBatch.from_pydict({"n": [len(x)]})

            k = 0
            for b in batches:
                col = b.column(0)
                buf.append(col.values.to_numpy(zero_copy_only=False).reshape(len(col), -1))
                n += len(col)
                while n >= batch:
                    x = np.concatenate(buf)
                    buf[:] = [x[batch:]]
                    save_file({"x": np.ascontiguousarray(x[:batch])},
                              os.path.join(out, f"part-{tag}-{k:05d}.safetensors"))
                    k += 1
                    n -= batch
                    yield pa.RecordBatch.from_pydict({"n": [batch]})
            if n:
                yield flush(k)

        assert sum(r.n for r in df.mapInArrow(write, "n long").collect()) == rows

    def floor():
        # What both jobs pay before writing anything: Spark reading the Parquet, Arrow
        # batches to a Python worker, consumed.
        def consume(batches):
            import pyarrow as pa

            yield pa.RecordBatch.from_pydict({"n": [sum(len(b) for b in batches)]})

        assert sum(r.n for r in df.mapInArrow(consume, "n long").collect()) == rows

    t_floor, all_floor = best(floor)
    t_ours, all_ours = best(ours)
    t_py, all_py = best(python_writer)
    spark.stop()
    gib = rows * width * 4 / 2**30
    print(f"(a) Spark write of {gib:.2f} GiB: data source {t_ours:.2f} s {fmt(all_ours)}, "
          f"pure Python {t_py:.2f} s {fmt(all_py)}: {t_py / t_ours:.2f}x (target 2x); "
          f"Spark's share (read + Arrow to Python, no writing) {t_floor:.2f} s {fmt(all_floor)}: "
          f"writing alone {t_ours - t_floor:.2f} s vs {t_py - t_floor:.2f} s")


def bench_read():
    import safetensors
    from safetensors.numpy import save_file

    import tensorsmith

    path = os.path.join(ROOT, "big.safetensors")
    if not os.path.exists(path):
        rng = np.random.default_rng(1)
        save_file({f"t{i:02d}": rng.standard_normal(8 << 20, dtype=np.float32) for i in range(64)}, path)
    with open(path, "rb") as f:  # warm the page cache
        while f.read(64 << 20):
            pass

    def fetch(mod, touch):
        def run():
            with mod.safe_open(path, framework="np") as f:
                for k in f.keys():
                    a = f.get_tensor(k)
                    if touch:
                        a.sum()
        return run

    for touch in (False, True):
        t_ref, a_ref = best(fetch(safetensors, touch), runs=3)
        t_ours, a_ours = best(fetch(tensorsmith, touch), runs=3)
        what = "get_tensor + sum" if touch else "get_tensor"
        print(f"(b) 2 GiB safe_open, {what}: reference {t_ref:.3f} s {fmt(a_ref)}, tensorsmith "
              f"{t_ours:.3f} s {fmt(a_ours)}: {t_ref / t_ours:.2f}x (target >= 1x)")


def fmt(ts):
    return "[" + ", ".join(f"{t:.2f}" for t in ts) + "]"


if __name__ == "__main__":
    try:
        if "b" in ONLY:
            bench_read()
        if "a" in ONLY:
            bench_spark()
    finally:
        if not os.environ.get("BENCH_DIR"):
            shutil.rmtree(ROOT, ignore_errors=True)
