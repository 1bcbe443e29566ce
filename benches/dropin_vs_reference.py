"""The drop-in API side by side with the reference `safetensors` in one run (ratios, since the
machine is shared and noisy): runs alternate ours / reference, and each figure is the median.

(a) `safe_open` + `get_tensor` of every tensor of a 2 GiB file (64 x 32 MiB F32), framework
    "np", page cache warm; timed twice: fetch only, and fetch + sum (every byte read);
(b) `serialize_file` of the same 2 GiB (64 `TensorSpec`s over NumPy arrays). tensorsmith
    writes atomically (temporary file, fsync, rename); the reference writes in place without
    fsync. Both are also shown with the page cache flushed by `os.sync()` inside the timing, so
    the durable cost is compared too.

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/dropin_vs_reference.py      # BENCH_DIR=... BENCH_REPEAT=5

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
N, ELEMS = 64, 8 << 20  # 64 tensors of 32 MiB


def timed(fn):
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


def main():
    os.makedirs(ROOT, exist_ok=True)
    try:
        rng = np.random.default_rng(0)
        arrays = {f"t{i:02d}": rng.random(ELEMS, dtype=np.float32) for i in range(N)}
        total = sum(a.nbytes for a in arrays.values())
        src = os.path.join(ROOT, "src.safetensors")
        safetensors.numpy.save_file(arrays, src)

        def read(mod, touch):
            def run():
                with mod.safe_open(src, framework="np") as f:
                    for k in f.keys():
                        t = f.get_tensor(k)
                        if touch:
                            t.sum()
            return run

        read(tensorsmith, True)()  # warm the page cache
        print(f"{N} tensors, {total / (1 << 30):.1f} GiB, median of {REPEAT}")
        side_by_side("(a) safe_open + get_tensor, every tensor", read(tensorsmith, False),
                     read(safetensors, False), total)
        side_by_side("(a) ... + sum of every tensor", read(tensorsmith, True),
                     read(safetensors, True), total)

        def specs(mod):
            return {k: mod.TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data,
                                      data_len=a.nbytes) for k, a in arrays.items()}

        ours_out, ref_out = os.path.join(ROOT, "ours.safetensors"), os.path.join(ROOT, "ref.safetensors")

        def write(mod, out, sync):
            s = specs(mod)

            def run():
                mod.serialize_file(s, out)
                if sync:
                    os.sync()
            return run

        side_by_side("(b) serialize_file", write(tensorsmith, ours_out, False),
                     write(safetensors, ref_out, False), total)
        side_by_side("(b) serialize_file + os.sync()", write(tensorsmith, ours_out, True),
                     write(safetensors, ref_out, True), total)
        with open(ours_out, "rb") as x, open(ref_out, "rb") as y:
            while True:
                bx, by = x.read(1 << 24), y.read(1 << 24)
                assert bx == by, "outputs differ"
                if not bx:
                    break
        print("outputs byte-identical")
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
