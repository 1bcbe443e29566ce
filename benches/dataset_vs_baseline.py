#!/usr/bin/env python3
"""`tensorsmith dataset write` side by side with (a) copying a file of the same size and (b) a
Python baseline (pyarrow + NumPy + safetensors.numpy.save_file), in one run, as ratios, with
the peak resident memory of our process. Run with the main venv:

    cargo build --release -p tensorsmith-cli
    .venv/bin/python benches/dataset_vs_baseline.py

Environment: DS_BENCH_GIB (input size, default 2), DS_BENCH_RUNS (default 3, median),
DS_BENCH_BATCH (rows per shard, default 4096), DS_BENCH_DIR (scratch, default
target/bench-data/dataset), TENSORSMITH_BIN (default target/release/tensorsmith),
DS_BENCH_PYARROW_DEFAULTS=1 (write the input with pyarrow's defaults instead, snappy and
dictionary: no page copy, both of ours go through the Parquet reader).

Input: one Parquet file (uncompressed, no dictionary) with one column `v` of list<float32>,
1024 standard-normal floats (4 KiB) per row, written once. Page cache warm for every run.
    (a) copy      read the input and write a copy, then fsync it (what the disk allows here)
    (b) baseline  pyarrow iter_batches(batch) -> NumPy view of the list values reshaped to
                  [rows, 1024] -> safetensors.numpy.save_file per batch, then fsync each file
    ours          `tensorsmith dataset write in.parquet OUT --batch-size B --dtype F32`
                  (all cores; shards fsynced; manifest written). The input's pages are PLAIN and
                  uncompressed, so every shard is copied file to file from them.
    ours, reader  the same with --parquet-reader-only: through the Parquet reader, as any
                  compressed, dictionary-encoded or converted input goes (for the record)
Each output is removed before the next run. Ratios: (a) time / ours (target >= 0.7),
(b) time / ours (target >= 3). Peak RSS of ours from /proc VmHWM (target < 2 x largest shard + 256 MiB).
"""

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from safetensors.numpy import save_file

REPO = pathlib.Path(__file__).resolve().parents[1]
GIB = float(os.environ.get("DS_BENCH_GIB", "2"))
RUNS = int(os.environ.get("DS_BENCH_RUNS", "3"))
BATCH = int(os.environ.get("DS_BENCH_BATCH", "4096"))
DIR = pathlib.Path(os.environ.get("DS_BENCH_DIR", REPO / "target" / "bench-data" / "dataset"))
BIN = pathlib.Path(os.environ.get("TENSORSMITH_BIN", REPO / "target" / "release" / "tensorsmith"))
WIDTH = 1024
DEFAULTS = os.environ.get("DS_BENCH_PYARROW_DEFAULTS") == "1"


