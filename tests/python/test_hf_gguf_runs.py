"""It runs: a GGUF that `tensorsmith convert` made from a Hugging Face folder loads in llama.cpp
and, greedy on a fixed prompt, gives the tokens that llama.cpp gives for the file its own tools
made (`convert_hf_to_gguf.py`, then `llama-quantize`). For each test folder
(hf_gguf_models.py), F16 and Q4_K_M: the prompt's token ids (the file's vocabulary, through
llama.cpp's tokenizer) and 16 greedy tokens, against those recorded in
tests/data/hf_gguf/vectors.json ("greedy", by `scripts/gen-hf-gguf-vectors` from the reference
files). The weights are random, so the tokens are arbitrary, but the same on every run.

llama.cpp is libllama of llama-cpp-python 0.3.36's sdist with that sdist's own Python bindings
(llama_run.py, in a process of its own), made by `scripts/ggml-reference --llama` (scripts/test
runs it first and sets TENSORSMITH_REQUIRE_LLAMA=1, which makes its absence a failure;
otherwise these tests are skipped without it)."""

import json
import os

import pytest

import hf_gguf_models as models
import llama_run

VECTORS = json.loads((models.DATA / "vectors.json").read_text())["greedy"]
CASES = [(m, k) for m in models.MODELS for k in VECTORS["models"][m]]
FLAGS = {"f16": ["--dtype", "F16"], "f16-Q4_K_M": ["--dtype", "F16", "--quantize", "Q4_K_M"]}

if not llama_run.available():
    if os.environ.get("TENSORSMITH_REQUIRE_LLAMA") == "1":
        raise RuntimeError(f"TENSORSMITH_REQUIRE_LLAMA=1 but no libllama.so and llama_cpp in "
                           f"{llama_run.LIB_DIR.parent}: run scripts/ggml-reference --llama")
    pytest.skip(f"no llama.cpp at {llama_run.LIB_DIR.parent} (scripts/ggml-reference --llama "
                "builds it)", allow_module_level=True)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    parent = tmp_path_factory.mktemp("hf")
    return {m: models.materialize(m, parent) for m in models.MODELS}


def test_the_recorded_decode_is_this_decode():
    assert (VECTORS["prompt"], VECTORS["n_ctx"], VECTORS["n_tokens"]) == (
        llama_run.PROMPT, llama_run.N_CTX, llama_run.N_TOKENS)
    assert sorted(CASES) == sorted((m, k) for m in models.MODELS for k in FLAGS)


@pytest.mark.parametrize("model,key", CASES, ids=[f"{m}-{k}" for m, k in CASES])
def test_llama_cpp_runs_the_file_as_it_runs_the_reference_tools_file(tsm, folders, tmp_path,
                                                                      model, key):
    want = VECTORS["models"][model][key]
    out = tsm.convert(folders[model], tmp_path / f"{model}-{key}.gguf", *FLAGS[key], "-q")
    got = llama_run.greedy_in_subprocess(out)
    assert got == want
    # Not vacuous: a prompt of several tokens, all the tokens asked for, and not one id over and
    # over (the reference's tokens are not).
    assert len(got["prompt"]) > 8 and len(got["tokens"]) == llama_run.N_TOKENS
    assert len(set(got["tokens"])) > 1
