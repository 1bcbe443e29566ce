#!/usr/bin/env python3
"""Split GGUF models: the targets of the split-GGUF issue, side by side in one run.

    cargo build --release -p tensorsmith-cli
    .venv/bin/python benches/gguf_split.py

1. `inspect` of a 3-part model of GS_INSPECT_GIB GiB (default 8; sparse files: only headers
   are read) against `inspect --part-only` of its first part alone. Target: <= 1.5x.
2. `convert` of a 3-part model of GS_CONVERT_GIB GiB (default 4, random F32, written by
   `tensorsmith convert --shard-size`) to one safetensors file (no cast), against `cp` of the
   parts followed by `sync` of the copies (equal work: ours fsyncs its output). Target:
   >= 0.9x the speed of cp + sync. Peak anonymous memory (RssAnon, sampled every 5 ms from
   /proc) of that convert: target <= 256 MiB.
Runs are interleaved (GS_RUNS, default 5); medians and ratios are printed. Data goes to
GS_DIR (default target/bench-data/gguf-split).
"""

import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("GS_RUNS", "5"))
INSPECT_GIB = float(os.environ.get("GS_INSPECT_GIB", "8"))
CONVERT_GIB = float(os.environ.get("GS_CONVERT_GIB", "4"))
DIR = pathlib.Path(os.environ.get("GS_DIR", REPO / "target" / "bench-data" / "gguf-split"))
BIN = os.environ.get("TENSORSMITH_BIN", str(REPO / "target" / "release" / "tensorsmith"))
ALIGN = 32


def sparse_split_model(folder, gib, parts=3, per_part=100):
    """gguf-py writes the headers of a `parts`-part model (llama-like names, F16 tensors of
    equal size); the data is left as holes (inspect reads headers only)."""
    import gguf

    folder.mkdir(parents=True, exist_ok=True)
    n = parts * per_part
    nbytes = int(gib * (1 << 30)) // n // 4096 * 4096
    cols = 4096
    rows = nbytes // 2 // cols
    w = gguf.GGUFWriter(str(folder / "m.gguf"), "llama", split_max_tensors=per_part)
    w.add_name("sparse bench")
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(32000)])
    for i in range(n):
        w.add_tensor_info(f"blk.{i // 3}.w{i % 3}.weight", (rows, cols), np.dtype(np.float16),
                          rows * cols * 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    for p in sorted(folder.glob("m-*.gguf")):
        data_start = -(-p.stat().st_size // ALIGN) * ALIGN
        size = data_start + per_part * (-(-rows * cols * 2 // ALIGN) * ALIGN)
        os.truncate(p, size)
    return sorted(folder.glob("m-*.gguf"))


def real_split_model(folder, gib):
    """Random F32 tensors as one safetensors file, split into 3 GGUF parts by our writer."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "src.safetensors"
    nt = 48
    size = int(gib * (1 << 30)) // nt // 4096 * 4096
    import json

    header, off = {}, 0
    for i in range(nt):
        header[f"t{i:02d}"] = {"dtype": "F32", "shape": [size // 4 // 1024, 1024],
                               "data_offsets": [off, off + size]}
        off += size
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(src, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for _ in range(nt):
            f.write(os.urandom(size))
    subprocess.run([BIN, "convert", src, folder / "m.gguf", "--shard-size",
                    str(size * nt // 3 + 1)], check=True)
    src.unlink()
    parts = sorted(folder.glob("m-*.gguf"))
    assert len(parts) == 3, parts
    return parts


def timed(cmds):
    t = time.perf_counter()
    for c in cmds:
        subprocess.run(c, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def peak_rss_anon(cmd):
    """Runs `cmd`, sampling RssAnon from /proc every 5 ms; returns (seconds, peak KiB)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            peak = max(peak, int(line.split()[1]))
            except (FileNotFoundError, ProcessLookupError):
                pass
            time.sleep(0.005)

    th = threading.Thread(target=sample)
    th.start()
    rc = p.wait()
    done.set()
    th.join()
    assert rc == 0, cmd
    return time.perf_counter() - t, peak


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} missing: cargo build --release -p tensorsmith-cli")
    sparse = sparse_split_model(DIR / "sparse", INSPECT_GIB) if INSPECT_GIB else []
    whole, alone = [], []
    for _ in range(RUNS if sparse else 0):
        whole.append(timed([[BIN, "inspect", sparse[1]]] * 10) / 10)
        alone.append(timed([[BIN, "inspect", "--part-only", sparse[0]]] * 10) / 10)
    if sparse:
        w, a = statistics.median(whole), statistics.median(alone)
        print(f"inspect {INSPECT_GIB:g} GiB, 3 parts: {w * 1e3:.1f} ms; first part alone "
              f"{a * 1e3:.1f} ms; ratio {w / a:.2f}x (target <= 1.5x)")

    parts = real_split_model(DIR / "real", CONVERT_GIB)
    out = DIR / "out.safetensors"
    cp_dir = DIR / "cp"
    ours, cps, peaks = [], [], []
    for _ in range(RUNS):
        shutil.rmtree(cp_dir, ignore_errors=True)
        cp_dir.mkdir()
        subprocess.run(["sync"], check=True)
        cps.append(timed([["cp", *parts, cp_dir], ["sync", *(cp_dir / p.name for p in parts)]]))
        shutil.rmtree(cp_dir)
        out.unlink(missing_ok=True)
        subprocess.run(["sync"], check=True)
        s, peak = peak_rss_anon([BIN, "convert", parts[0], out])
        ours.append(s)
        peaks.append(peak)
    o, c = statistics.median(ours), statistics.median(cps)
    print(f"convert {CONVERT_GIB:g} GiB, 3 parts -> safetensors: {o:.2f} s; cp + sync "
          f"{c:.2f} s; speed {c / o:.2f}x cp + sync (target >= 0.9x); runs ours "
          f"{[round(x, 2) for x in ours]} cp {[round(x, 2) for x in cps]}")
    print(f"peak RssAnon of the convert: {max(peaks) / 1024:.1f} MiB (target <= 256 MiB)")
    out.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
