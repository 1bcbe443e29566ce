#!/usr/bin/env python3
"""A PyTorch DataLoader over a dataset on disk, side by side with the same DataLoader over
`torch.utils.data.TensorDataset` of one in-memory tensor holding the same samples, in one
run, interleaved, best of TL_RUNS, as ratios (baseline time / ours: >= 1 is as fast), and
each round's ratio (against that round's baseline). Every
value is touched in the main process (a sum per batch). Build the package in release mode
into the PyTorch venv first:

    VIRTUAL_ENV=$PWD/.venv-torch .venv/bin/maturin develop --release -q -m crates/tensorsmith-py/Cargo.toml
    .venv-torch/bin/python benches/torch_loader_vs_tensordataset.py

Data: TL_GIB (default 1) of 16 KiB samples (4096 float32), 64 MiB shards (batch_size 4096),
page cache warm. Loaders: batch 256, 2 workers (fork), shuffle off.
    baseline   DataLoader(torch TensorDataset(x), batch_size=256, num_workers=2)
    map        DataLoader(tensorsmith.torch.TensorDataset(path), batch_size=256, num_workers=2)
    iterable   DataLoader(TensorIterableDataset(path, batch_size=256), batch_size=None,
               num_workers=2)
    iterable shuffled   the same with shuffle=0 (a global permutation: gathered batches)
Target: map and iterable >= 0.8x the baseline.
Environment: TL_GIB, TL_RUNS (default 3), DS_BENCH_DIR (scratch, default /tmp/ds30-bench).
"""

import os
import pathlib
import shutil
import time

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import DataLoader

import tensorsmith
from tensorsmith.torch import TensorDataset, TensorIterableDataset

GIB = float(os.environ.get("TL_GIB", "1"))
RUNS = int(os.environ.get("TL_RUNS", "3"))
DIR = pathlib.Path(os.environ.get("DS_BENCH_DIR", "/tmp/ds30-bench")) / "torch"
WIDTH = 4096


def make(n):
    x = torch.randn(n, WIDTH)
    if DIR.exists():
        shutil.rmtree(DIR)

    def batches():
        for a in range(0, n, 4096):
            part = x[a:a + 4096].numpy()
            yield pa.record_batch(
                [pa.FixedSizeListArray.from_arrays(pa.array(part.reshape(-1)), WIDTH)], ["x"])

    schema = pa.schema([("x", pa.list_(pa.float32(), WIDTH))])
    tensorsmith.write_dataset(pa.RecordBatchReader.from_batches(schema, batches()), DIR,
                              batch_size=4096, dtype="F32")
    return x


def consume(loader):
    t = time.perf_counter()
    total, n = 0.0, 0
    for b in loader:
        v = b["x"] if isinstance(b, dict) else b[0]
        total += float(v.sum())
        n += v.shape[0]
    return time.perf_counter() - t, n, total


def main():
    n = int(GIB * (1 << 30)) // (WIDTH * 4)
    x = make(n)
    kw = dict(num_workers=2, multiprocessing_context="fork")
    loaders = {
        "baseline": lambda: DataLoader(torch.utils.data.TensorDataset(x), batch_size=256, **kw),
        "map": lambda: DataLoader(TensorDataset(DIR), batch_size=256, **kw),
        "iterable": lambda: DataLoader(TensorIterableDataset(DIR, batch_size=256),
                                       batch_size=None, **kw),
        "iterable shuffled": lambda: DataLoader(
            TensorIterableDataset(DIR, shuffle=0, batch_size=256), batch_size=None, **kw),
    }
    times = {k: [] for k in loaders}
    sums = {}
    for _ in range(RUNS):
        for name, make_loader in loaders.items():
            t, count, total = consume(make_loader())
            assert count == n, (name, count, n)
            times[name].append(t)
            sums[name] = total
    best = {k: min(v) for k, v in times.items()}
    base = best["baseline"]
    print(f"{n} samples of 16 KiB ({n * WIDTH * 4 / (1 << 30):.2f} GiB), batch 256, 2 workers, "
          f"best of {RUNS}")
    for name, t in best.items():
        # Each run's ratio against the baseline run just before it (same round).
        rounds = " ".join(f"{b / x:.2f}" for b, x in zip(times["baseline"], times[name]))
        print(f"{name:18} {t:7.2f} s  {n * WIDTH * 4 / t / (1 << 30):6.2f} GiB/s  "
              f"ratio {base / t:.2f}x  per round {rounds}  (sum {sums[name]:.4g})")
    assert np.isclose(sums["map"], sums["baseline"], rtol=1e-4)
    shutil.rmtree(DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
