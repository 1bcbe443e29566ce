#!/usr/bin/env python3
"""A KV-mode `tensorsmith dataset write` side by side with a pyarrow + NumPy + safetensors
`save_file` + fsync baseline, in one run, interleaved, best of DS_KV_RUNS, as ratios, with the
peak resident memory of our process. Run with the main venv:

    cargo build --release -p tensorsmith-cli
    .venv/bin/python benches/dataset_kv_vs_baseline.py

Environment: DS_KV_GIB (input size, default 4), DS_KV_RUNS (default 2), DS_KV_SHARD_MB
(target shard size, default 64), DS_BENCH_DIR (scratch, default target/bench-data/dataset-kv),
TENSORSMITH_BIN (default target/release/tensorsmith), DS_BENCH_KEEP=1 (keep the input),
DS_KV_THREADS (--threads for ours; default: one per core).

Input: pyarrow's defaults (snappy, dictionary, data page v1): `v` list<float32> of 4096 floats
(16 KiB) per row and a string key `id` (`s{row}`), so 4 GiB is 262,144 rows. Page cache warm.
    baseline  pyarrow iter_batches(256) -> per row a NumPy view of its 4096 floats, keyed
              `{id}__v`, gathered until the shard holds DS_KV_SHARD_MB -> save_file, fsync
    ours      `tensorsmith dataset write IN OUT --name-col id --dtype F32
              --target-shard-size-mb 64` (streamed; shards fsynced; manifest written)
Targets (4 GiB, 64 MiB shards, 2 cores): ours >= 2x the baseline; peak RSS <= 300 MiB.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from safetensors.numpy import save_file

REPO = pathlib.Path(__file__).resolve().parents[1]
GIB = float(os.environ.get("DS_KV_GIB", "4"))
RUNS = int(os.environ.get("DS_KV_RUNS", "2"))
SHARD_MB = int(os.environ.get("DS_KV_SHARD_MB", "64"))
THREADS = os.environ.get("DS_KV_THREADS")
DIR = pathlib.Path(os.environ.get("DS_BENCH_DIR", REPO / "target" / "bench-data" / "dataset-kv"))
BIN = pathlib.Path(os.environ.get("TENSORSMITH_BIN", REPO / "target" / "release" / "tensorsmith"))
WIDTH = 4096


def write_input(path, rows):
    rng = np.random.default_rng(0)
    block = rng.standard_normal(4096 * WIDTH, dtype=np.float32)
    schema = pa.schema([("v", pa.list_(pa.float32())), ("id", pa.string())])
    with pq.ParquetWriter(path, schema) as w:
        step = 4096
        for start in range(0, rows, step):
            n = min(step, rows - start)
            # Fresh values per row group: the block rolled by the row group's start.
            vals = np.roll(block, start)[: n * WIDTH]
            offsets = np.arange(0, (n + 1) * WIDTH, WIDTH, dtype=np.int32)
            arr = pa.ListArray.from_arrays(pa.array(offsets), pa.array(vals))
            ids = pa.array([f"s{r}" for r in range(start, start + n)])
            w.write_table(pa.table({"v": arr, "id": ids}), row_group_size=step)


def fsync(p):
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def baseline(src, out):
    out.mkdir()
    target = SHARD_MB << 20
    shard, size, n = {}, 0, 0

    def seal():
        nonlocal shard, size, n
        p = out / f"part-{n:05d}.safetensors"
        save_file(shard, str(p))
        fsync(p)
        shard, size, n = {}, 0, n + 1

    for b in pq.ParquetFile(src).iter_batches(batch_size=256):
        vals = b.column(0).values.to_numpy(zero_copy_only=False).reshape(len(b), WIDTH)
        for i, key in enumerate(b.column(1).to_pylist()):
            shard[f"{key}__v"] = vals[i]
            size += vals[i].nbytes + 200
            if size >= target:
                seal()
    if shard:
        seal()


def ours(src, out):
    """Runs the writer; returns its peak RSS in bytes, from /proc/PID/status VmHWM polled
    while it runs (wait4's ru_maxrss would include the forking Python's)."""
    p = subprocess.Popen([str(BIN), "dataset", "write", str(src), str(out), "--name-col", "id",
                          "--dtype", "F32", "--target-shard-size-mb", str(SHARD_MB),
                          *(["--threads", THREADS] if THREADS else [])],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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


def rm(p):
    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()


def main():
    if not BIN.exists():
        sys.exit(f"{BIN} missing: cargo build --release -p tensorsmith-cli")
    DIR.mkdir(parents=True, exist_ok=True)
    rows = int(GIB * (1 << 30)) // (WIDTH * 4)
    src = DIR / "in-kv.parquet"
    if not (src.exists() and pq.ParquetFile(src).metadata.num_rows == rows):
        write_input(src, rows)
    gib = rows * WIDTH * 4 / (1 << 30)
    times = {"baseline": [], "ours": []}
    peak = 0
    for run in range(RUNS):
        for what in ("baseline", "ours"):
            with open(src, "rb") as f:
                while f.read(1 << 24):
                    pass
            out = DIR / f"out-{what}"
            rm(out)
            t = time.perf_counter()
            if what == "baseline":
                baseline(src, out)
            else:
                peak = max(peak, ours(src, out))
            times[what].append(time.perf_counter() - t)
            shards = len(list(out.glob("*.safetensors")))
            rm(out)
            print(f"run {run}: {what:8} {times[what][-1]:7.2f} s  {shards} shards", flush=True)
    b, o = min(times["baseline"]), min(times["ours"])
    print(f"\n{gib:.2f} GiB KV, {SHARD_MB} MiB shards, best of {RUNS}:")
    print(f"  baseline {b:7.2f} s  {gib / b:5.2f} GiB/s")
    print(f"  ours     {o:7.2f} s  {gib / o:5.2f} GiB/s  {b / o:.2f}x the baseline (target >= 2x)")
    print(f"  peak RSS of ours {peak / (1 << 20):.0f} MiB (target <= 300 MiB)")
    if not os.environ.get("DS_BENCH_KEEP"):
        rm(src)


if __name__ == "__main__":
    main()
