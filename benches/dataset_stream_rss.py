#!/usr/bin/env python3
"""Peak resident memory of `tensorsmith.write_dataset` fed a one-pass Arrow stream, whole
process, side by side with the same rows collected first (what `write_dataset` did with a
stream before it streamed: every batch in memory, then written), in one run, as ratios.
Each write runs in a child process of its own; its peak RSS comes from wait4. Build the
package in release mode first:

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -q -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/dataset_stream_rss.py

Input (made batch by batch in the child, never held): DS_STREAM_BATCHES (default 384)
batches of 256 rows of 16 KiB (4096 float32) and a string key, 1.5 GiB in all.
    kv      name_col=id, dtype F32, target_shard_size_mb=64
    batch   batch_size=4096 (64 MiB shards), dtype F32
    streamed   a pa.RecordBatchReader over a generator (pulled batch by batch)
    collected  pa.Table.from_batches(list(generator)), then written (threads=1)
Targets: streamed peak <= 400 MiB in both modes (collected: 1801 MiB for KV before the change).
Environment: DS_BENCH_DIR (scratch, default /tmp/ds30-bench), DS_STREAM_BATCHES.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import time

DIR = pathlib.Path(os.environ.get("DS_BENCH_DIR", "/tmp/ds30-bench"))
BATCHES = int(os.environ.get("DS_STREAM_BATCHES", "384"))

CHILD = r"""
import sys, time, numpy as np, pyarrow as pa, tensorsmith
mode, how, out, batches = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows, width = 256, 4096
schema = pa.schema([("id", pa.string()), ("x", pa.list_(pa.float32(), width))])
def gen():
    base = np.random.default_rng(0).standard_normal(rows * width, dtype=np.float32)
    for b in range(batches):
        ids = pa.array([f"k{b * rows + i}" for i in range(rows)])
        vals = pa.FixedSizeListArray.from_arrays(pa.array(base + b), width)
        yield pa.record_batch([ids, vals], schema=schema)
opts = dict(name_col="id", target_shard_size_mb=64) if mode == "kv" else dict(batch_size=4096, columns="x")
data = (pa.RecordBatchReader.from_batches(schema, gen()) if how == "streamed"
        else pa.Table.from_batches(list(gen()), schema=schema))
t = time.perf_counter()
m = tensorsmith.write_dataset(data, out, dtype="F32", threads=1, **opts)
print(m["total_samples"], time.perf_counter() - t)
"""


def run(mode, how):
    out = DIR / f"{mode}-{how}"
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", CHILD, mode, how, str(out), str(BATCHES)],
                         stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(p.pid, 0)
    text = p.stdout.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{mode} {how}: failed")
    wall = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    return usage.ru_maxrss / 1024, wall, text.split()


def main():
    DIR.mkdir(parents=True, exist_ok=True)
    gib = BATCHES * 256 * 16 / (1 << 20)
    print(f"input: {BATCHES} batches of 256 rows of 16 KiB = {gib:.2f} GiB, one pass")
    for mode in ("kv", "batch"):
        res = {how: run(mode, how) for how in ("streamed", "collected")}
        (s_rss, s_wall, _), (c_rss, c_wall, _) = res["streamed"], res["collected"]
        print(f"{mode:5}  streamed peak {s_rss:7.0f} MiB {s_wall:6.1f} s | collected peak "
              f"{c_rss:7.0f} MiB {c_wall:6.1f} s | peak ratio collected/streamed "
              f"{c_rss / s_rss:.2f}x, time ratio {c_wall / s_wall:.2f}x")
    shutil.rmtree(DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
