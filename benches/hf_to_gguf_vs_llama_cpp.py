#!/usr/bin/env python3
"""A Hugging Face folder (BF16 safetensors, HF_BENCH_GIB GiB, default 2) to a Q4_K_M GGUF in
one run, side by side:

    reference  llama.cpp's convert_hf_to_gguf.py --outtype f16 (the default), then
               llama_model_quantize Q4_K_M (the function the llama-quantize tool calls,
               libllama from `scripts/ggml-reference --llama`, nthread = the cores)
    ours       tensorsmith convert DIR out.gguf --outtype f16 --quantize Q4_K_M (the same F16
               values in between: the reference's default is auto, BF16 for this folder)

and, for each step alone, the F16 conversion (`convert_hf_to_gguf.py` against `tensorsmith
convert DIR out.gguf`) and the quantization of the same F16 file (`llama_model_quantize`
against `tensorsmith convert F16.gguf out.gguf --quantize Q4_K_M`). Wall time (median of
HF_BENCH_RUNS, default 2, interleaved), peak RssAnon (polled from /proc every 10 ms), and
whether the two outputs are the same bytes.

    cargo build --release -p tensorsmith-cli
    scripts/ggml-reference --llama
    .venv-hfconv/bin/python benches/hf_to_gguf_vs_llama_cpp.py   # see scripts/gen-hf-gguf-vectors

The model: a Llama-3-shaped config (hidden 2048, 32 heads over 8 KV heads, FFN 5632, vocab
32000, layers to reach the size), values from an integer hash, the tiny-llama3-instruct
tokenizer. Scratch: HF_BENCH_DIR (default /tmp/hf-bench), removed after unless HF_BENCH_KEEP=1.

HF_BENCH_QUANTIZE_ONLY=1 times the quantization of the F16 file alone (the first target), and
needs no converter venv: the F16 file is ours (tests/python/test_hf_gguf.py pins it byte for
byte to the reference converter's), and the main venv runs it:

    HF_BENCH_QUANTIZE_ONLY=1 TENSORSMITH_BIN=target/release/tensorsmith \
        .venv/bin/python benches/hf_to_gguf_vs_llama_cpp.py
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "scripts"))
import hf_gguf_models as models  # noqa: E402

BIN = os.environ.get("TENSORSMITH_BIN", str(ROOT / "target" / "release" / "tensorsmith"))
GIB = float(os.environ.get("HF_BENCH_GIB", "2"))
RUNS = int(os.environ.get("HF_BENCH_RUNS", "2"))
DIR = Path(os.environ.get("HF_BENCH_DIR", "/tmp/hf-bench"))
CORES = os.cpu_count() or 1
QUANTIZE_ONLY = os.environ.get("HF_BENCH_QUANTIZE_ONLY") == "1"


def measure(cmd):
    """(seconds, peak RssAnon MiB) of `cmd`."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0

    def poll():
        nonlocal peak
        while p.poll() is None:
            try:
                for line in open(f"/proc/{p.pid}/status"):
                    if line.startswith("RssAnon:"):
                        peak = max(peak, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.01)

    th = threading.Thread(target=poll)
    th.start()
    _, err = p.communicate()
    th.join()
    if p.returncode:
        sys.exit(f"{cmd[:3]} failed: {err.decode(errors='replace')[-2000:]}")
    return time.perf_counter() - t, peak / 1024


