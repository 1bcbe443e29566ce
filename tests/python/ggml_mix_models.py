"""Small llama.cpp-named models for the llama-quantize mix tests (`test_ggml_mix.py`) and the
vectors under tests/data/ggml_mix/ (`scripts/gen-ggml-mix-vectors`, which runs llama.cpp's
own `llama_model_quantize` on them). Written with gguf-py; every value comes from an integer
hash (no RNG, no libm), so the same bytes come out on every machine and NumPy version.

Three models, chosen to reach the mixes' branches:
- `llama-gqa`: 8 layers, 8 query heads over 2 KV heads (GQA 4), F32, its own output.weight;
- `qwen2-tied`: 16 layers (so n/8 and n/16 differ), no GQA, F16, no output.weight (tied
  embeddings), FFN width 288 (ffn_down rows are not whole 256-blocks: the fallbacks) and a
  100-column tensor (no block fits: F16);
- `llama-moe8`: 4 layers of 8 experts (Mixtral's shape: the n_expert == 8 rules), F16.
"""

from pathlib import Path

import numpy as np

MODELS = ("llama-gqa", "qwen2-tied", "llama-moe8")


def values(seed, shape, dtype):
    """Deterministic values in [-1, 1) of `shape` (NumPy order), cast to `dtype`."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64) + np.uint64(seed * 1000003)
    h = (i * np.uint64(2654435761) + np.uint64(0x9E3779B9)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & np.uint64(0xFFFFFFFF)
    v = (h.astype(np.float64) / 2.0**31 - 1.0).astype(np.float32)
    return v.reshape(shape).astype(dtype)


def spec(name):
    """(arch, hyper-parameters, dtype, [(tensor name, NumPy shape)]) of model `name`."""
    if name == "llama-gqa":
        arch, n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab = "llama", 8, 256, 8, 2, 512, 320
        dtype, tied, experts, odd = np.float32, False, 0, False
    elif name == "qwen2-tied":
        arch, n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab = "qwen2", 16, 256, 4, 4, 288, 300
        dtype, tied, experts, odd = np.float16, True, 0, True
    elif name == "llama-moe8":
        arch, n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab = "llama", 4, 256, 8, 8, 256, 256
        dtype, tied, experts, odd = np.float16, False, 8, False
    else:
        raise ValueError(name)
    head = n_embd // n_head
    kv = head * n_head_kv
    tensors = [("token_embd.weight", (n_vocab, n_embd))]
    tensors.append(("output_norm.weight", (n_embd,)))
    if not tied:
        tensors.append(("output.weight", (n_vocab, n_embd)))
    for i in range(n_layer):
        b = f"blk.{i}."
        tensors += [
            (b + "attn_norm.weight", (n_embd,)),
            (b + "attn_q.weight", (n_embd, n_embd)),
            (b + "attn_k.weight", (kv, n_embd)),
            (b + "attn_v.weight", (kv, n_embd)),
            (b + "attn_output.weight", (n_embd, n_embd)),
            (b + "ffn_norm.weight", (n_embd,)),
        ]
        if experts:
            tensors += [
                (b + "ffn_gate_inp.weight", (experts, n_embd)),
                (b + "ffn_gate_exps.weight", (experts, n_ff, n_embd)),
                (b + "ffn_up_exps.weight", (experts, n_ff, n_embd)),
                (b + "ffn_down_exps.weight", (experts, n_embd, n_ff)),
            ]
        else:
            tensors += [
                (b + "ffn_gate.weight", (n_ff, n_embd)),
                (b + "ffn_up.weight", (n_ff, n_embd)),
                (b + "ffn_down.weight", (n_embd, n_ff)),
            ]
        if odd and i == 0:
            tensors.append((b + "attn_odd.weight", (8, 100)))
    hp = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, n_ff=n_ff,
              n_vocab=n_vocab, experts=experts)
    return arch, hp, dtype, tensors


def write(name, path):
    """Writes model `name` as a GGUF file at `path` (with gguf-py)."""
    import gguf

    arch, hp, dtype, tensors = spec(name)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    w.add_context_length(512)
    w.add_embedding_length(hp["n_embd"])
    w.add_block_count(hp["n_layer"])
    w.add_feed_forward_length(hp["n_ff"])
    w.add_head_count(hp["n_head"])
    w.add_head_count_kv(hp["n_head_kv"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hp["n_embd"] // hp["n_head"])
    w.add_vocab_size(hp["n_vocab"])
    if hp["experts"]:
        w.add_expert_count(hp["experts"])
        w.add_expert_used_count(2)
    w.add_file_type(0 if dtype == np.float32 else 1)
    for k, (tname, shape) in enumerate(tensors):
        # Norms and routers stay F32, as llama.cpp's converter leaves them.
        dt = np.float32 if len(shape) == 1 or "gate_inp" in tname else dtype
        w.add_tensor(tname, values(k + 1, shape, dt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)
