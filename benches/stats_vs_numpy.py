#!/usr/bin/env python3
"""`tensorsmith stats` of a BF16 safetensors file against the NumPy script people write today
(issue 32's targets), with `cat FILE > /dev/null` as the yardstick of reading speed.

    cargo build --release -p tensorsmith-cli
    .venv/bin/python benches/stats_vs_numpy.py

The input: STATS_BENCH_GIB GiB (default 4) of BF16 in 64 tensors of normal values, written
into STATS_BENCH_DIR (default target/bench-data/stats) and deleted at the end.
    warm   page cache filled by a `cat` first: ours with RAYON_NUM_THREADS=2, then the NumPy
           script (safetensors.numpy's safe_open, one tensor at a time: astype(np.float32),
           nanmin, nanmax, mean(dtype=np.float64), std(dtype=np.float64), isnan, isinf);
           GB/s per core beside cat's and `dd bs=1M`'s (one core; cat may splice to
           /dev/null without copying a byte, dd copies every page out)
    cold   the file's pages dropped (posix_fadvise DONTNEED after a sync) before each run:
           ours against `cat FILE > /dev/null`, interleaved
    memory peak RssAnon of ours, polled from /proc/PID/status every 2 ms
Environment: STATS_BENCH_RUNS (default 3; the NumPy script runs once), TENSORSMITH_BIN
(default target/release/tensorsmith). Targets (#32): warm >= 10x NumPy; cold >= 0.9x cat;
RssAnon <= 256 MiB.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import ml_dtypes
import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
GIB = float(os.environ.get("STATS_BENCH_GIB", "4"))
RUNS = int(os.environ.get("STATS_BENCH_RUNS", "3"))
DIR = pathlib.Path(os.environ.get("STATS_BENCH_DIR", REPO / "target" / "bench-data" / "stats"))
BIN = os.environ.get("TENSORSMITH_BIN", str(REPO / "target" / "release" / "tensorsmith"))
NT = 64
THREADS = "2"

NUMPY_SCRIPT = r"""
import sys, numpy as np, ml_dtypes  # ml_dtypes: NumPy learns bfloat16
from safetensors import safe_open
out = {}
with safe_open(sys.argv[1], framework="numpy") as f:
    for name in f.keys():
        x = f.get_tensor(name).astype(np.float32)
        out[name] = (float(np.nanmin(x)), float(np.nanmax(x)), float(x.mean(dtype=np.float64)),
                     float(x.std(dtype=np.float64)), int(np.isnan(x).sum()),
                     int(np.isinf(x).sum()))
print(out[name])
"""


def write_input(path):
    per = int(GIB * (1 << 30)) // NT // 2  # BF16 values per tensor
    rows = 4096
    cols = per // rows
    rng = np.random.default_rng(32)
    base = (rng.standard_normal(rows * cols, dtype=np.float32) * 0.02).astype(ml_dtypes.bfloat16)
    wide = (base.astype(np.float32) * 50).astype(ml_dtypes.bfloat16)
    size = rows * cols * 2
    header = {f"model.layers.{i}.weight": {"dtype": "BF16", "shape": [rows, cols],
                                           "data_offsets": [i * size, (i + 1) * size]}
              for i in range(NT)}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for i in range(NT):
            f.write((base if i % 2 == 0 else wide).tobytes())
    return base


def drop_cache(path):
    subprocess.run(["sync"], check=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(cmd, env=None, rss=False):
    """Seconds taken (and peak RssAnon in KiB when `rss`)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    peak = 0
    if rss:
        status = f"/proc/{p.pid}/status"
        while p.poll() is None:
            try:
                with open(status) as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            peak = max(peak, int(line.split()[1]))
            except (FileNotFoundError, ProcessLookupError):
                break
            time.sleep(0.002)
    rc = p.wait()
    took = time.perf_counter() - t
    if rc != 0:
        sys.exit(f"{cmd} exited {rc}")
    return (took, peak) if rss else took


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} missing: cargo build --release -p tensorsmith-cli")
    DIR.mkdir(parents=True, exist_ok=True)
    src = DIR / "bf16.safetensors"
    env = dict(os.environ, RAYON_NUM_THREADS=THREADS)
    ours = [BIN, "stats", "--json", "-q", str(src)]
    cat = ["cat", str(src)]
    dd = ["dd", f"if={src}", "of=/dev/null", "bs=1M", "status=none"]
    try:
        base = write_input(src)
        size = src.stat().st_size
        gb = size / 1e9
        print(f"{size / 2**30:.2f} GiB BF16, {NT} tensors; ours on {THREADS} threads; "
              f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}")

        # Agreement first: our numbers are NumPy's on the first tensor.
        out = subprocess.run(ours, env=env, check=True, capture_output=True).stdout
        first = json.loads(out)["tensors"][0]
        x = base.astype(np.float32)
        assert first["min"] == float(x.min()) and first["max"] == float(x.max())
        assert abs(first["mean"] - x.mean(dtype=np.float64)) <= 1e-6 * first["std"] + 1e-12
        assert abs(first["std"] - x.std(dtype=np.float64)) <= 1e-6 * first["std"] + 1e-12
        del x

        # Warm.
        run(cat)
        t_cat = statistics.median(run(cat) for _ in range(RUNS))
        # cat may splice to /dev/null without copying a byte: dd copies every page out.
        t_dd = statistics.median(run(dd) for _ in range(RUNS))
        warm, peaks = [], []
        for _ in range(RUNS):
            t, peak = run(ours, env, rss=True)
            warm.append(t)
            peaks.append(peak)
        t_ours = statistics.median(warm)
        t_np = run([sys.executable, "-c", NUMPY_SCRIPT, str(src)])
        print(f"warm  cat {t_cat:6.2f} s ({gb / t_cat:5.2f} GB/s, 1 core)   "
              f"dd bs=1M {t_dd:6.2f} s ({gb / t_dd:5.2f} GB/s, 1 core)")
        print(f"warm  "
              f"ours {t_ours:6.2f} s ({gb / t_ours / int(THREADS):5.2f} GB/s per core)   "
              f"NumPy {t_np:6.2f} s ({gb / t_np:5.2f} GB/s, 1 core)   "
              f"NumPy/ours {t_np / t_ours:5.1f}x  (target >= 10x)")

        # Cold, interleaved.
        cold = {"cat": [], "ours": []}
        for i in range(RUNS):
            jobs = [("cat", cat, None), ("ours", ours, env)]
            for name, cmd, e in (jobs if i % 2 == 0 else jobs[::-1]):
                drop_cache(src)
                time.sleep(0.3)
                cold[name].append(run(cmd, e))
        c_cat, c_ours = statistics.median(cold["cat"]), statistics.median(cold["ours"])
        print(f"cold  cat {c_cat:6.2f} s ({gb / c_cat:5.2f} GB/s)   "
              f"ours {c_ours:6.2f} s ({gb / c_ours:5.2f} GB/s)   "
              f"ours/cat speed {c_cat / c_ours:4.2f}x  (target >= 0.9x)")
        print(f"peak RssAnon of ours {max(peaks) / 1024:.1f} MiB  (target <= 256 MiB)")
    finally:
        src.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
