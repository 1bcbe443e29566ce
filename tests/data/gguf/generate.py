"""Writes the GGUF test vectors with the reference `gguf` package (PyPI, 0.19.0) and
expected.json, what each must read as (values, tensor types, dims, byte lengths, digests).

Run from the repository root:  .venv/bin/python tests/data/gguf/generate.py
"""
import hashlib
import json
import pathlib

import numpy as np
import gguf
from gguf import GGUFWriter, GGUFReader, GGUFValueType as V, GGMLQuantizationType as Q
from gguf.quants import quantize

here = pathlib.Path(__file__).resolve().parent
rng = np.random.default_rng(20261123)
expected = {"gguf_package": gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0"}


def tensor_bytes(reader_tensor):
    return bytes(np.asarray(reader_tensor.data).tobytes())


def describe(path):
    """What the reference reader makes of a file: our tests must agree."""
    r = GGUFReader(str(path))
    tensors = []
    for t in r.tensors:
        data = tensor_bytes(t)
        tensors.append({
            "name": t.name,
            "ggml_type": t.tensor_type.name.lower(),
            "ne": [int(x) for x in t.shape],
            "n_bytes": int(t.n_bytes),
            "offset": int(t.data_offset),
            "sha256": hashlib.sha256(data).hexdigest(),
        })
    return {"alignment": int(r.alignment), "data_start": int(r.data_offset), "tensors": tensors}


def write(name, build, **kw):
    path = here / name
    w = GGUFWriter(str(path), "llama", **kw)
    meta = build(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    entry = describe(path)
    entry["metadata"] = meta
    expected[name] = entry


def every_type(w):
    # (key, value type name, value as JSON) for each key we add beyond general.architecture.
    meta = {"general.architecture": ["STRING", "llama"]}

    def add(key, vtype, value, sub_type=None):
        w.add_key_value(key, value, vtype, sub_type=sub_type)
        meta[key] = [vtype.name, value]

    add("t.u8", V.UINT8, 255)
    add("t.i8", V.INT8, -128)
    add("t.u16", V.UINT16, 65535)
    add("t.i16", V.INT16, -32768)
    add("t.u32", V.UINT32, 4294967295)
    add("t.i32", V.INT32, -2147483648)
    add("t.f32", V.FLOAT32, 0.1)
    add("t.bool_true", V.BOOL, True)
    add("t.bool_false", V.BOOL, False)
    add("t.string", V.STRING, "héllo \"wörld\"\n\t\u0001 ✓")
    add("t.empty_string", V.STRING, "")
    add("t.u64", V.UINT64, 18446744073709551615)
    add("t.i64", V.INT64, -9223372036854775808)
    add("t.f64", V.FLOAT64, 2.5e-300)
    add("t.arr_u8", V.ARRAY, [0, 1, 255], V.UINT8)
    add("t.arr_i8", V.ARRAY, [-1, 0, 127], V.INT8)
    add("t.arr_u16", V.ARRAY, [1, 65535], V.UINT16)
    add("t.arr_i16", V.ARRAY, [-2, 2], V.INT16)
    add("t.arr_u32", V.ARRAY, [7, 4000000000], V.UINT32)
    add("t.arr_i32", V.ARRAY, [-7, 7], V.INT32)
    add("t.arr_f32", V.ARRAY, [1.5, -0.25], V.FLOAT32)
    add("t.arr_bool", V.ARRAY, [True, False, True], V.BOOL)
    add("t.arr_string", V.ARRAY, ["a", "", "ü"], V.STRING)
    add("t.arr_u64", V.ARRAY, [0, 18446744073709551615], V.UINT64)
    add("t.arr_i64", V.ARRAY, [-9223372036854775808, 1], V.INT64)
    add("t.arr_f64", V.ARRAY, [1e100, -0.0], V.FLOAT64)
    add("t.arr_nested", V.ARRAY, [[1, 2], [3]], V.ARRAY)
    return meta


def tensors(w):
    meta = every_type(w)
    w.add_tensor("f32", rng.standard_normal((3, 4)).astype(np.float32))
    w.add_tensor("f16", rng.standard_normal((2, 5)).astype(np.float16))
    w.add_tensor("f64", rng.standard_normal((3,)).astype(np.float64))
    w.add_tensor("i8", np.arange(-4, 4, dtype=np.int8))
    w.add_tensor("i16", np.arange(6, dtype=np.int16).reshape(2, 3))
    w.add_tensor("i32", np.arange(4, dtype=np.int32))
    w.add_tensor("i64", np.arange(2, dtype=np.int64))
    src = rng.standard_normal((4, 64)).astype(np.float32)
    w.add_tensor("q8_0", quantize(src, Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("q4_0", quantize(src, Q.Q4_0), raw_dtype=Q.Q4_0)
    w.add_tensor("rank4", np.ones((2, 1, 3, 2), dtype=np.float32))
    return meta


write("every_type.gguf", tensors)


def aligned(w):
    w.add_custom_alignment(64)
    w.add_tensor("a", np.arange(3, dtype=np.float32))
    w.add_tensor("b", np.arange(5, dtype=np.float32))
    return {"general.architecture": ["STRING", "llama"], "general.alignment": ["UINT32", 64]}


write("alignment64.gguf", aligned)


# Rejected: general.alignment set as a plain key says 64 while the writer still pads to 32,
# so the second tensor's offset (32) is not a multiple of 64. llama.cpp refuses such files
# ("tensor has offset not a multiple of alignment"); gguf's own reader does not check.
path = here / "misaligned.gguf"
w = GGUFWriter(str(path), "llama")
w.add_uint32("general.alignment", 64)
w.add_tensor("a", np.arange(3, dtype=np.float32))
w.add_tensor("b", np.arange(5, dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
expected["reject"] = {"misaligned.gguf": {"rule": "Misaligned", "tensor": "b"}}


def vocab(w):
    n = 150_000
    tokens = [f"t{i}" for i in range(n)]
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", [float(-i) for i in range(n)])
    w.add_array("tokenizer.ggml.token_type", [1] * n)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float16))
    return {"tokenizer.ggml.tokens": ["ARRAY", {"len": n, "first": tokens[0], "last": tokens[-1]}]}


write("vocab_150k.gguf", vocab)


def no_tensors(w):
    w.add_string("general.name", "empty")
    return {"general.architecture": ["STRING", "llama"], "general.name": ["STRING", "empty"]}


write("no_tensors.gguf", no_tensors)

# weight-inspect's published vector (its tests/fixtures/tiny.gguf): GGUF v3, one key
# general.architecture = "llama", one f32 tensor test.weight.0 with dims 64, 128 in file
# order (NumPy shape (128, 64)). Its structural hash must be
# d775e08a3e69f1edce0f3230ecc28841dd1c871f467529a0a8e7aa361b671202.
path = here / "wi_tiny.gguf"
w = GGUFWriter(str(path), "llama")
w.add_tensor("test.weight.0", np.zeros((128, 64), dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
expected["wi_tiny.gguf"] = describe(path)
expected["wi_tiny.gguf"]["metadata"] = {"general.architecture": ["STRING", "llama"]}

(here / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
print("wrote", ", ".join([k for k in expected if k.endswith(".gguf")] + list(expected["reject"])))