def big_model(parent):
    """The benchmark folder: tiny-llama3-instruct's files, a bigger config, the weights."""
    d = parent / "bench-llama"
    # A kept folder (HF_BENCH_KEEP=1) of an earlier run is made anew: its size may differ.
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(models.DATA / "tiny-llama3-instruct", d)
    c = json.loads((d / "config.json").read_text())
    per_layer = 2048 * 2048 * 2 + 2 * 2048 * 512 + 3 * 2048 * 5632
    layers = max(1, int((GIB * 2**30 / 2 - 2 * 32000 * 2048) // per_layer))
    c.update(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=layers,
             num_attention_heads=32, num_key_value_heads=8, head_dim=64)
    (d / "config.json").write_text(json.dumps(c, indent=2))
    # Shards of about 1 GiB, as transformers writes them, with their index.
    import numpy as np
    named = []
    weight_map, part, size, k = {}, [], 0, 0
    shards = []
    for name, shape in models.tensors_of(c):
        k += 1
        part.append((name, shape, k))
        size += int(np.prod(shape)) * 2
        if size > 2**30:
            shards.append(part)
            part, size = [], 0
    if part:
        shards.append(part)
    for i, p in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        named = [(n, models.values(s, int(np.prod(shape))).reshape(shape)) for n, shape, s in p]
        models._save(d / fname, named, "BF16")
        weight_map.update({n: fname for n, _, _ in p})
        del named
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return d, layers


def main():
    DIR.mkdir(parents=True, exist_ok=True)
    spec = {"__file__": str(ROOT / "scripts" / "gen-hf-gguf-vectors"), "__name__": "bench"}
    exec((ROOT / "scripts" / "gen-hf-gguf-vectors").read_text(), spec)
    folder, layers = big_model(DIR)
    with tempfile.TemporaryDirectory(dir=DIR) as tmp:
        script = None if QUANTIZE_ONLY else spec["reference_copy"](tmp, [(folder, "llama-bpe")])
        quant = Path(tmp) / "quantize.py"
        quant.write_text(
            "import ctypes, sys\n"
            "src, dst = sys.argv[1].encode(), sys.argv[2].encode()\n"
            f"sys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
            f"spec = {{'__file__': {str(ROOT / 'scripts' / 'gen-hf-gguf-vectors')!r}, '__name__': 'q'}}\n"
            f"exec(open({str(ROOT / 'scripts' / 'gen-hf-gguf-vectors')!r}).read(), spec)\n"
            "lib, _ = spec['load_llama']()\n"
            "p = lib.llama_model_quantize_default_params()\n"
            f"p.ftype, p.nthread = 15, {CORES}\n"
            "sys.exit(lib.llama_model_quantize(src, dst, ctypes.byref(p)))\n")
        py = sys.executable
        ref16, our16 = DIR / "ref-f16.gguf", DIR / "our-f16.gguf"
        if QUANTIZE_ONLY:
            subprocess.run([BIN, "convert", str(folder), str(ref16), "--outtype", "f16", "-q"],
                           check=True)
        refq, ourq, ourq2 = DIR / "ref-q4km.gguf", DIR / "our-q4km.gguf", DIR / "our-q4km-from-f16.gguf"
        jobs = {
            "convert: reference": [py, str(script), str(folder), "--outfile", str(ref16), "--outtype", "f16"],
            "convert: ours": [BIN, "convert", str(folder), str(our16), "--outtype", "f16", "-q"],
            "quantize F16 file: reference": [py, str(quant), str(ref16), str(refq)],
            "quantize F16 file: ours": [BIN, "convert", str(ref16), str(ourq2), "--quantize", "Q4_K_M", "-q"],
            "one step: ours": [BIN, "convert", str(folder), str(ourq), "--outtype", "f16",
                               "--quantize", "Q4_K_M", "-q"],
        }
        if QUANTIZE_ONLY:
            jobs = {j: c for j, c in jobs.items() if j.startswith("quantize")}
        got = {j: [] for j in jobs}
        for _ in range(RUNS):
            for j, cmd in jobs.items():
                got[j].append(measure(cmd))
                print(f"  {j}: {got[j][-1][0]:.1f} s", file=sys.stderr)
    med = {j: sorted(t for t, _ in v)[len(v) // 2] for j, v in got.items()}
    rss = {j: max(r for _, r in v) for j, v in got.items()}

    def sha(p):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while b := f.read(1 << 24):
                h.update(b)
        return h.hexdigest()

    print(f"model: {layers} layers, {sum(f.stat().st_size for f in folder.glob('*.safetensors')) / 2**30:.2f} GiB BF16; {CORES} cores; median of {RUNS}")
    for j in jobs:
        print(f"  {j:30s} {med[j]:7.1f} s   peak RssAnon {rss[j]:7.0f} MiB")
    if QUANTIZE_ONLY:
        print(f"  quantize: reference / ours     {med['quantize F16 file: reference'] / med['quantize F16 file: ours']:5.2f}x (target >= 1.0x)")
        print(f"  same bytes: Q4_K_M {sha(refq) == sha(ourq2)}")
        if not os.environ.get("HF_BENCH_KEEP"):
            shutil.rmtree(DIR)
        return
    ref_total = med["convert: reference"] + med["quantize F16 file: reference"]
    print(f"  reference two steps            {ref_total:7.1f} s")
    print(f"  one step: reference / ours     {ref_total / med['one step: ours']:5.2f}x (target >= 2x)")
    print(f"  convert: reference / ours      {med['convert: reference'] / med['convert: ours']:5.2f}x")
    print(f"  quantize: reference / ours     {med['quantize F16 file: reference'] / med['quantize F16 file: ours']:5.2f}x (target >= 1.0x)")
    print(f"  same bytes: F16 {sha(ref16) == sha(our16)}, Q4_K_M {sha(refq) == sha(ourq) == sha(ourq2)}")
    if not os.environ.get("HF_BENCH_KEEP"):
        shutil.rmtree(DIR)


if __name__ == "__main__":
    main()
