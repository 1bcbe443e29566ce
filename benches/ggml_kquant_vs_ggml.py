#!/usr/bin/env python3
"""K-quant/IQ4 quantization: tensorsmith against ggml's own `ggml_quantize_chunk` (the
reference libggml-base.so through ctypes, tests/python/ggml_ref.py), one thread each, side by
side in one process. Run with the main venv and the package built with optimisations:

    scripts/ggml-reference
    cargo build --profile test-release -p tensorsmith-py   # or maturin develop --release
    .venv/bin/python benches/ggml_kquant_vs_ggml.py

Environment:
    KB_MI       float32 values per type, in Mi (default 64: 256 MiB, rows of 4096)
    KB_RUNS     interleaved repetitions, best taken (default 3)
    KB_TYPES    comma-separated types (default Q4_K)
    KB_THREADS  our rayon threads (default 1; ggml_quantize_chunk is single-threaded)

For each type, without and with an importance matrix: the same normal values quantized by
both, outputs checked byte-identical on the first run; ratio ggml / ours (> 1: ours faster).
"""

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", os.environ.get("KB_THREADS", "1"))

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))
import ggml_ref  # noqa: E402
import tensorsmith  # noqa: E402

MI = int(os.environ.get("KB_MI", "64"))
RUNS = int(os.environ.get("KB_RUNS", "3"))
TYPES = os.environ.get("KB_TYPES", "Q4_K").split(",")


def best(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main():
    if ggml_ref.load() is None:
        sys.exit(f"no {ggml_ref.LIB_PATH}: run scripts/ggml-reference")
    n = MI << 20
    x = np.random.default_rng(0).standard_normal((n // 4096, 4096)).astype(np.float32)
    w = np.random.default_rng(1).uniform(0.01, 4.0, 4096).astype(np.float32)
    print(f"{MI} Mi float32 values ({x.nbytes >> 20} MiB, rows of 4096), "
          f"our threads {os.environ['RAYON_NUM_THREADS']}, best of {RUNS}")
    for name in TYPES:
        for imatrix in (None, w):
            t_ref, t_ours = [], []
            for run in range(RUNS):
                a, want = best(lambda: ggml_ref.quantize(x, name, imatrix))
                b, got = best(lambda: tensorsmith.quantize(x, name, imatrix=imatrix))
                if run == 0 and not np.array_equal(got, want):
                    sys.exit(f"{name}: outputs differ")
                t_ref.append(a)
                t_ours.append(b)
            a, b = min(t_ref), min(t_ours)
            label = f"{name}{' imatrix' if imatrix is not None else ''}"
            print(f"{label:16} ggml {a:7.2f} s  ours {b:7.2f} s  ratio {a / b:5.2f}x  "
                  f"({n / b / 1e6:6.1f} M values/s ours)")


if __name__ == "__main__":
    main()
