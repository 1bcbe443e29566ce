#!/usr/bin/env python3
"""GGUF quantization and writing: tensorsmith against gguf-py, side by side in one process.
Run with the main venv (gguf 0.19.0, numpy) and the package and CLI built in release mode:

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -q -m crates/tensorsmith-py/Cargo.toml
    cargo build --release -p tensorsmith-cli
    .venv/bin/python benches/gguf_quantize_vs_reference.py          # quantize ratios
    .venv/bin/python benches/gguf_quantize_vs_reference.py --rss    # convert memory

Environment:
    QB_MIB     F32 input per type in MiB (default 64: 16 Mi values, 4096 rows)
    QB_RUNS    interleaved repetitions, best taken (default 5)
    QB_TYPES   comma-separated types (default Q4_0,Q8_0,MXFP4)
    QB_SIZES   --rss input sizes in MiB (default 256,1024)
    QB_DIR     scratch folder (default target/bench-data/gguf-quantize)

Default: the same float32 array (normal values) quantized by gguf.quants.quantize and by
tensorsmith.quantize (rayon, every core), runs interleaved, outputs checked byte-identical
on the first run; ratio reference / ours.

--rss: for each size, an F32 safetensors file of 8 matrices (rows of 4096) is written, then
`tensorsmith convert in.safetensors out.gguf --quantize Q8_0` (TENSORSMITH_BIN, default
target/release/tensorsmith) runs while /proc/PID/status is polled every 5 ms: time, peak
RssAnon (the process's own buffers) and peak VmHWM (mapped input pages included). The same
for a GGUF input: random valid Q4_K blocks written by GGUFWriter (raw_dtype), converted to
F16 safetensors. Files are deleted afterwards.
"""

import os
import pathlib
import subprocess
import sys
import time

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

import tensorsmith

ROOT = pathlib.Path(__file__).resolve().parent.parent
MIB = int(os.environ.get("QB_MIB", "64"))
RUNS = int(os.environ.get("QB_RUNS", "5"))
TYPES = os.environ.get("QB_TYPES", "Q4_0,Q8_0,MXFP4").split(",")
SIZES = [int(s) for s in os.environ.get("QB_SIZES", "256,1024").split(",")]
DIR = pathlib.Path(os.environ.get("QB_DIR", ROOT / "target/bench-data/gguf-quantize"))
EXE = os.environ.get("TENSORSMITH_BIN", str(ROOT / "target/release/tensorsmith"))


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def quantize_ratios():
    values = MIB * (1 << 20) // 4
    x = np.random.default_rng(0).standard_normal((4096, values // 4096)).astype(np.float32)
    print(f"{MIB} MiB of F32 per type, best of {RUNS} interleaved runs, {os.cpu_count()} cpus, "
          f"numpy {np.__version__}, gguf 0.19.0")
    print(f"{'type':7} {'gguf-py s':>10} {'ours s':>9} {'gguf-py/ours':>13}")
    for name in TYPES:
        qtype = getattr(Q, name)
        ref_t, ours_t = [], []
        for run in range(RUNS):
            for which in ([0, 1] if run % 2 == 0 else [1, 0]):
                if which == 0:
                    t, ref = timed(lambda: quants.quantize(x, qtype))
                    ref_t.append(t)
                else:
                    t, ours = timed(lambda: tensorsmith.quantize(x, name))
                    ours_t.append(t)
            if run == 0 and not np.array_equal(ref, ours):
                sys.exit(f"{name}: outputs differ")
        r, o = min(ref_t), min(ours_t)
        print(f"{name:7} {r:10.3f} {o:9.4f} {r / o:13.1f}")


def watch(args):
    t = time.perf_counter()
    p = subprocess.Popen(args)
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
    assert p.returncode == 0, p.returncode
    return time.perf_counter() - t, anon / 1024, hwm / 1024


def f32_input(path, mib):
    rng = np.random.default_rng(1)
    rows = mib * (1 << 20) // 4 // 8 // 4096
    from tensorsmith import save_file
    save_file({f"blk.{i}.weight": rng.standard_normal((rows, 4096), dtype=np.float32)
               for i in range(8)}, str(path))


def q4_k_input(path, mib):
    bs, ts = gguf.GGML_QUANT_SIZES[Q.Q4_K]
    per_tensor = mib * (1 << 20) // 8 // ts // 1024 * 1024
    w = gguf.GGUFWriter(str(path), "bench")
    rng = np.random.default_rng(2)
    for i in range(8):
        data = rng.integers(0, 256, size=(per_tensor, ts), dtype=np.uint8)
        for at in (0, 2):
            scale = rng.uniform(-0.01, 0.01, size=per_tensor).astype(np.float16)
            data[:, at:at + 2] = scale.view(np.uint8).reshape(-1, 2)
        w.add_tensor(f"blk.{i}.weight", data.reshape(1024, -1), raw_dtype=Q.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rss():
    DIR.mkdir(parents=True, exist_ok=True)
    print(f"{'conversion':44} {'in MiB':>7} {'out MiB':>8} {'s':>6} {'RssAnon MiB':>12} "
          f"{'VmHWM MiB':>10}")
    for mib in SIZES:
        for kind, make, out, extra in [
            ("F32 safetensors -> GGUF --quantize Q8_0", f32_input, "out.gguf",
             ["--quantize", "Q8_0"]),
            ("Q4_K GGUF -> F16 safetensors", q4_k_input, "out.safetensors", ["--dtype", "F16"]),
        ]:
            src = DIR / ("in.safetensors" if out.endswith("gguf") else "in.gguf")
            dst = DIR / out
            make(src, mib)
            os.sync()
            # Mapped (the default): VmHWM counts the input's pages; --pread: it cannot.
            for how, flag in (("", []), (" --pread", ["--pread"])):
                secs, anon, hwm = watch([EXE, "convert", str(src), str(dst), *extra, *flag])
                print(f"{kind + how:44} {src.stat().st_size / 2**20:7.0f} "
                      f"{dst.stat().st_size / 2**20:8.0f} {secs:6.1f} {anon:12.0f} {hwm:10.0f}")
                dst.unlink()
            src.unlink()


if __name__ == "__main__":
    rss() if "--rss" in sys.argv else quantize_ratios()
