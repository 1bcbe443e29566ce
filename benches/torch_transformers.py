#!/usr/bin/env python3
"""transformers' `from_pretrained` through tensorsmith against the reference `safetensors`:
a random Llama of about TT_GIB GiB (default 1.5, float32, tied embeddings) saved with
`save_pretrained` (sharded), loaded TT_RUNS times (default 5) by each, interleaved, each in a
fresh process with the module swapped in before transformers is imported; in each process a
first load pays transformers' lazy imports, and the second load is timed. Prints the
median load time of each, their ratio, and whether the logits are equal.

    python benches/torch_transformers.py
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys

GIB = float(os.environ.get("TT_GIB", "1.5"))
RUNS = int(os.environ.get("TT_RUNS", "5"))
DIR = pathlib.Path(os.environ.get("TT_DIR", "/tmp/tt-bench"))

CHILD = """
import json, sys, time
if sys.argv[2] == "tensorsmith":
    import tensorsmith, tensorsmith.torch, tensorsmith.numpy
    sys.modules["safetensors"] = tensorsmith
    sys.modules["safetensors.torch"] = tensorsmith.torch
    sys.modules["safetensors.numpy"] = tensorsmith.numpy
import torch, transformers
# A first load pays transformers' lazy imports and first-call costs; the second is timed.
transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
t = time.perf_counter()
m = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
took = time.perf_counter() - t
ids = torch.arange(32).reshape(2, 16) % m.config.vocab_size
with torch.no_grad():
    logits = m(input_ids=ids).logits
print(json.dumps({"s": took, "logits": logits[:, -1, :64].flatten().tolist()}))
"""


def main():
    import torch
    import transformers

    model_dir = DIR / "model"
    if not (model_dir / "config.json").exists():
        hidden = 2048
        layers = max(1, int(GIB * (1 << 30) / 4 / (12 * hidden * hidden)))
        cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=hidden,
                                       intermediate_size=4 * hidden, num_hidden_layers=layers,
                                       num_attention_heads=16, num_key_value_heads=16,
                                       tie_word_embeddings=True)
        torch.manual_seed(0)
        transformers.LlamaForCausalLM(cfg).save_pretrained(model_dir, max_shard_size="500MB")
    size = sum(p.stat().st_size for p in model_dir.glob("*.safetensors"))
    times = {"reference": [], "tensorsmith": []}
    logits = {}
    for _ in range(RUNS):
        for impl in times:
            p = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), impl],
                               capture_output=True, text=True, check=True)
            r = json.loads(p.stdout.strip().splitlines()[-1])
            times[impl].append(r["s"])
            logits[impl] = r["logits"]
    ours, ref = statistics.median(times["tensorsmith"]), statistics.median(times["reference"])
    print(f"from_pretrained {size / 1e9:.2f} GB: tensorsmith {ours:.3f} s, reference {ref:.3f} s "
          f"({ours / ref:.2f}x the reference's time); logits equal: "
          f"{logits['tensorsmith'] == logits['reference']}; runs {times}")


if __name__ == "__main__":
    main()
