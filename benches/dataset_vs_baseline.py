#!/usr/bin/env python3
"""`tensorsmith dataset write` side by side with copying the input and with Python baselines,
for Parquet written the ways people write it, in one run, as ratios, with the peak resident
memory of our process. Run with the main venv:

    cargo build --release -p tensorsmith-cli
    .venv/bin/python benches/dataset_vs_baseline.py

Environment: DS_BENCH_GIB (input size, default 2), DS_BENCH_RUNS (default 3, median),
DS_BENCH_BATCH (rows per shard, default 4096), DS_BENCH_DIR (scratch, default
target/bench-data/dataset), TENSORSMITH_BIN (default target/release/tensorsmith),
DS_BENCH_INPUTS (comma-separated, default all: plain,defaults,zstd,spark),
DS_BENCH_KEEP=1 (keep the inputs; by default they are removed at the end),
DS_BENCH_THREADS (--threads for ours; default: one per core).

Inputs: one column `v` of list<float32>, 1024 standard-normal floats (4 KiB) per row, the same
values in each:
    plain     pyarrow, compression="none", use_dictionary=False: PLAIN, uncompressed pages,
              which the write copies file to file (the page copy)
    defaults  pyarrow's defaults: snappy, dictionary (it falls back to PLAIN after 1 MiB of
              distinct values), data page v1: decoded straight into the shards
    zstd      pyarrow's defaults with compression="zstd": decoded
    spark     Spark's own writer (df.write.parquet in a local[2] pyspark session, reading the
              plain input, coalesced to 2 files): snappy, parquet-java's dictionary and v1 pages
Page cache warm for every run. Per input:
    copy      read the input and write a copy, then fsync it (what the disk allows here)
    baseline  pyarrow iter_batches(batch) -> NumPy view of the list values reshaped to
              [rows, 1024] -> safetensors.numpy.save_file per batch, then fsync each file
    ours      `tensorsmith dataset write IN OUT --batch-size B --dtype F32` (shards fsynced;
              manifest written); `reader`: the same with --parquet-reader-only (arrow-rs)
and for the pyarrow-defaults input, F32 -> BF16 (round to nearest even):
    bf16 baseline  the baseline with .astype(ml_dtypes.bfloat16), written as a BF16
                   safetensors file (header + bytes, as save_file lays it out), fsynced
    ours bf16      `... --dtype BF16`
Inputs are written one at a time and removed after their jobs (the plain one at the end): the
PLAIN page copy runs beside every input's jobs, so each ratio to it is side by side. Each
output is removed before the next run. Targets (2 GiB, 2 cores): every input >= 3x its
baseline and within 1.5x of the PLAIN page copy's time; BF16 >= 3x its baseline; peak RSS of
ours <= 256 MiB.
"""

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

import ml_dtypes
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
INPUTS = os.environ.get("DS_BENCH_INPUTS", "plain,defaults,zstd,spark").split(",")
THREADS = os.environ.get("DS_BENCH_THREADS")
WIDTH = 1024


def rows_wanted():
    return int(GIB * (1 << 30)) // (WIDTH * 4)


def write_pyarrow(path, rows, **kw):
    rng = np.random.default_rng(0)
    schema = pa.schema([("v", pa.list_(pa.float32()))])
    with pq.ParquetWriter(path, schema, **kw) as w:
        step = 16384
        for start in range(0, rows, step):
            n = min(step, rows - start)
            vals = rng.standard_normal(n * WIDTH, dtype=np.float32)
            offsets = np.arange(0, (n + 1) * WIDTH, WIDTH, dtype=np.int32)
            arr = pa.ListArray.from_arrays(pa.array(offsets), pa.array(vals))
            w.write_table(pa.table({"v": arr}), row_group_size=step)


