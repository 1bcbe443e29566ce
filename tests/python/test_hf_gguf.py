"""A Hugging Face model folder to GGUF in one step (`tensorsmith convert DIR out.gguf
[--dtype T] [--quantize MIX]`), byte for byte what llama.cpp's `convert_hf_to_gguf.py` writes,
and with a mix what `llama-quantize` then makes of its file: the sha256 and length of each in
tests/data/hf_gguf/vectors.json (`scripts/gen-hf-gguf-vectors` ran the reference tools on the
same folders, hf_gguf_models.py). Then one test per refusal: an architecture, a tokenizer, a
pre-tokenizer, a tensor or a vocabulary we do not convert, each named, with no output left."""

import hashlib
import json
import shutil
import struct

import gguf
import pytest

import hf_gguf_models as models

VECTORS = json.loads((models.DATA / "vectors.json").read_text())
CASES = [(m, k) for m in models.MODELS for k in VECTORS["models"][m]]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    parent = tmp_path_factory.mktemp("hf")
    return {m: models.materialize(m, parent) for m in models.MODELS}


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("model,key", CASES, ids=[f"{m}-{k}" for m, k in CASES])
def test_the_file_is_the_reference_tools_file(tsm, folders, tmp_path, model, key):
    want = VECTORS["models"][model][key]
    out = tmp_path / "out.gguf"
    if "-" in key:  # convert_hf_to_gguf.py --outtype T, then llama-quantize
        dtype, ftype = key.split("-")
        tsm.run("convert", folders[model], out, "--dtype", dtype, "--quantize", ftype, "--mix",
                "-q")
    else:  # convert_hf_to_gguf.py --outtype T
        tsm.run("convert", folders[model], out, "--outtype", key, "-q")
    assert (out.stat().st_size, sha(out)) == (want["len"], want["sha256"])
    # The intermediate file of the two steps is gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.gguf"]


@pytest.mark.parametrize("ftype", ["Q6_K", "Q8_0", "Q4_0", "IQ4_XS"])
def test_a_model_folders_quantize_is_llama_quantizes_file_type(tsm, folders, tmp_path, ftype):
    """From a model folder, --quantize T is the second step's, llama-quantize's, file type
    without --mix too: its bytes, its general.file_type (it kept the converter's F16 one,
    and rows that are not whole blocks in the checkpoint's float type)."""
    out = tmp_path / "out.gguf"
    tsm.run("convert", folders["tiny-qwen2"], out, "--dtype", "F16", "--quantize", ftype, "-q")
    want = VECTORS["models"]["tiny-qwen2"][f"f16-{ftype}"]
    assert (out.stat().st_size, sha(out)) == (want["len"], want["sha256"])


def test_defaults_are_the_reference_defaults(tsm, folders, tmp_path):
    """No --outtype: "auto", convert_hf_to_gguf.py's default (BF16 for a BF16 checkpoint, F16
    for F16 and F32 ones); --dtype names F32/F16/BF16 too; an _M name is a mix."""
    for m, auto in (("tiny-llama3-instruct", "bf16"), ("tiny-mixtral", "f16"),
                    ("tiny-qwen2", "f16")):
        v = VECTORS["models"][m]
        assert v["auto"] == v[auto]
        tsm.run("convert", folders[m], tmp_path / "a.gguf", "-q")
        assert sha(tmp_path / "a.gguf") == v["auto"]["sha256"], m
    m = "tiny-llama3-instruct"
    tsm.run("convert", folders[m], tmp_path / "b.gguf", "--quantize", "Q4_K_M", "-q")
    assert sha(tmp_path / "b.gguf") == VECTORS["models"][m]["bf16-Q4_K_M"]["sha256"]
    tsm.run("convert", folders[m], tmp_path / "c.gguf", "--dtype", "F16", "-q")
    assert sha(tmp_path / "c.gguf") == VECTORS["models"][m]["f16"]["sha256"]


