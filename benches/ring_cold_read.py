#!/usr/bin/env python3
"""The GPU loader's ring on the CPU (`HostRing`: the pinned buffers and the device copies
replaced by plain buffers and CPU tensors), from a cold page cache: read through the cache
against O_DIRECT (TENSORSMITH_DIRECT_IO=0 / 1), beside the cold load's bound, a plain
parallel sequential read of the same file (RC_THREADS threads, 8 MiB reads, into one
buffer), and the warm load through the cache. It measures what bypassing the page cache
saves on this machine's disk and CPUs; on a GPU machine benches/torch_load.py and
benches/gpu_load_peers.py measure the loads themselves.

    .venv-torch/bin/python benches/ring_cold_read.py      # RC_GIB (2) GiB of bf16, RC_RUNS (3)

The cache is dropped with posix_fadvise(DONTNEED) after an fsync, and checked with mincore
(`resident`); runs are interleaved, medians reported.
"""

import os
import pathlib
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import torch

import tensorsmith
from tensorsmith._loading import cuda as ring

GIB = float(os.environ.get("RC_GIB", "2"))
RUNS = int(os.environ.get("RC_RUNS", "3"))
THREADS = int(os.environ.get("RC_THREADS", str(min(16, os.cpu_count() or 4))))
PATH = pathlib.Path(os.environ.get("RC_DIR", "/tmp/ring-cold")) / "m.safetensors"


def make():
    if PATH.exists() and PATH.stat().st_size > GIB * (1 << 30) * 0.99:
        return
    import safetensors.torch as ref

    PATH.parent.mkdir(parents=True, exist_ok=True)
    per = int(GIB * (1 << 30)) // 32 // 2 // 4096
    g = torch.Generator().manual_seed(0)
    ref.save_file({f"w{i}": torch.randn(per, 4096, generator=g).bfloat16() for i in range(32)},
                  PATH)


def drop():
    with open(PATH, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def load(mode):
    os.environ["TENSORSMITH_DIRECT_IO"] = mode
    native = tensorsmith._open_native(str(PATH), "pread")
    return ring.load(native, native.names(), torch.device("cpu"), None, ring.HostRing())


def plain():
    size = PATH.stat().st_size
    step = 8 << 20
    buf = bytearray(size)
    view = memoryview(buf)
    fd = os.open(PATH, os.O_RDONLY)
    try:
        def one(off):
            os.preadv(fd, [view[off:off + step]], off)

        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(one, range(0, size, step)))
    finally:
        os.close(fd)


def main():
    make()
    size = PATH.stat().st_size
    native = tensorsmith._open_native(str(PATH), "pread")
    times = {"cache (cold)": [], "O_DIRECT (cold)": [], "plain read (cold)": [],
             "cache (warm)": []}
    for _ in range(RUNS):
        for name, fn in (("cache (cold)", lambda: load("0")),
                         ("O_DIRECT (cold)", lambda: load("1")),
                         ("plain read (cold)", plain)):
            drop()
            assert native.resident(0) < 0.1, "the page cache kept the file"
            t = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t)
            del out
        plain()  # warm
        t = time.perf_counter()
        out = load("0")
        times["cache (warm)"].append(time.perf_counter() - t)
        del out
    med = {k: statistics.median(v) for k, v in times.items()}
    bound = med["plain read (cold)"]
    print(f"{size / 2**30:.2f} GiB, {RUNS} runs, medians, {os.cpu_count()} cores, "
          f"{THREADS} threads for the plain read, ring {ring._ring_bytes() >> 20} MiB")
    for k, v in med.items():
        print(f"  {k:18} {v:6.2f} s  {size / v / 1e9:5.2f} GB/s  {bound / v:4.2f}x the plain "
              f"read's speed")


if __name__ == "__main__":
    main()