def write_spark(plain, out):
    """Spark's writer over the plain input: a local[2] session as tests/python/package/
    test_spark.py starts one; 2 output files, in input order."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (SparkSession.builder.master("local[2]").appName("tensorsmith-bench")
         .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    try:
        s.read.parquet(str(plain)).coalesce(2).write.mode("overwrite").parquet(str(out))
    finally:
        s.stop()


def make_input(name, rows):
    """The files of input `name`, written unless there with the right row count."""
    if name == "spark":
        out = DIR / "in-spark"
        files = sorted(out.glob("part-*.parquet")) if out.exists() else []
        if sum(pq.ParquetFile(f).metadata.num_rows for f in files) != rows:
            shutil.rmtree(out, ignore_errors=True)
            write_spark(DIR / "in-plain.parquet", out)
            files = sorted(out.glob("part-*.parquet"))
        return files
    p, kw = {
        "plain": (DIR / "in-plain.parquet", dict(compression="none", use_dictionary=False)),
        "defaults": (DIR / "in-defaults.parquet", {}),
        "zstd": (DIR / "in-zstd.parquet", dict(compression="zstd")),
    }[name]
    if not (p.exists() and pq.ParquetFile(p).metadata.num_rows == rows):
        write_pyarrow(p, rows, **kw)
    return [p]


def drop_input(name, files):
    for f in files:
        rm(f)
    if name == "spark":
        rm(DIR / "in-spark")


def warm(paths):
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass


def fsync(p):
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def copy(srcs, dst):
    dst.mkdir()
    for s in srcs:
        shutil.copyfile(s, dst / s.name)
        fsync(dst / s.name)


def batches(srcs):
    for s in srcs:
        for b in pq.ParquetFile(s).iter_batches(batch_size=BATCH):
            col = b.column(0)
            yield col.values.to_numpy(zero_copy_only=False).reshape(len(col), WIDTH)


def baseline(srcs, out):
    out.mkdir()
    for i, arr in enumerate(batches(srcs)):
        p = out / f"part-{i:05d}.safetensors"
        save_file({"v": arr}, str(p))
        fsync(p)


def save_bf16(arr, p):
    """A one-tensor BF16 safetensors file laid out as save_file lays one out (header padded
    with spaces to 8 bytes); safetensors.numpy has no bfloat16."""
    h = json.dumps({"v": {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [0, arr.nbytes]}},
                   separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(p, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        f.write(arr.tobytes())


def baseline_bf16(srcs, out):
    out.mkdir()
    for i, arr in enumerate(batches(srcs)):
        p = out / f"part-{i:05d}.safetensors"
        save_bf16(arr.astype(ml_dtypes.bfloat16), p)
        fsync(p)


def ours(srcs, out, *extra):
    """Runs the writer; returns (peak RSS in bytes, its summary line). RSS from /proc/PID/status
    VmHWM polled while it runs (wait4's ru_maxrss would include the forking Python's)."""
    threads = ["--threads", THREADS] if THREADS else []
    p = subprocess.Popen([str(BIN), "dataset", "write", *map(str, srcs), str(out), "--batch-size",
                          str(BATCH), *threads, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
    return peak, err.strip().splitlines()[-1]


def rm(p):
    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()


def main():
    """Inputs one at a time (disk is shared): the plain input stays for the page copy, which
    runs beside every other input's jobs, and for Spark to read; each other input is written,
    measured and removed before the next."""
    if not BIN.exists():
        sys.exit(f"{BIN} missing: cargo build --release -p tensorsmith-cli")
    DIR.mkdir(parents=True, exist_ok=True)
    rows = rows_wanted()
    plain = make_input("plain", rows)
    gb = rows * WIDTH * 4 / 1e9
    print(f"input: {rows} rows x {WIDTH} f32 ({rows * WIDTH * 4 / (1 << 30):.2f} GiB of values); "
          f"batch {BATCH} rows ({BATCH * WIDTH * 4 / (1 << 20):.0f} MiB shards); {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"\n{'input':9} {'what':22} {'median s':>8} {'range s':>11} {'GB/s':>6} {'peak RSS':>9}")
    summary, peak_all = [], 0
    for name in INPUTS:
        files = plain if name == "plain" else make_input(name, rows)
        size = sum(f.stat().st_size for f in files)
        # Jobs: (input, kind, dtype); kinds: copy, base, ours, reader. The page copy of the
        # plain input runs beside each input's jobs, so that their ratio is side by side.
        jobs = [("plain", "ours", "F32")]
        if name == "plain":
            jobs += [("plain", "copy", "F32"), ("plain", "base", "F32")]
        else:
            jobs += [(name, "ours", "F32"), (name, "base", "F32"), (name, "reader", "F32")]
        if name == "defaults":
            jobs += [(name, "ours", "BF16"), (name, "base", "BF16")]
        t = {j: [] for j in jobs}
        rss = {j: [] for j in jobs}
        said = {}
        for run in range(RUNS):
            for job in (jobs if run % 2 == 0 else jobs[::-1]):
                iname, kind, dtype = job
                srcs = plain if iname == "plain" else files
                warm(srcs)
                out = DIR / "out"
                rm(out)
                # The previous job's writeback and the removal finished before the clock
                # starts: each job pays for its own disk work only.
                os.sync()
                start = time.perf_counter()
                if kind == "copy":
                    copy(srcs, out)
                elif kind == "base":
                    (baseline if dtype == "F32" else baseline_bf16)(srcs, out)
                else:
                    extra = ["--dtype", dtype] + (["--parquet-reader-only"] if kind == "reader" else [])
                    peak, line = ours(srcs, out, *extra)
                    rss[job].append(peak)
                    said[job] = line
                    m = json.loads((out / "dataset_manifest.json").read_text())
                    assert m["total_samples"] == rows, m["total_samples"]
                t[job].append(time.perf_counter() - start)
                rm(out)
        med = {j: statistics.median(v) for j, v in t.items()}
        for j in jobs:
            iname, kind, dtype = j
            what = {"copy": "copy + fsync", "base": "baseline", "ours": "tensorsmith",
                    "reader": "tensorsmith, reader"}[kind] + (" BF16" if dtype == "BF16" else "")
            if iname != name:
                what = "tensorsmith, page copy"
            r = f"{max(rss[j]) / (1 << 20):.0f} MiB" if rss[j] else ""
            peak_all = max([peak_all] + rss[j])
            rng = f"{min(t[j]):.2f}-{max(t[j]):.2f}"
            print(f"{name:9} {what:22} {med[j]:8.2f} {rng:>11} {gb / med[j]:6.2f} {r:>9}")
        o, b = med[(name, "ours", "F32")], med[(name, "base", "F32")]
        pc = med[("plain", "ours", "F32")]
        line = (f"{name:9} ({size / (1 << 30):.2f} GiB in {len(files)} file(s)) vs baseline "
                f"{b / o:5.2f}x (target >= 3); time / PLAIN page copy {o / pc:4.2f}x (target <= 1.5)")
        if name != "plain":
            line += f"; reader path vs baseline {b / med[(name, 'reader', 'F32')]:4.2f}x"
        summary += [line, f"          {said[(name, 'ours', 'F32')]}"]
        if name == "defaults":
            o, b = med[(name, "ours", "BF16")], med[(name, "base", "BF16")]
            summary += [f"defaults  F32->BF16 vs NumPy/ml_dtypes baseline {b / o:5.2f}x (target >= 3)",
                        f"          {said[(name, 'ours', 'BF16')]}"]
        if name != "plain" and os.environ.get("DS_BENCH_KEEP") != "1":
            drop_input(name, files)
    print()
    print("\n".join(summary))
    print(f"peak RSS of ours {peak_all / (1 << 20):.0f} MiB (target <= 256 MiB: "
          f"{'within' if peak_all <= 256 << 20 else 'OVER'}); load {os.getloadavg()[0]:.2f}")
    if os.environ.get("DS_BENCH_KEEP") != "1":
        drop_input("plain", plain)


if __name__ == "__main__":
    main()
