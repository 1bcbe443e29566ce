"""A real client: transformers' `from_pretrained` of a random Llama saved with
`save_pretrained` (sharded, tied embeddings) loads through tensorsmith, swapped in for the
reference by aliasing `sys.modules["safetensors"]` and its submodules before transformers is
imported (in a child process, so the swap stays there). The logits equal the reference's."""

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("transformers")

SWAP = textwrap.dedent("""
    import sys
    if sys.argv[2] == "tensorsmith":
        import tensorsmith, tensorsmith.torch, tensorsmith.numpy
        sys.modules["safetensors"] = tensorsmith
        sys.modules["safetensors.torch"] = tensorsmith.torch
        sys.modules["safetensors.numpy"] = tensorsmith.numpy
        tensorsmith.torch.__name__  # noqa
    import torch, transformers, safetensors
    assert (safetensors.__name__ == "tensorsmith") == (sys.argv[2] == "tensorsmith")
    m = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
    assert m.lm_head.weight.data_ptr() == m.model.embed_tokens.weight.data_ptr()
    ids = torch.arange(16).reshape(2, 8) % m.config.vocab_size
    with torch.no_grad():
        logits = m(input_ids=ids).logits
    print(json.dumps(logits.flatten().tolist()))
""").replace("import sys\n", "import json, sys\n", 1)


def test_from_pretrained_through_tensorsmith_gives_the_same_logits(tmp_path):
    import torch
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    model.save_pretrained(tmp_path, max_shard_size="100KB")
    shards = sorted(p.name for p in tmp_path.glob("*.safetensors"))
    assert len(shards) > 1 and (tmp_path / "model.safetensors.index.json").exists()
    out = {}
    for impl in ("reference", "tensorsmith"):
        p = subprocess.run([sys.executable, "-c", SWAP, str(tmp_path), impl],
                           capture_output=True, text=True, timeout=300, check=False)
        assert p.returncode == 0, p.stderr[-3000:]
        out[impl] = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["tensorsmith"] == out["reference"]
