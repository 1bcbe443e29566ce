"""ggml's own quantizer, `ggml_quantize_chunk`, through ctypes: the reference for the K-quant
and IQ4 quantization tests (`test_ggml_kquants.py`) and for the pinned vectors under
tests/data/ggml_k/ (`scripts/gen-ggml-k-vectors`). The library is `libggml-base.so` of the
llama.cpp that llama-cpp-python 0.3.36's sdist vendors, built by `scripts/ggml-reference`
into .tools/ggml-0.3.36/lib/ (or wherever TENSORSMITH_GGML_BASE points)."""

import ctypes
import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
LIB_PATH = Path(os.environ.get("TENSORSMITH_GGML_BASE",
                               ROOT / ".tools" / "ggml-0.3.36" / "lib" / "libggml-base.so"))

# ggml.h's enum ggml_type ids, and (values, bytes) per block.
TYPES = {
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110),
    "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210),
    "IQ4_NL": (20, 32, 18),
    "IQ4_XS": (23, 256, 136),
    "IQ3_XXS": (18, 256, 98),
    "IQ3_S": (21, 256, 110),
    "IQ2_XXS": (16, 256, 66),
    "IQ2_XS": (17, 256, 74),
    "IQ2_S": (22, 256, 82),
    "IQ1_S": (19, 256, 50),
    "IQ1_M": (29, 256, 56),
}

# Made with an importance matrix only (ggml asserts one).
NEEDS_IMATRIX = {"IQ2_XXS", "IQ2_XS", "IQ1_S"}

_lib = None


def load():
    """The library, or None when it is not built."""
    global _lib
    if _lib is None and LIB_PATH.is_file():
        lib = ctypes.CDLL(str(LIB_PATH))
        lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        lib.ggml_quantize_chunk.argtypes = [
            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_void_p]
        lib.ggml_row_size.restype = ctypes.c_size_t
        lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
        _lib = lib
    return _lib


def quantize(rows, name, imatrix=None):
    """`rows` (2-D float32) quantized by ggml to `name`: a uint8 array (rows, row bytes)."""
    lib = load()
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    nrows, n_per_row = rows.shape
    tid = TYPES[name][0]
    row_size = lib.ggml_row_size(tid, n_per_row)
    out = np.zeros((nrows, row_size), np.uint8)
    qw = None
    if imatrix is not None:
        imatrix = np.ascontiguousarray(imatrix, dtype=np.float32)
        assert imatrix.shape == (n_per_row,)
        qw = imatrix.ctypes.data
    got = lib.ggml_quantize_chunk(tid, rows.ctypes.data, out.ctypes.data, 0, nrows, n_per_row, qw)
    assert got == out.size, (got, out.size)
    return out
