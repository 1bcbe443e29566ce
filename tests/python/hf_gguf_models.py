"""Small Hugging Face model folders for the HF-folder-to-GGUF tests (`test_hf_gguf.py`) and the
vectors under tests/data/hf_gguf/ (`scripts/gen-hf-gguf-vectors`, which runs llama.cpp's own
`convert_hf_to_gguf.py` and `llama_model_quantize` on them).

tests/data/hf_gguf/<model>/ holds what transformers and tokenizers wrote (config.json,
generation_config.json, the tokenizer files); the weights are not stored: `materialize` writes
them, every value from an integer hash (no RNG, no libm), so the same bytes come out on every
machine. The folder's name is part of what the converter writes (general.name), so a model is
always materialized under its own name.

- `tiny-llama3-instruct`: LlamaForCausalLM, 2 layers, 256 wide, 4 query heads over 2 KV heads,
  llama3 rope scaling (a rope_freqs tensor), its own lm_head, BF16, one shard, a Llama 3
  pre-tokenizer (Split + byte-level), sampling settings in generation_config.json;
- `tiny-qwen2`: Qwen2ForCausalLM, 3 layers, Q/K/V biases, tied embeddings, FFN width 320 (not
  whole 256-blocks: llama-quantize's fallbacks), F32, two shards and their index, a Qwen2
  pre-tokenizer;
- `tiny-mixtral`: MixtralForCausalLM, 2 layers of 4 experts (2 used), F16, a SentencePiece
  tokenizer (tokenizer.model, byte fallback, a user-defined piece) without tokenizer.json;
- `tiny-qwen3`: Qwen3ForCausalLM, 2 layers, Q/K norms, a head_dim (32) other than
  hidden/heads (so attn_q and attn_output are not square, and not whole 256-blocks), tied
  embeddings, BF16, a Qwen2 pre-tokenizer;
- `tiny-qwen3-moe`: Qwen3MoeForCausalLM, 2 layers of 4 experts (2 used), Q/K norms, F16;
- `tiny-qwen2-moe`: Qwen2MoeForCausalLM, 2 layers of 4 experts (2 used) of width 128 and a
  shared expert with its gate, Q/K/V biases, F32.
"""

import json
import shutil
import struct
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "hf_gguf"
MODELS = ("tiny-llama3-instruct", "tiny-qwen2", "tiny-mixtral", "tiny-qwen3", "tiny-qwen3-moe",
          "tiny-qwen2-moe")


def values(seed, n):
    """`n` deterministic float32 values in [-1, 1)."""
    i = np.arange(n, dtype=np.uint64) + np.uint64(seed * 1000003)
    h = (i * np.uint64(2654435761) + np.uint64(0x9E3779B9)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & np.uint64(0xFFFFFFFF)
    return (h.astype(np.float64) / 2.0**31 - 1.0).astype(np.float32)


def tensors_of(config):
    """[(name, shape)] of the checkpoint a config describes (the Llama-family layout)."""
    e, f = config["hidden_size"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim") or e // heads
    kind = config.get("model_type")
    bias = kind in ("qwen2", "qwen2_moe")
    out = [("model.embed_tokens.weight", (config["vocab_size"], e)), ("model.norm.weight", (e,))]
    if not config.get("tie_word_embeddings"):
        out.append(("lm_head.weight", (config["vocab_size"], e)))
    for i in range(config["num_hidden_layers"]):
        b = f"model.layers.{i}."
        out += [(b + "input_layernorm.weight", (e,)), (b + "post_attention_layernorm.weight", (e,)),
                (b + "self_attn.q_proj.weight", (heads * hd, e)),
                (b + "self_attn.k_proj.weight", (kv * hd, e)),
                (b + "self_attn.v_proj.weight", (kv * hd, e)),
                (b + "self_attn.o_proj.weight", (e, heads * hd)),
                ]
        if kind in ("qwen3", "qwen3_moe"):
            out += [(b + "self_attn.q_norm.weight", (hd,)), (b + "self_attn.k_norm.weight", (hd,))]
        if kind in ("qwen3_moe", "qwen2_moe"):
            n, mf = config["num_experts"], config["moe_intermediate_size"]
            out.append((b + "mlp.gate.weight", (n, e)))
            for x in range(n):
                m = f"{b}mlp.experts.{x}."
                out += [(m + "gate_proj.weight", (mf, e)), (m + "up_proj.weight", (mf, e)),
                        (m + "down_proj.weight", (e, mf))]
            if kind == "qwen2_moe":
                sf = config["shared_expert_intermediate_size"]
                out += [(b + "mlp.shared_expert.gate_proj.weight", (sf, e)),
                        (b + "mlp.shared_expert.up_proj.weight", (sf, e)),
                        (b + "mlp.shared_expert.down_proj.weight", (e, sf)),
                        (b + "mlp.shared_expert_gate.weight", (1, e))]
        elif kind == "mixtral":
            n = config["num_local_experts"]
            out.append((b + "block_sparse_moe.gate.weight", (n, e)))
            for x in range(n):
                m = f"{b}block_sparse_moe.experts.{x}."
                out += [(m + "w1.weight", (f, e)), (m + "w2.weight", (e, f)),
                        (m + "w3.weight", (f, e))]
        else:
            out += [(b + "mlp.gate_proj.weight", (f, e)), (b + "mlp.up_proj.weight", (f, e)),
                    (b + "mlp.down_proj.weight", (e, f))]
        if bias:
            out += [(b + "self_attn.q_proj.bias", (heads * hd,)),
                    (b + "self_attn.k_proj.bias", (kv * hd,)),
                    (b + "self_attn.v_proj.bias", (kv * hd,))]
    return out


def _save(path, named, dtype):
    """A safetensors file of `named` [(name, float32 array)] in `dtype` ("BF16": the top half
    of each float32; "F16", "F32"), its header's keys sorted as the reference writer sorts
    them."""
    header, blobs, at = {}, [], 0
    for name, a in sorted(named, key=lambda x: x[0]):
        if dtype == "BF16":
            raw = (a.view(np.uint32) >> np.uint32(16)).astype("<u2").tobytes()
        else:
            raw = a.astype("<f2" if dtype == "F16" else "<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def materialize(model, parent):
    """The folder `parent/model`: the stored files and the weights. Returns its path."""
    dst = Path(parent) / model
    shutil.copytree(DATA / model, dst)
    config = json.loads((dst / "config.json").read_text())
    dtype = {"bfloat16": "BF16", "float16": "F16"}.get(
        config.get("torch_dtype", config.get("dtype")), "F32")
    named = []
    for k, (name, shape) in enumerate(tensors_of(config)):
        v = values(k + 1, int(np.prod(shape))).reshape(shape)
        if name.endswith("norm.weight"):
            v = (1.0 + 0.25 * v).astype(np.float32)
        named.append((name, v))
    if model == "tiny-qwen2":
        # Two shards: the model's tensors split in halves by name, with the index.
        named.sort(key=lambda x: x[0])
        half = len(named) // 2
        parts = {"model-00001-of-00002.safetensors": named[:half],
                 "model-00002-of-00002.safetensors": named[half:]}
        weight_map = {}
        for fname, part in parts.items():
            _save(dst / fname, part, dtype)
            weight_map.update({n: fname for n, _ in part})
        (dst / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": sum(a.nbytes for _, a in named)},
             "weight_map": dict(sorted(weight_map.items()))}, indent=2))
    else:
        _save(dst / "model.safetensors", named, dtype)
    return dst
