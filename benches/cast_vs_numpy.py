#!/usr/bin/env python3
"""`tensorsmith convert --dtype F16|BF16` of an F32 safetensors file against what people
write today (safetensors.numpy: load_file, astype, save_file; ml_dtypes for BF16), with
`cp` of the input as the yardstick of moving the bytes at all. Values with a NaN every 1,000
(the casts look at a NaN's bits to give NumPy's), checked bit for bit against the baseline.

    cargo build --release -p tensorsmith-cli
    .venv/bin/python benches/cast_vs_numpy.py

Environment: CAST_BENCH_MIB (default 512, the F32 input), CAST_BENCH_DIR (default /dev/shm
when it exists: the disk out of the way), CAST_BENCH_RUNS (default 5, interleaved, order
reversed every other round), TENSORSMITH_BIN (default target/release/tensorsmith).
Prints medians and ratios, and the same as JSON on its last line.
"""

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import tempfile
import time
import warnings

import ml_dtypes
import numpy as np
from safetensors.numpy import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = os.environ.get("TENSORSMITH_BIN", str(ROOT / "target/release/tensorsmith"))
MIB = int(os.environ.get("CAST_BENCH_MIB", "512"))
RUNS = int(os.environ.get("CAST_BENCH_RUNS", "5"))
BASE = os.environ.get("CAST_BENCH_DIR", "/dev/shm" if os.path.isdir("/dev/shm") else None)
NUMPY_DTYPE = {"F16": np.float16, "BF16": ml_dtypes.bfloat16}


def main():
    warnings.simplefilter("ignore")
    d = pathlib.Path(tempfile.mkdtemp(prefix="cast-bench-", dir=BASE))
    try:
        rng = np.random.default_rng(0)
        x = (rng.standard_normal((MIB << 20) // 4, dtype=np.float32) * 100).astype(np.float32)
        x[::1000] = np.nan
        src = d / "in.safetensors"
        save_file({"w": x.reshape(-1, 4096)}, str(src))
        out = {"input_mib": MIB, "runs": RUNS, "dir": str(d.parent)}
        for to in ("F16", "BF16"):
            fns = {
                "ours": lambda: subprocess.run(
                    [BIN, "convert", str(src), str(d / "ours.safetensors"), "--dtype", to,
                     "-q"], check=True),
                "numpy": lambda: save_file(
                    {k: v.astype(NUMPY_DTYPE[to]) for k, v in load_file(str(src)).items()},
                    str(d / "ref.safetensors")),
                "cp": lambda: shutil.copyfile(src, d / "cp.safetensors"),
            }
            times = {k: [] for k in fns}
            for r in range(RUNS):
                for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                    t = time.perf_counter()
                    fns[name]()
                    times[name].append(time.perf_counter() - t)
            med = {k: statistics.median(v) for k, v in times.items()}
            a = load_file(str(d / "ours.safetensors"))["w"].view(np.uint16)
            b = load_file(str(d / "ref.safetensors"))["w"].view(np.uint16)
            out[to] = {"median_s": med, "numpy_over_ours": med["numpy"] / med["ours"],
                       "ours_over_cp": med["ours"] / med["cp"],
                       "bit_identical": bool(np.array_equal(a, b))}
            print(f"F32 -> {to}: ours {med['ours']:.3f} s, numpy {med['numpy']:.3f} s "
                  f"({med['numpy'] / med['ours']:.2f}x ours), cp {med['cp']:.3f} s (ours "
                  f"{med['ours'] / med['cp']:.2f}x cp), bit-identical "
                  f"{out[to]['bit_identical']}")
        print(json.dumps(out))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
