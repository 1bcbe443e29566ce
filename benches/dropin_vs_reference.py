"""The drop-in API side by side with the reference `safetensors` in one run (ratios, since the
machine is shared and noisy): runs alternate ours / reference, and each figure is the median.

(a) `safe_open` + `get_tensor` of every tensor of a 2 GiB file (64 x 32 MiB F32), framework
    "np", page cache warm; timed twice: fetch only, and fetch + sum (every byte read);
(b) `serialize_file` of the same 2 GiB (64 `TensorSpec`s over NumPy arrays). tensorsmith
    writes atomically (temporary file, fsync, rename); the reference writes in place without
    fsync. Both are also shown with the page cache flushed by `os.sync()` inside the timing, so
    the durable cost is compared too. Every timed run starts after an `os.sync()` (untimed), so
    no run pays for the dirty pages of the one before.

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/dropin_vs_reference.py      # BENCH_DIR=... BENCH_REPEAT=5 BENCH_ONLY=a|b

Files are deleted at the end.
"""

import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import safetensors
import safetensors.numpy

import tensorsmith

ROOT = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="ts-dropin-", dir=os.getcwd())
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
ONLY = os.environ.get("BENCH_ONLY", "ab")
N, ELEMS = 64, 8 << 20  # 64 tensors of 32 MiB


def timed(fn):
    os.sync()  # no dirty pages of an earlier run left to slow this one down
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def side_by_side(name, ours, ref, unit_bytes):
    a, b = [], []
    for _ in range(REPEAT):
        a.append(timed(ours))
        b.append(timed(ref))
    ma, mb = statistics.median(a), statistics.median(b)
    gib = unit_bytes / (1 << 30)
    print(f"{name:<42} tensorsmith {ma:7.3f} s ({gib / ma:6.2f} GiB/s)   "
          f"reference {mb:7.3f} s ({gib / mb:6.2f} GiB/s)   ratio {mb / ma:5.2f}x")


def make_source(arrays):
    src = os.path.join(ROOT, "src.safetensors")
    safetensors.numpy.save_file(arrays, src)
    return src


def bench_read(src, total):
    def read(mod, touch):
        def run():
            with mod.safe_open(src, framework="np") as f:
                for k in f.keys():
                    t = f.get_tensor(k)
                    if touch:
                        t.sum()
        return run

    read(tensorsmith, True)()  # warm the page cache
    side_by_side("(a) safe_open + get_tensor, every tensor", read(tensorsmith, False),
                 read(safetensors, False), total)
    side_by_side("(a) ... + sum of every tensor", read(tensorsmith, True),
                 read(safetensors, True), total)


def bench_write(arrays, total):
    def write(mod, out, sync):
        specs = {k: mod.TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data,
                                   data_len=a.nbytes) for k, a in arrays.items()}

        def run():
            mod.serialize_file(specs, out)
            if sync:
                os.sync()
        return run

    ours, ref = os.path.join(ROOT, "ours.safetensors"), os.path.join(ROOT, "ref.safetensors")
    side_by_side("(b) serialize_file", write(tensorsmith, ours, False),
                 write(safetensors, ref, False), total)
    side_by_side("(b) serialize_file + os.sync()", write(tensorsmith, ours, True),
                 write(safetensors, ref, True), total)
    with open(ours, "rb") as x, open(ref, "rb") as y:
        while True:
            bx, by = x.read(1 << 24), y.read(1 << 24)
            assert bx == by, "outputs differ"
            if not bx:
                break
    print("outputs byte-identical")


def main():
    os.makedirs(ROOT, exist_ok=True)
    try:
        rng = np.random.default_rng(0)
        arrays = {f"t{i:02d}": rng.random(ELEMS, dtype=np.float32) for i in range(N)}
        total = sum(a.nbytes for a in arrays.values())
        print(f"{N} tensors, {total / (1 << 30):.1f} GiB, median of {REPEAT}")
        if "a" in ONLY:
            src = make_source(arrays)
            bench_read(src, total)
            os.remove(src)
        if "b" in ONLY:
            bench_write(arrays, total)
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
