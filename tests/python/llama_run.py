"""llama.cpp itself running a GGUF: the test that converted files run
(`test_hf_gguf_runs.py`) and the token ids recorded for the reference tools' files
(`scripts/gen-hf-gguf-vectors`) both decode through here, with the same settings.

llama.cpp is libllama of the llama.cpp that llama-cpp-python 0.3.36's sdist vendors, driven by
that sdist's own Python bindings (its `llama_cpp` package: ctypes over libllama, nothing
compiled); `scripts/ggml-reference --llama` builds the one and unpacks the other into
.tools/llama-0.3.36/ (lib/ and python/; TENSORSMITH_LLAMA_LIB: another lib/ folder, with the
python/ folder beside it). The library's dependencies are loaded first, by path (its run path
is the build folder, gone by then), and `llama_cpp` finds libllama.so through
LLAMA_CPP_LIB_PATH, its documented override.

The decode: CPU, one thread, a context of N_CTX, the prompt tokenized by the model's own
vocabulary (with BOS where the file says so), then N_TOKENS greedy steps (the arg-max of the last
position's logits, fed back) without stopping at an end-of-generation token.

`python llama_run.py FILE` prints `greedy(FILE)` as JSON: the test decodes in a process of its
own, so that libllama and the ggml it loads never meet another ggml in the test process
(test_ggml_kquants.py's libggml-base.so has the same soname), and a crash is a failed test."""

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
LIB_DIR = Path(os.environ.get("TENSORSMITH_LLAMA_LIB", ROOT / ".tools" / "llama-0.3.36" / "lib"))
PY_DIR = LIB_DIR.parent / "python"
PROMPT = "The quick brown fox jumps over the lazy dog. Hello world, 12345"
N_CTX = 64
N_TOKENS = 16

_llama_cpp = None


def available():
    return (LIB_DIR / "libllama.so").exists() and (PY_DIR / "llama_cpp" / "__init__.py").is_file()


def load():
    """The `llama_cpp` module over the built libllama, or None when it is not there."""
    global _llama_cpp
    if _llama_cpp is None and available():
        for dep in ("libggml-base.so.0", "libggml-cpu.so.0", "libggml.so.0"):
            ctypes.CDLL(str(LIB_DIR / dep), mode=ctypes.RTLD_GLOBAL)
        os.environ["LLAMA_CPP_LIB_PATH"] = str(LIB_DIR)
        sys.path.insert(0, str(PY_DIR))
        import llama_cpp
        where = Path(llama_cpp.__file__).resolve()
        assert where.is_relative_to(PY_DIR.resolve()), where
        _llama_cpp = llama_cpp
    return _llama_cpp


def greedy(path, n=N_TOKENS):
    """{"prompt": the prompt's token ids, "tokens": the `n` ids greedy decoding gives} for the
    GGUF at `path`."""
    llama_cpp = load()
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX,
                          n_threads=1, n_threads_batch=1, n_gpu_layers=0, logits_all=True,
                          verbose=os.environ.get("LLAMA_RUN_VERBOSE") == "1")
    try:
        prompt = llm.tokenize(PROMPT.encode(), add_bos=True, special=False)
        assert len(prompt) + n <= N_CTX, len(prompt)
        llm.eval(prompt)
        out = []
        for _ in range(n):
            logits = llm.scores[llm.n_tokens - 1]
            assert np.isfinite(logits).all(), f"{path}: non-finite logits at step {len(out)}"
            out.append(int(np.argmax(logits)))
            llm.eval([out[-1]])
    finally:
        llm.close()
    return {"prompt": [int(t) for t in prompt], "tokens": out}


def greedy_in_subprocess(path):
    """`greedy(path)` in a fresh Python process (this one's interpreter)."""
    p = subprocess.run([sys.executable, __file__, str(path)], capture_output=True, timeout=300,
                       check=False)
    assert p.returncode == 0, f"llama_run.py {path}: exit {p.returncode}\n{p.stderr.decode()}"
    return json.loads(p.stdout)


if __name__ == "__main__":
    if load() is None:
        sys.exit(f"no libllama.so and llama_cpp in {LIB_DIR.parent}: "
                 "run scripts/ggml-reference --llama")
    print(json.dumps(greedy(sys.argv[1])))
