#!/usr/bin/env python3
"""PyTorch loads side by side with the reference `safetensors` (and fastsafetensors when it
is installed), in one run, on one file: the targets of the PyTorch issue.

    python benches/torch_load.py            # TL_GIB (default 8) GiB of random bf16

Prints medians of TL_RUNS (default 5) interleaved runs:
- load_file(device="cpu"): ours vs the reference (both map the file), and the same plus a pass
  touching one element of each tensor;
- load_file(device="cuda:0"), warm page cache: GB/s, ours vs the reference (and
  fastsafetensors with nogds=True, tensors kept), and ours with a cold cache (the file's pages
  dropped with posix_fadvise), through the page cache and with O_DIRECT
  (TENSORSMITH_DIRECT_IO=0/1), vs a plain sequential read of the file, cold too;
- growth of peak RssAnon during our CUDA load (the CUDA context made before), and the pinned
  ring's size.
Data goes to TL_DIR (default /tmp/tl-bench).
"""

import os
import pathlib
import statistics
import threading
import time

import torch

GIB = float(os.environ.get("TL_GIB", "8"))
RUNS = int(os.environ.get("TL_RUNS", "5"))
DIR = pathlib.Path(os.environ.get("TL_DIR", "/tmp/tl-bench"))


def make(path):
    if path.exists() and path.stat().st_size > GIB * (1 << 30) * 0.99:
        return
    import safetensors.torch as ref

    n = 64
    per = int(GIB * (1 << 30)) // n // 2 // 4096
    g = torch.Generator().manual_seed(0)
    tensors = {f"layers.{i}.weight": torch.randn(per, 4096, generator=g).bfloat16()
               for i in range(n)}
    tensors["norm.weight"] = torch.ones(4096).bfloat16()
    ref.save_file(tensors, path)


def drop_cache(path):
    with open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t, out


def rss_anon_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def peak_rss_during(fn):
    base, peak, done = rss_anon_kib(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_anon_kib())
            time.sleep(0.002)

    th = threading.Thread(target=sample)
    th.start()
    try:
        fn()
    finally:
        done.set()
        th.join()
    return (peak[0] - base) / 1024


def read_all(path):
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(64 << 20)
        while f.readinto(buf):
            pass


def main():
    import safetensors.torch as ref

    import tensorsmith.torch as ours

    DIR.mkdir(parents=True, exist_ok=True)
    path = DIR / "model.safetensors"
    make(path)
    size = path.stat().st_size
    gb = size / 1e9
    read_all(path)
    try:
        from fastsafetensors import fastsafe_open
    except ImportError:
        fastsafe_open = None

    def touch(d):
        return sum(float(t.view(-1)[0]) for t in d.values())

    cpu = {"ours": [], "ref": [], "ours+touch": [], "ref+touch": []}
    for _ in range(RUNS):
        for name, load in (("ours", ours.load_file), ("ref", ref.load_file)):
            t, d = timed(lambda: load(path))
            cpu[name].append(t)
            t2, _ = timed(lambda: touch(d))
            cpu[name + "+touch"].append(t + t2)
            del d
    med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"load_file cpu {gb:.2f} GB: ours {med['ours'] * 1e3:.1f} ms, reference "
          f"{med['ref'] * 1e3:.1f} ms ({med['ours'] / med['ref']:.2f}x the reference's time); "
          f"with a touch of each tensor: {med['ours+touch'] * 1e3:.1f} vs "
          f"{med['ref+touch'] * 1e3:.1f} ms ({med['ours+touch'] / med['ref+touch']:.2f}x)")

    if not torch.cuda.is_available():
        print("no CUDA device: the CUDA figures need one")
        return
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the context, before any measurement
    gpu = {"ours": [], "ref": [], "fastsafetensors": []}
    for _ in range(RUNS):
        for name in gpu:
            if name == "ours":
                t, d = timed(lambda: ours.load_file(path, device="cuda:0"))
            elif name == "ref":
                t, d = timed(lambda: ref.load_file(path, device="cuda:0"))
            elif fastsafe_open is not None:
                def fst():
                    with fastsafe_open([str(path)], nogds=True, device="cuda:0") as f:
                        return {k: f.get_tensor(k).clone() for k in f.keys()}
                t, d = timed(fst)
            else:
                continue
            gpu[name].append(t)
            del d
            torch.cuda.empty_cache()
    rate = {k: gb / statistics.median(v) for k, v in gpu.items() if v}
    line = ", ".join(f"{k} {v:.1f} GB/s" for k, v in rate.items())
    print(f"load_file cuda:0 warm {gb:.2f} GB: {line}; ours/reference "
          f"{rate['ours'] / rate['ref']:.2f}x" + (
              f", ours/fastsafetensors {rate['ours'] / rate['fastsafetensors']:.2f}x"
              if "fastsafetensors" in rate else " (fastsafetensors not installed)"))
    # Equality with the reference, once.
    a, b = ours.load_file(path, device="cuda:0"), ref.load_file(path, device="cuda:0")
    assert all(torch.equal(a[k], b[k]) for k in b)
    del a, b
    torch.cuda.empty_cache()
    growth = peak_rss_during(lambda: ours.load_file(path, device="cuda:0"))
    torch.cuda.empty_cache()
    print(f"peak RssAnon growth during our cuda load: {growth:.0f} MiB; pinned ring "
          f"{int(os.environ.get('TENSORSMITH_PINNED_MIB', '96'))} MiB")
    cold_ours, cold_direct, cold_read = [], [], []
    for _ in range(max(2, RUNS // 2)):
        for mode, into in (("0", cold_ours), ("1", cold_direct)):
            os.environ["TENSORSMITH_DIRECT_IO"] = mode  # through the page cache, or around it
            drop_cache(path)
            t, d = timed(lambda: ours.load_file(path, device="cuda:0"))
            into.append(t)
            del d
            torch.cuda.empty_cache()
        os.environ.pop("TENSORSMITH_DIRECT_IO")
        drop_cache(path)
        t, _ = timed(lambda: read_all(path))
        cold_read.append(t)
    co, cd, cr = (statistics.median(v) for v in (cold_ours, cold_direct, cold_read))
    print(f"cold cache: ours to cuda {gb / co:.2f} GB/s, with O_DIRECT {gb / cd:.2f} GB/s, a "
          f"sequential read {gb / cr:.2f} GB/s ({cr / co:.2f}x and {cr / cd:.2f}x the read's "
          f"speed)")

if __name__ == "__main__":
    main()