def test_outtype_refusals(tsm, folders, tmp_path):
    m = folders["tiny-qwen2"]
    err = refused(tsm, m, tmp_path, "--outtype", "q8_0", "--quantize", "Q4_K_M")
    assert "does not quantize" in err and "again" in err
    err = refused(tsm, m, tmp_path, "--outtype", "f16", "--dtype", "BF16")
    assert "disagree" in err
    # The converter casts to nearest: a truncating cast would be ignored, so it is refused.
    err = refused(tsm, m, tmp_path, "--dtype", "F16", "--rounding", "truncate")
    assert "truncate" in err and "nearest" in err
    p = tsm.run("convert", m, tmp_path / "x.gguf", "--outtype", "q4_k", expect=None)
    assert p.returncode != 0 and b"q8_0, tq1_0, tq2_0, auto" in p.stderr
    # Not a model folder, or not GGUF: --outtype is the converter's.
    st = tsm.convert(m / "model-00001-of-00002.safetensors", tmp_path / "one.safetensors")
    err = refused(tsm, st, tmp_path, "--outtype", "q8_0")
    assert "--outtype" in err and "--quantize" in err
    p = tsm.run("convert", m, tmp_path / "x.safetensors", "--outtype", "f16", expect=2)
    assert b"GGUF output" in p.stderr


def test_what_the_file_holds(tsm, folders, tmp_path):
    out = tmp_path / "l.gguf"
    tsm.run("convert", folders["tiny-llama3-instruct"], out, "-q")
    r = gguf.GGUFReader(str(out))
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("GGUF.")}
    assert f["general.architecture"] == "llama"
    assert (f["general.name"], f["general.basename"], f["general.finetune"]) == (
        "Tiny Llama3 Instruct", "tiny-llama3", "instruct")
    assert f["tokenizer.ggml.pre"] == "llama-bpe" and f["tokenizer.ggml.model"] == "gpt2"
    types = f["tokenizer.ggml.token_type"]
    tokens = f["tokenizer.ggml.tokens"]
    assert types[tokens.index("<|eot_id|>")] == 3  # control
    assert types[tokens.index("<tool>")] == 4  # user-defined (an added, not special, token)
    assert tokens[-1].startswith("[PAD") and types[-1] == 5  # config's vocab_size is larger
    assert f["llama.rope.dimension_count"] == 64 and f["general.sampling.temp"] == pytest.approx(0.6)
    names = [t.name for t in r.tensors]
    assert names[0] == "rope_freqs.weight" and "output.weight" in names
    q = gguf.GGUFReader(str(tsm.convert(folders["tiny-qwen2"], tmp_path / "q.gguf", "-q")))
    assert q.fields["tokenizer.ggml.pre"].contents() == "qwen2"
    assert "output.weight" not in [t.name for t in q.tensors]  # tied embeddings
    assert "blk.0.attn_q.bias" in [t.name for t in q.tensors]


def copy(folders, tmp_path, model="tiny-llama3-instruct"):
    return shutil.copytree(folders[model], tmp_path / model)


def refused(tsm, src, tmp_path, *flags):
    out = tmp_path / "out.gguf"
    p = tsm.run("convert", src, out, "-q", *flags, expect=2)
    assert not out.exists() and not list(tmp_path.glob(".out.gguf*"))
    return p.stderr.decode()


def test_an_architecture_we_do_not_map_is_refused_by_name(tsm, folders, tmp_path):
    d = copy(folders, tmp_path)
    c = json.loads((d / "config.json").read_text())
    c["architectures"] = ["GPT2LMHeadModel"]
    (d / "config.json").write_text(json.dumps(c))
    err = refused(tsm, d, tmp_path)
    assert "GPT2LMHeadModel" in err and "LlamaForCausalLM" in err and "Qwen2ForCausalLM" in err
    assert "MixtralForCausalLM" in err


