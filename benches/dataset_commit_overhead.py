#!/usr/bin/env python3
"""The single-writer cost of the versioned commit (issue 26): `tensorsmith dataset write` of a
1 GiB Parquet input by two binaries, interleaved, each run into a fresh folder, the disk synced
before each clock starts; prints the medians and their ratio. Run with the main venv:

    cargo build --release -p tensorsmith-cli              # the binary to measure
    # the binary before the change, e.g. built from `git archive <commit>` into another folder
    .venv/bin/python benches/dataset_commit_overhead.py OLD_BIN NEW_BIN

Environment: DS_BENCH_GIB (default 1), DS_BENCH_RUNS (default 5), DS_BENCH_DIR (scratch,
default target/bench-data/commit), DS_BENCH_MODE (default `error`: a new dataset per run;
`append`: each run appends to one dataset, which grows).
Input: one column `v` of list<float32>, 1024 floats per row, PLAIN uncompressed pages (the
page copy: the write is mostly the disk's time), 4096 rows per shard (64 shards per GiB).
"""

import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def main():
    old, new = sys.argv[1], sys.argv[2]
    gib = float(os.environ.get("DS_BENCH_GIB", "1"))
    runs = int(os.environ.get("DS_BENCH_RUNS", "5"))
    mode = os.environ.get("DS_BENCH_MODE", "error")
    scratch = os.environ.get("DS_BENCH_DIR", "target/bench-data/commit")
    os.makedirs(scratch, exist_ok=True)
    src = os.path.join(scratch, "in.parquet")
    rows = int(gib * (1 << 30) / 4096)
    if not os.path.exists(src) or os.path.getsize(src) < rows * 4096:
        rng = np.random.default_rng(0)
        w = None
        for start in range(0, rows, 8192):
            n = min(8192, rows - start)
            vals = rng.standard_normal(n * 1024, dtype=np.float32)
            col = pa.FixedSizeListArray.from_arrays(pa.array(vals), 1024).cast(pa.list_(pa.float32()))
            t = pa.table({"v": col})
            if w is None:
                w = pq.ParquetWriter(src, t.schema, compression="none", use_dictionary=False)
            w.write_table(t)
        w.close()
    times = {old: [], new: []}
    for r in range(runs):
        for b in (old, new) if r % 2 == 0 else (new, old):
            out = os.path.join(scratch, "out-" + ("old" if b == old else "new"))
            if mode == "error":
                shutil.rmtree(out, ignore_errors=True)
            subprocess.run(["sync"], check=True)
            t = time.perf_counter()
            subprocess.run([b, "dataset", "write", src, out, "--batch-size", "4096", "--dtype",
                            "F32", "--mode", mode], check=True, stderr=subprocess.DEVNULL)
            times[b].append(time.perf_counter() - t)
    mo, mn = statistics.median(times[old]), statistics.median(times[new])
    print(f"{gib:g} GiB, {runs} interleaved runs, mode {mode}")
    print(f"before: median {mo:.3f} s  {[round(x, 3) for x in times[old]]}")
    print(f"after:  median {mn:.3f} s  {[round(x, 3) for x in times[new]]}")
    print(f"ratio after/before: {mn / mo:.3f}")
    for b in ("old", "new"):
        shutil.rmtree(os.path.join(scratch, "out-" + b), ignore_errors=True)


if __name__ == "__main__":
    main()
