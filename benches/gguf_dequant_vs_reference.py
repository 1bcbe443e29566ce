#!/usr/bin/env python3
"""GGUF block dequantization to F32: tensorsmith against gguf-py's NumPy `dequantize`, side by
side in one process, with memcpy of the F32 output size as a yardstick. Run with the main
venv (gguf 0.19.0, numpy) and the package built in release mode:

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -q -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/gguf_dequant_vs_reference.py

Environment:
    DQ_BENCH_MIB    F32 output size per type in MiB (default 128: 32 Mi values)
    DQ_BENCH_RUNS   repetitions, median taken (default 5)
    DQ_BENCH_TYPES  comma-separated types (default Q4_0,Q8_0,Q4_K,Q6_K,IQ2_XS)
    DQ_BENCH_DIR    scratch folder (default target/bench-data/gguf-dequant)

Per type: random valid blocks (random bytes, f16 scales drawn finite) written once by
gguf-py's GGUFWriter as one tensor. Timed, page cache warm, runs interleaved:
    reference  gguf.quants.dequantize(blocks, qtype) on the tensor's blocks already in memory
               (a NumPy view of the file through GGUFReader's memmap).
    ours       tensorsmith.safe_open(path).get_tensor(name, dequantize=True): the blocks read
               from the map and dequantized into a new float32 array (rayon, every core).
    memcpy     np.copyto of a float32 array of the output size into a fresh one (page faults
               included, as ours and the reference allocate their output).
Each run's outputs are checked bit-identical (first run). Ratios: reference / ours (target
>= 10) and memcpy / ours (target >= 0.5).

With `--rss`: memory of a conversion instead. A ~1 GiB Q4_K GGUF (8 tensors of random valid
blocks, f16 scales finite) is written by GGUFWriter, then
`tensorsmith convert in.gguf out.safetensors --dtype F16` (TENSORSMITH_BIN, default
target/release/tensorsmith) runs while /proc/PID/status is polled every 5 ms: peak VmHWM (all
resident pages, the input's mapped file pages included) and peak RssAnon (the process's own
buffers). Both files are deleted afterwards.
"""

import os
import pathlib
import statistics
import sys
import time

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

import tensorsmith

ROOT = pathlib.Path(__file__).resolve().parent.parent
MIB = int(os.environ.get("DQ_BENCH_MIB", "128"))
RUNS = int(os.environ.get("DQ_BENCH_RUNS", "5"))
TYPES = os.environ.get("DQ_BENCH_TYPES", "Q4_0,Q8_0,Q4_K,Q6_K,IQ2_XS").split(",")
DIR = pathlib.Path(os.environ.get("DQ_BENCH_DIR", ROOT / "target/bench-data/gguf-dequant"))

# Byte offsets of each type's f16 scales (redrawn finite so the values are ordinary numbers).
F16_AT = {"Q4_0": [0], "Q8_0": [0], "Q4_K": [0, 2], "Q6_K": [208], "IQ2_XS": [0]}


def blocks_for(name, values):
    qtype = getattr(Q, name)
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    n = values // bs
    rows = 1024
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, size=(n, ts), dtype=np.uint8)
    for at in F16_AT.get(name, []):
        scale = rng.uniform(-0.01, 0.01, size=n).astype(np.float16)
        data[:, at:at + 2] = scale.view(np.uint8).reshape(n, 2)
    return qtype, data.reshape(rows, -1)


def write(path, name, qtype, data):
    w = gguf.GGUFWriter(str(path), "bench")
    w.add_tensor(name.lower(), data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main():
    DIR.mkdir(parents=True, exist_ok=True)
    values = MIB * (1 << 20) // 4
    print(f"{MIB} MiB of F32 per type ({values} values), median of {RUNS} runs, "
          f"{os.cpu_count()} cpus, numpy {np.__version__}, gguf 0.19.0")
    print(f"{'type':8} {'reference s':>12} {'ours s':>9} {'memcpy s':>9} "
          f"{'ref/ours':>9} {'memcpy/ours':>12} {'ours GB/s out':>14}")
    for name in TYPES:
        qtype, data = blocks_for(name, values)
        path = DIR / f"{name.lower()}.gguf"
        write(path, name, qtype, data)
        del data
        reader = gguf.GGUFReader(str(path))
        blocks = reader.tensors[0].data  # memmap view of the stored blocks
        f = tensorsmith.safe_open(path)
        src = np.ones(values, dtype=np.float32)
        ref_t, ours_t, cp_t = [], [], []
        for run in range(RUNS):
            order = [0, 1, 2] if run % 2 == 0 else [2, 1, 0]
            for which in order:
                if which == 0:
                    t, ref = timed(lambda: quants.dequantize(blocks, qtype))
                    ref_t.append(t)
                elif which == 1:
                    t, ours = timed(lambda: f.get_tensor(name.lower(), dequantize=True))
                    ours_t.append(t)
                else:
                    t, _ = timed(lambda: np.copyto(np.empty_like(src), src))
                    cp_t.append(t)
            if run == 0:
                same = np.array_equal(ours.reshape(-1).view(np.uint32), ref.reshape(-1).view(np.uint32))
                if not same:
                    print(f"{name}: outputs differ", file=sys.stderr)
                    sys.exit(1)
            del ref, ours
        r, o, c = (statistics.median(x) for x in (ref_t, ours_t, cp_t))
        print(f"{name:8} {r:12.3f} {o:9.4f} {c:9.4f} {r / o:9.1f} {c / o:12.2f} "
              f"{values * 4 / o / 1e9:14.2f}")
        del f, reader, blocks
        path.unlink()


def rss():
    import subprocess

    DIR.mkdir(parents=True, exist_ok=True)
    exe = os.environ.get("TENSORSMITH_BIN", str(ROOT / "target/release/tensorsmith"))
    src, dst = DIR / "q4_k_1gib.gguf", DIR / "q4_k_1gib_f16.safetensors"
    qtype = Q.Q4_K
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    per_tensor = (1 << 30) // 8 // ts // 4096 * 4096  # blocks per tensor, 4096 rows
    w = gguf.GGUFWriter(str(src), "bench")
    rng = np.random.default_rng(2)
    for i in range(8):
        data = rng.integers(0, 256, size=(per_tensor, ts), dtype=np.uint8)
        for at in (0, 2):
            scale = rng.uniform(-0.01, 0.01, size=per_tensor).astype(np.float16)
            data[:, at:at + 2] = scale.view(np.uint8).reshape(-1, 2)
        w.add_tensor(f"blk.{i}.weight", data.reshape(4096, -1), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    del data
    os.sync()
    print(f"input {src.stat().st_size / 2**30:.3f} GiB Q4_K, {8 * per_tensor * bs} values")
    t = time.perf_counter()
    p = subprocess.Popen([exe, "convert", str(src), str(dst), "--dtype", "F16"])
    hwm = anon = 0
    while p.poll() is None:
        try:
            for line in pathlib.Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm = max(hwm, int(line.split()[1]))
                elif line.startswith("RssAnon:"):
                    anon = max(anon, int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.005)
    elapsed = time.perf_counter() - t
    assert p.returncode == 0, p.returncode
    print(f"output {dst.stat().st_size / 2**30:.3f} GiB F16 safetensors in {elapsed:.1f} s")
    print(f"peak VmHWM {hwm / 1024:.0f} MiB, peak RssAnon {anon / 1024:.0f} MiB")
    src.unlink()
    dst.unlink()


if __name__ == "__main__":
    rss() if "--rss" in sys.argv else main()