def make_input(path):
    rows = int(GIB * (1 << 30)) // (WIDTH * 4)
    if path.exists() and pq.ParquetFile(path).metadata.num_rows == rows:
        return rows
    rng = np.random.default_rng(0)
    schema = pa.schema([("v", pa.list_(pa.float32()))])
    kw = {} if DEFAULTS else {"compression": "none", "use_dictionary": False}
    with pq.ParquetWriter(path, schema, **kw) as w:
        step = 16384
        for start in range(0, rows, step):
            n = min(step, rows - start)
            vals = rng.standard_normal(n * WIDTH, dtype=np.float32)
            offsets = np.arange(0, (n + 1) * WIDTH, WIDTH, dtype=np.int32)
            arr = pa.ListArray.from_arrays(pa.array(offsets), pa.array(vals))
            w.write_table(pa.table({"v": arr}), row_group_size=step)
    return rows


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def copy(src, dst):
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def baseline(src, out):
    out.mkdir()
    pf = pq.ParquetFile(src)
    for i, b in enumerate(pf.iter_batches(batch_size=BATCH)):
        col = b.column(0)
        arr = col.values.to_numpy(zero_copy_only=False).reshape(len(col), WIDTH)
        p = out / f"part-{i:05d}.safetensors"
        save_file({"v": arr}, str(p))
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def ours(src, out, *extra):
    """Runs the writer; returns its peak RSS in bytes, from /proc/PID/status VmHWM polled while
    it runs (wait4's ru_maxrss would include the forking Python's own RSS from before exec)."""
    p = subprocess.Popen([str(BIN), "dataset", "write", str(src), str(out), "--batch-size", str(BATCH),
                          "--dtype", "F32", *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    status = pathlib.Path(f"/proc/{p.pid}/status")
    while p.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.01)
    err = p.stderr.read().decode()
    if p.returncode != 0:
        sys.exit(f"tensorsmith failed: {err}")
    return peak


def timed(f, *a):
    t = time.perf_counter()
    r = f(*a)
    return time.perf_counter() - t, r


def rm(p):
    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()


def main():
    if not BIN.exists():
        sys.exit(f"{BIN} missing: cargo build --release -p tensorsmith-cli")
    DIR.mkdir(parents=True, exist_ok=True)
    src = DIR / ("in-pyarrow-defaults.parquet" if DEFAULTS else "in.parquet")
    rows = make_input(src)
    size = src.stat().st_size
    warm(src)
    print(f"input: {rows} rows x {WIDTH} f32, {size / (1 << 30):.2f} GiB Parquet "
          f"({'pyarrow defaults' if DEFAULTS else 'PLAIN, uncompressed'}); batch {BATCH} rows "
          f"({BATCH * WIDTH * 4 / (1 << 20):.0f} MiB shards); {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.2f}")
    t_copy, t_base, t_ours, rss, t_reader, rss_reader = [], [], [], [], [], []
    for run in range(RUNS):
        for name in (["copy", "ours", "base", "reader"] if run % 2 == 0 else ["reader", "base", "ours", "copy"]):
            out = DIR / f"out-{name}"
            rm(out)
            if name == "copy":
                t_copy.append(timed(copy, src, out)[0])
            elif name == "base":
                t_base.append(timed(baseline, src, out)[0])
            else:
                extra = ["--parquet-reader-only"] if name == "reader" else []
                t, r = timed(ours, src, out, *extra)
                (t_reader if extra else t_ours).append(t)
                (rss_reader if extra else rss).append(r)
                m = json.loads((out / "dataset_manifest.json").read_text())
                assert m["total_samples"] == rows, m["total_samples"]
            rm(out)
    c, b, o = statistics.median(t_copy), statistics.median(t_base), statistics.median(t_ours)
    shard = BATCH * WIDTH * 4
    peak = max(rss + rss_reader)
    print(f"peak RSS: page copy {max(rss) / (1 << 20):.0f} MiB, reader path {max(rss_reader) / (1 << 20):.0f} MiB")
    gb = size / 1e9
    print(f"(a) copy + fsync          {c:7.2f} s  ({gb / c:.2f} GB/s)")
    print(f"(b) pyarrow+numpy+save    {b:7.2f} s  ({gb / b:.2f} GB/s)")
    rd = statistics.median(t_reader)
    print(f"    tensorsmith           {o:7.2f} s  ({gb / o:.2f} GB/s)")
    print(f"    tensorsmith, reader   {rd:7.2f} s  ({gb / rd:.2f} GB/s)")
    print(f"ratio vs copy      {c / o:.2f}x (target >= 0.7); reader path {c / rd:.2f}x")
    print(f"ratio vs baseline  {b / o:.2f}x (target >= 3); reader path {b / rd:.2f}x")
    print(f"peak RSS {peak / (1 << 20):.0f} MiB; bound 2 x {shard / (1 << 20):.0f} MiB + 256 MiB = "
          f"{(2 * shard + (256 << 20)) / (1 << 20):.0f} MiB ({'within' if peak < 2 * shard + (256 << 20) else 'OVER'})")


if __name__ == "__main__":
    main()
