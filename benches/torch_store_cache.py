#!/usr/bin/env python3
"""One epoch of `TensorIterableDataset` over a dataset on s3s-fs (127.0.0.1) through the
node-local shard cache, cold and warm, beside the same dataset read locally, and the bytes
the store sent (counted by a TCP proxy in front of it) against the dataset's bytes:

    cargo install --locked s3s-fs@0.14.1 --features binary --root target/s3s-fs
    .venv-torch/bin/python benches/torch_store_cache.py

Data: SC_MIB (default 512) MiB of 64 KiB samples (16384 float32), 16 MiB shards (256
samples), written by `tensorsmith.write_dataset` into s3s-fs's folder (the store serves the
files as objects). Loader: DataLoader(TensorIterableDataset(..., shuffle=1,
shuffle_kind="block", shuffle_block_size=SC_BLOCK (default 256), batch_size=256),
batch_size=None, num_workers=2, fork), every value summed in the main process.
    local   the dataset folder, page cache warm (read once before)
    cold    s3://bench/ds, an empty cache_dir, no cache_limit
    warm    the same again (every shard in the cache)
    quarter s3://bench/ds, an empty cache_dir, cache_limit = a quarter of the dataset
Ratios: local time / store time (>= 1: as fast), and bytes from the store / dataset bytes.
Environment: SC_MIB, SC_BLOCK, SC_DIR (scratch, default /tmp/sc-bench; removed after),
S3S_FS_BIN.
"""

import os
import pathlib
import shutil
import sys
import time

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from s3_transfer import KEY, S3S, SECRET, CountingProxy, start_server  # noqa: E402

import tensorsmith  # noqa: E402
from tensorsmith.torch import TensorIterableDataset  # noqa: E402

MIB = float(os.environ.get("SC_MIB", "512"))
BLOCK = int(os.environ.get("SC_BLOCK", "256"))
DIR = pathlib.Path(os.environ.get("SC_DIR", "/tmp/sc-bench"))
WIDTH, PER_SHARD, BATCH = 16384, 256, 256


def epoch(path, **kw):
    ds = TensorIterableDataset(path, shuffle=1, shuffle_kind="block", shuffle_block_size=BLOCK,
                               batch_size=BATCH, **kw)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    t0 = time.perf_counter()
    total, n = 0.0, 0
    for b in loader:
        total += float(b["x"].sum())
        n += b["x"].shape[0]
    return time.perf_counter() - t0, n, total


def main():
    if not os.access(S3S, os.X_OK):
        sys.exit(f"{S3S} missing: cargo install --locked s3s-fs@0.14.1 --features binary "
                 "--root target/s3s-fs")
    shutil.rmtree(DIR, ignore_errors=True)
    root = DIR / "s3"
    (root / "bench").mkdir(parents=True)
    n = int(MIB * (1 << 20) // (WIDTH * 4))
    flat = np.random.default_rng(0).random(n * WIDTH, dtype=np.float32)
    rows = pa.FixedSizeListArray.from_arrays(pa.array(flat), WIDTH)
    del flat
    local = root / "bench" / "ds"
    tensorsmith.write_dataset(pa.table({"x": rows}), str(local), batch_size=PER_SHARD,
                              dtype="F32", threads=2)
    del rows
    data_bytes = sum(p.stat().st_size for p in local.glob("*.safetensors"))
    server, endpoint = start_server(root)
    proxy = CountingProxy(endpoint)
    opts = {"key": KEY, "secret": SECRET, "endpoint_url": proxy.endpoint,
            "region": "us-east-1"}
    url = "s3://bench/ds"
    try:
        print(f"{n} samples of {WIDTH * 4 // 1024} KiB, {data_bytes / 2**20:.0f} MiB in "
              f"{len(list(local.glob('*.safetensors')))} shards; block {BLOCK}; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        epoch(str(local))  # page cache warm
        t_local, n_local, s_local = epoch(str(local))
        print(f"local    {t_local:6.2f} s ({n_local / t_local:8.0f} samples/s)", flush=True)
        for name, cache, limit in (("cold", "cold", None), ("warm", "cold", None),
                                   ("warm", "cold", None),
                                   ("quarter", "quarter", data_bytes // 4)):
            before = proxy.down
            try:
                t, got, s = epoch(url, storage_options=opts, cache_dir=str(DIR / cache),
                                  cache_limit=limit)
            except tensorsmith.errors.CacheFull as e:
                print(f"{name:8s} CacheFull: {e}")
                continue
            assert got == n_local and abs(s - s_local) <= 1e-3 * abs(s_local) + 1
            down = proxy.down - before
            print(f"{name:8s} {t:6.2f} s ({n_local / t:8.0f} samples/s), local/this "
                  f"{t_local / t:.2f}x, fetched {down / 2**20:.0f} MiB = "
                  f"{down / data_bytes:.3f}x the dataset", flush=True)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