def test_an_unknown_pre_tokenizer_is_refused_and_can_be_named(tsm, folders, tmp_path):
    d = copy(folders, tmp_path)
    t = json.loads((d / "tokenizer.json").read_text())
    t["pre_tokenizer"] = {"type": "Whitespace"}
    (d / "tokenizer.json").write_text(json.dumps(t))
    assert "BPE pre-tokenizer was not recognized" in refused(tsm, d, tmp_path)
    assert "--pre-tokenizer" in refused(tsm, d, tmp_path)
    out = tsm.convert(d, tmp_path / "named.gguf", "--pre-tokenizer", "gpt-2", "-q")
    assert gguf.GGUFReader(str(out)).fields["tokenizer.ggml.pre"].contents() == "gpt-2"


def test_a_broken_sentencepiece_model_and_a_lone_spm_style_json_are_refused(tsm, folders,
                                                                             tmp_path):
    d = copy(folders, tmp_path, "tiny-mixtral")
    (d / "tokenizer.model").write_bytes(b"\x0a\xff\xff")
    assert "not a SentencePiece model" in refused(tsm, d, tmp_path)
    d2 = copy(folders, tmp_path / "b")
    t = json.loads((d2 / "tokenizer.json").read_text())
    t["model"]["byte_fallback"] = True
    (d2 / "tokenizer.json").write_text(json.dumps(t))
    assert "SentencePiece-style" in refused(tsm, d2, tmp_path)


def test_a_mixture_of_experts_with_a_sentencepiece_tokenizer(tsm, folders, tmp_path):
    r = gguf.GGUFReader(str(tsm.convert(folders["tiny-mixtral"], tmp_path / "m.gguf", "-q")))
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("GGUF.")}
    assert (f["tokenizer.ggml.model"], f["tokenizer.ggml.pre"]) == ("llama", "default")
    assert len(f["tokenizer.ggml.scores"]) == len(f["tokenizer.ggml.tokens"])
    assert f["tokenizer.ggml.token_type"][:3] == [3, 3, 3]  # <unk> <s> </s>: special, control
    assert (f["llama.expert_count"], f["llama.expert_used_count"]) == (4, 2)
    assert f["general.size_label"].startswith("4x")
    t = {x.name: x for x in r.tensors}
    assert list(t["blk.0.ffn_gate_exps.weight"].shape) == [256, 256, 4]
    assert t["blk.1.ffn_gate_inp.weight"].tensor_type.name == "F32"
    # A layer missing an expert's tensor is refused by name.
    d = copy(folders, tmp_path, "tiny-mixtral")
    cfg = json.loads((d / "config.json").read_text())
    cfg["num_local_experts"] = 5
    (d / "config.json").write_text(json.dumps(cfg))
    assert "lacks some of its experts" in refused(tsm, d, tmp_path)


def test_a_tensor_without_a_llama_cpp_name_is_refused_naming_it(tsm, folders, tmp_path):
    import numpy as np
    d = copy(folders, tmp_path)
    named = [("model.layers.0.mlp.shared_expert.up_proj.weight",
              np.ones((4, 256), dtype=np.float32))]
    models._save(d / "model-extra.safetensors", named, "F32")
    err = refused(tsm, d, tmp_path)
    assert "model.layers.0.mlp.shared_expert.up_proj.weight" in err and "llama.cpp name" in err


