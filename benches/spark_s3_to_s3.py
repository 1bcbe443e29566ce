#!/usr/bin/env python3
"""The Spark direct path from Parquet on S3 to a dataset on S3 (issue #33's target), against a
disk-backed S3 server, in one run, interleaved, medians:
    spark    `tensorsmith.spark.write_dataset(spark, "s3://bench/in/", "s3://bench/out-…",
             batch_size=N, columns=["emb"], dtype="F32", storage_options=…)` in a Spark
             session started once before the runs (local[2]: two tasks, each reading its own
             row groups by range and uploading its shards; the driver commits)
    script   the pyarrow(S3FileSystem) + NumPy + save_file + boto3 script of
             benches/dataset_s3_to_s3.py (the same bytes, without us)
    floor    boto3 alone moving the same bytes (that file's floor)
Target: spark >= 3x the script, or within 1.2x of the floor. The tasks' peak RSS is what
their Python workers report (`DirectWrite.timeline`, ru_maxrss: resident, not RssAnon).

    cargo install --locked s3s-fs@0.14.1 --features binary --root target/s3s-fs
    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/spark_s3_to_s3.py     # pyspark, boto3, pyarrow, safetensors (.venv)

The input and the server as in benches/dataset_s3_to_s3.py (DS_BENCH_GIB, DS_BENCH_FILE_MIB,
DS_BENCH_BATCH, DS_BENCH_RUNS, DS_BENCH_DIR, S3S_FS_BIN); DS_BENCH_TASKS (default: Spark's
default parallelism).
"""

import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import dataset_s3_to_s3 as base  # noqa: E402


def main():
    if not os.access(base.S3S, os.X_OK):
        sys.exit(f"{base.S3S} missing: cargo install --locked s3s-fs@0.14.1 --features binary "
                 "--root target/s3s-fs")
    import boto3
    from pyspark.sql import SparkSession

    import tensorsmith.spark

    base.DIR.mkdir(parents=True, exist_ok=True)
    root = base.DIR / "store"
    root.mkdir(exist_ok=True)
    server, endpoint = base.start_server(root)
    spark = None
    try:
        e = base.env(endpoint)
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=base.KEY,
                          aws_secret_access_key=base.SECRET, region_name=base.REGION)
        if base.BUCKET not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
            s3.create_bucket(Bucket=base.BUCKET)
        objs = s3.list_objects_v2(Bucket=base.BUCKET, Prefix="in/").get("Contents", [])
        if not objs:
            base.write_inputs(s3, base.DIR)
            objs = s3.list_objects_v2(Bucket=base.BUCKET, Prefix="in/")["Contents"]
        size = sum(o["Size"] for o in objs)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        spark = (SparkSession.builder.master("local[2]").appName("spark-s3-to-s3")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        opts = {"key": base.KEY, "secret": base.SECRET, "endpoint_url": endpoint,
                "region": base.REGION}
        tasks = int(os.environ.get("DS_BENCH_TASKS", "0")) or None
        print(f"input: {len(objs)} Parquet objects, {size / (1 << 30):.2f} GiB; s3s-fs on "
              f"{endpoint} over {root}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
              f"Spark {spark.version} {spark.sparkContext.master}, tasks "
              f"{tasks or spark.sparkContext.defaultParallelism}")
        timelines = []

        def ours(out):
            t = time.perf_counter()
            r = tensorsmith.spark.write_dataset(
                spark, f"s3://{base.BUCKET}/in/", f"s3://{base.BUCKET}/{out}", tasks=tasks,
                batch_size=base.BATCH, columns=["emb"], dtype="F32", storage_options=opts)
            timelines.append(r.timeline)
            return time.perf_counter() - t, r

        # A warm-up write (Python workers started, the extension loaded); the floor moves
        # the bytes it wrote.
        secs, r = ours("out-warm")
        shards = r.manifest["shards"]
        shard_size = max(s["bytes"] for s in shards)
        print(f"warm-up write: {secs:.1f} s, {len(shards)} shards of {shard_size} bytes")
        shutil.rmtree(root / base.BUCKET / "out-warm", ignore_errors=True)
        jobs = {
            "spark": lambda out: ours(out)[0],
            "script": lambda out: base.run_polled(
                [sys.executable, "-c", base.SCRIPT, endpoint, base.BUCKET, "in", out,
                 str(base.BATCH)], e)[0],
            "floor": lambda out: base.run_polled(
                [sys.executable, "-c", base.FLOOR, endpoint, base.BUCKET, "in", out,
                 str(shard_size), str(len(shards))], e)[0],
        }
        times = {k: [] for k in jobs}
        for run in range(base.RUNS):
            order = list(jobs) if run % 2 == 0 else list(jobs)[::-1]
            for job in order:
                out = f"out-{job}-{run}"
                subprocess.run(["sync"])
                time.sleep(0.5)
                times[job].append(jobs[job](out))
                shutil.rmtree(root / base.BUCKET / out, ignore_errors=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"medians of {base.RUNS} interleaved runs (load now {os.getloadavg()[0]:.2f}):")
        for job, secs in med.items():
            runs = " ".join(f"{s:.1f}" for s in times[job])
            print(f"  {job:8} {secs:7.1f} s  {size / secs / (1 << 20):6.0f} MiB/s in   "
                  f"(runs: {runs})")
        print(f"  script/spark {med['script'] / med['spark']:5.2f}x   (target >= 3x)")
        print(f"  spark/floor  {med['spark'] / med['floor']:5.2f}x   (target <= 1.2x)")
        peak = max(t["maxrss_mib"] for tl in timelines for t in tl)
        print(f"  tasks' peak RSS (ru_maxrss of their Python workers) {peak:.0f} MiB")
    finally:
        if spark is not None:
            spark.stop()
        server.terminate()
        server.wait(10)
        if os.environ.get("DS_BENCH_KEEP") != "1":
            shutil.rmtree(base.DIR)


if __name__ == "__main__":
    main()
