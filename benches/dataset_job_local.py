#!/usr/bin/env python3
"""A distributed job on a local folder (the path of `tensorsmith.spark.write_dataset`'s
direct write and of the Spark and Ray sinks), without Spark: the driver's heartbeat, the
tasks (`write_job_range` over a Parquet file, one thread each, the GIL released), then the
commit, timed apart, for two builds of the package side by side. It measures what the job
protocol costs around the tasks' writing: the attempt markers, each shard's move into the
dataset and the heartbeat check before it, the commit and its sweep.

    DS_BENCH_GIB=1 DS_BENCH_RUNS=5 .venv/bin/python benches/dataset_job_local.py OLD_SITE NEW_SITE

OLD_SITE and NEW_SITE are folders holding a `tensorsmith` package (a wheel installed with
`pip install --no-deps --target`, or the source tree's python/ with the extension built in).

Input: one Parquet file of DS_BENCH_GIB GiB (default 1) written by pyarrow with its defaults
(snappy, dictionary falling back to PLAIN), one column `v` of list<float32>, 1024
standard-normal floats per row, row groups of 16384 rows. Output: batch mode, 4096 rows per
shard, F32, DS_BENCH_TASKS tasks (default 4), mode error into a fresh folder, the next run's
folder made while the page cache is warm. The disk is synced before each clock starts; both
builds fsync every shard and the commit. Runs interleave OLD and NEW; medians of
DS_BENCH_RUNS (default 5); ratios NEW/OLD (< 1: NEW faster). Scratch: DS_BENCH_DIR (default
target/bench-data/job-local).
"""

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

RUN = r"""
import json, os, sys, threading, time, uuid
sys.path.insert(0, sys.argv[1])
from tensorsmith import _native
src, out, tasks = sys.argv[2], sys.argv[3], int(sys.argv[4])
opts = {"batch_size": "4096", "dtype": "F32"}
ranges = _native.task_ranges([src], opts, tasks, [])
job = uuid.uuid4().hex
os.makedirs(out)
os.sync()
t0 = time.perf_counter()
beat = _native.JobHeartbeat(out, job, [])
reports = [None] * len(ranges)
def run(t, a, b):
    reports[t] = _native.write_job_range([src], out, job, t, a, b, opts, [])
threads = [threading.Thread(target=run, args=(t, a, b)) for t, (a, b) in enumerate(ranges)]
for th in threads: th.start()
for th in threads: th.join()
t1 = time.perf_counter()
beat.stop()
m = json.loads(_native.commit_job_reports(out, job, reports, opts, "error", []))
t2 = time.perf_counter()
print(json.dumps({"tasks": t1 - t0, "commit": t2 - t1, "total": t2 - t0,
                  "shards": len(m["shards"]), "samples": m["total_samples"]}))
"""


def make_input(path, gib):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = int(gib * (1 << 30)) // 4096
    rng = np.random.default_rng(0)
    with pq.ParquetWriter(path, pa.schema([("v", pa.list_(pa.float32()))])) as w:
        for start in range(0, rows, 16384):
            n = min(16384, rows - start)
            values = pa.array(rng.standard_normal(n * 1024, dtype=np.float32))
            offsets = pa.array(np.arange(0, (n + 1) * 1024, 1024, dtype=np.int32))
            w.write_table(pa.table({"v": pa.ListArray.from_arrays(offsets, values)}),
                          row_group_size=16384)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    builds = {"old": sys.argv[1], "new": sys.argv[2]}
    gib = float(os.environ.get("DS_BENCH_GIB", "1"))
    runs = int(os.environ.get("DS_BENCH_RUNS", "5"))
    tasks = os.environ.get("DS_BENCH_TASKS", "4")
    scratch = pathlib.Path(os.environ.get("DS_BENCH_DIR", "target/bench-data/job-local"))
    scratch.mkdir(parents=True, exist_ok=True)
    src = scratch / f"input-{gib}.parquet"
    if not src.exists():
        make_input(src, gib)
    times = {b: [] for b in builds}
    try:
        for r in range(runs + 1):  # the first round warms the page cache: not counted
            for name, site in builds.items():
                out = scratch / f"out-{name}"
                shutil.rmtree(out, ignore_errors=True)
                res = subprocess.run([sys.executable, "-c", RUN, site, str(src), str(out), tasks],
                                     capture_output=True, text=True, check=True)
                t = json.loads(res.stdout.strip().splitlines()[-1])
                shutil.rmtree(out, ignore_errors=True)
                if r:
                    times[name].append(t)
                    print(f"run {r} {name}: tasks {t['tasks']:.3f} s, commit {t['commit']:.3f} s, "
                          f"{t['shards']} shards", flush=True)
    finally:
        if not os.environ.get("DS_BENCH_KEEP"):
            shutil.rmtree(scratch / "out-old", ignore_errors=True)
            shutil.rmtree(scratch / "out-new", ignore_errors=True)
    for part in ("tasks", "commit", "total"):
        old = statistics.median(t[part] for t in times["old"])
        new = statistics.median(t[part] for t in times["new"])
        print(f"{part:7} old {old:.3f} s  new {new:.3f} s  new/old {new / old:.2f}")


if __name__ == "__main__":
    main()