def test_an_integer_tensor_and_a_short_vocabulary_are_refused(tsm, folders, tmp_path):
    d = copy(folders, tmp_path)
    c = json.loads((d / "config.json").read_text())
    c["vocab_size"] = 100
    (d / "config.json").write_text(json.dumps(c))
    assert "vocabulary size 100" in refused(tsm, d, tmp_path)
    d2 = copy(folders, tmp_path / "b")
    h = json.dumps({"model.embed_tokens.weight": {"dtype": "I64", "shape": [2],
                                                  "data_offsets": [0, 16]}}).encode()
    (d2 / "model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + bytes(16))
    err = refused(tsm, d2, tmp_path)
    assert "model.embed_tokens.weight" in err and "I64" in err


def test_an_output_type_the_converter_does_not_write_is_refused(tsm, folders, tmp_path):
    err = refused(tsm, folders["tiny-qwen2"], tmp_path, "--dtype", "F64")
    assert "F64" in err and "F32, F16 or BF16" in err


def test_keep_names_writes_the_checkpoint_as_it_is(tsm, folders, tmp_path):
    out = tsm.convert(folders["tiny-qwen2"], tmp_path / "k.gguf", "--keep-names", "-q")
    names = {t.name for t in gguf.GGUFReader(str(out)).tensors}
    assert "model.embed_tokens.weight" in names and "token_embd.weight" not in names


def test_the_python_api_converts_a_folder_in_one_step(folders, tmp_path):
    import tensorsmith
    m = "tiny-qwen2"
    out = tmp_path / "p.gguf"
    assert tensorsmith.convert(folders[m], out, quantize="Q4_K_M") == [str(out)]
    assert sha(out) == VECTORS["models"][m]["f16-Q4_K_M"]["sha256"]
    d = copy(folders, tmp_path, m)
    t = json.loads((d / "tokenizer.json").read_text())
    t["pre_tokenizer"] = {"type": "Whitespace"}
    (d / "tokenizer.json").write_text(json.dumps(t))
    tensorsmith.convert(d, tmp_path / "n.gguf", pre_tokenizer="qwen2")
    with pytest.raises(Exception, match="pre-tokenizer"):
        tensorsmith.convert(d, tmp_path / "x.gguf")
    with pytest.raises(Exception, match="applies to casts"):
        tensorsmith.convert(folders[m], tmp_path / "t.gguf", rounding="truncate")
    assert not (tmp_path / "t.gguf").exists()
    kept = tensorsmith.convert(folders[m], tmp_path / "k.gguf", keep_names=True)
    assert "model.norm.weight" in {t.name for t in gguf.GGUFReader(kept[0]).tensors}


def test_a_model_card_the_converter_cannot_write_is_refused_by_name(tsm, folders, tmp_path):
    """The card's keys are pinned by the vectors (tiny-qwen3, tiny-qwen3-moe); here the cards
    the reference itself fails on: a number where text goes, front matter that is not YAML."""
    d = copy(folders, tmp_path, "tiny-qwen3")
    (d / "README.md").write_text("---\nlicense: mit\nversion: 1.5\n---\n")
    err = refused(tsm, d, tmp_path)
    assert "README.md" in err and "version is 1.5, not text" in err
    (d / "README.md").write_text("---\nlicense: [mit\n---\n")
    err = refused(tsm, d, tmp_path)
    assert "README.md" in err and "not YAML" in err
    # A README without front matter adds nothing: the file is the one without a card.
    (d / "README.md").write_text("# just text\n---\nlicense: mit\n---\n")
    no_card = copy(folders, tmp_path / "b", "tiny-qwen3")
    (no_card / "README.md").unlink()
    a = tsm.convert(d, tmp_path / "a.gguf", "-q")
    b = tsm.convert(no_card, tmp_path / "b.gguf", "-q")
    assert sha(a) == sha(b) != VECTORS["models"]["tiny-qwen3"]["f16"]["sha256"]


def test_a_qwen3_reranker_is_refused_not_written_as_a_language_model(tsm, folders, tmp_path):
    """The reference converts one as a ranking model (cls.output, rank pooling): refused here,
    by the same signs it looks for (a model card heading, a name)."""
    d = copy(folders, tmp_path, "tiny-qwen3")
    (d / "README.md").write_text("# Qwen3-Reranker-0.6B\n\nA reranker.\n")
    assert "Qwen3 reranker" in refused(tsm, d, tmp_path)
    d2 = shutil.copytree(folders["tiny-qwen3"], tmp_path / "b" / "my-qwen3-reranker")
    assert "Qwen3 reranker" in refused(tsm, d2, tmp_path)
