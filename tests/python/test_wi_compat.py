"""`tensorsmith hash --compat weight-inspect` against an independent restatement of
weight-inspect's algorithm (wi_oracle.py: field order, inner value encoding, quirks), on files
written by the reference `gguf` and `safetensors` packages: every GGUF value type it reads,
every tensor class, unicode and control characters, and the published vector."""

import json
import pathlib

import numpy as np
import pytest
from gguf import GGUFWriter, GGUFValueType as V, GGMLQuantizationType as Q
from gguf.quants import quantize
from safetensors.numpy import save_file

import wi_oracle

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"


def ours(tsm, path):
    out = tsm.run("hash", "--compat", "weight-inspect", "--json", path).stdout
    return json.loads(out)


def oracle(path):
    art, _canon, h = wi_oracle.hash_bytes(pathlib.Path(path).read_bytes())
    return h, wi_oracle.short_id(art[0], art[1], h)


def check(tsm, path):
    got = ours(tsm, path)
    want_hash, want_id = oracle(path)
    assert got["structural_hash"] == want_hash, path
    assert got["id"] == want_id, path


def gguf_file(path, build):
    w = GGUFWriter(str(path), "llama")
    build(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_published_vector(tsm):
    got = ours(tsm, DATA / "gguf" / "wi_tiny.gguf")
    assert got["structural_hash"] == wi_oracle.EXPECTED
    assert got["id"] == "wi:gguf:3:d775e08a"


SCALARS = [
    ("u8", V.UINT8, 255), ("i8", V.INT8, -128), ("u16", V.UINT16, 65535),
    ("i16", V.INT16, -32768), ("u32", V.UINT32, 4294967295), ("i32", V.INT32, -2147483648),
    ("f32", V.FLOAT32, 0.1), ("f32_neg_zero", V.FLOAT32, -0.0), ("f32_inf", V.FLOAT32, float("inf")),
    ("bool_t", V.BOOL, True), ("bool_f", V.BOOL, False),
    ("u64_max", V.UINT64, 2**64 - 1), ("u64_big", V.UINT64, 2**63), ("i64", V.INT64, -(2**63)),
    ("f64", V.FLOAT64, 2.5e-300), ("f64_neg_zero", V.FLOAT64, -0.0),
    ("str", V.STRING, 'q"uote \\ back\nnl\rcr\ttab\x01\x1f\x7f é ✓ 😀'),
    ("empty", V.STRING, ""),
]


@pytest.mark.parametrize("key,vtype,value", SCALARS, ids=[s[0] for s in SCALARS])
def test_gguf_scalar_types(tsm, tmp_path, key, vtype, value):
    path = gguf_file(tmp_path / "s.gguf", lambda w: w.add_key_value(f"t.{key}", value, vtype))
    check(tsm, path)


ARRAYS = [
    ("u8", V.UINT8, [0, 1, 255]), ("i8", V.INT8, [-1, 0, 127]), ("u16", V.UINT16, [1, 65535]),
    ("i16", V.INT16, [-2, 2]), ("u32", V.UINT32, [7, 4000000000]), ("i32", V.INT32, [-7, 7]),
    ("f32", V.FLOAT32, [1.5, -0.25, 1e-40]), ("bool", V.BOOL, [True, False]),
    ("str", V.STRING, ["a", "", 'q"\\', "ü\n"]),
]


@pytest.mark.parametrize("key,sub,values", ARRAYS, ids=[a[0] for a in ARRAYS])
def test_gguf_arrays(tsm, tmp_path, key, sub, values):
    path = gguf_file(
        tmp_path / "a.gguf", lambda w: w.add_key_value(f"a.{key}", values, V.ARRAY, sub_type=sub)
    )
    check(tsm, path)


def test_gguf_tensor_classes_and_names(tsm, tmp_path):
    rng = np.random.default_rng(1)

    def build(w):
        w.add_tensor("f32.wéight", rng.standard_normal((3, 4)).astype(np.float32))
        w.add_tensor("f16", rng.standard_normal((2, 8)).astype(np.float16))
        w.add_tensor("f64", np.zeros(3, dtype=np.float64))
        for dt in (np.int8, np.int16, np.int32, np.int64):
            w.add_tensor(f"{np.dtype(dt).name}", np.arange(4, dtype=dt))
        src = rng.standard_normal((2, 64)).astype(np.float32)
        w.add_tensor("q8_0", quantize(src, Q.Q8_0), raw_dtype=Q.Q8_0)  # byte_length 0 (quirk)
        w.add_tensor("q4_0", quantize(src, Q.Q4_0), raw_dtype=Q.Q4_0)
        w.add_tensor("日本語.名前", np.ones((1, 2, 3), dtype=np.float32))

    check(tsm, gguf_file(tmp_path / "t.gguf", build))


def test_gguf_vectors(tsm):
    for name in ["alignment64.gguf", "no_tensors.gguf", "wi_tiny.gguf"]:
        check(tsm, DATA / "gguf" / name)


def test_safetensors_files(tsm, tmp_path):
    tensors = {
        "a.weight": np.ones((2, 3), dtype=np.float32),
        "b.ünïcode": np.arange(4, dtype=np.int64),
        "c": np.zeros((5,), dtype=np.float16),
        "d": np.array([True, False]),
        "e": np.arange(3, dtype=np.uint8),
    }
    path = tmp_path / "m.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt", "note": 'q"\\\n\t\x01 é'})
    check(tsm, path)
    save_file(tensors, str(path))
    check(tsm, path)
    # (The vectors in tests/data/safetensors all hold a zero-size tensor, which weight-inspect
    # refuses; every dtype here instead.)
    import ml_dtypes

    every = {
        f"t_{np.dtype(dt).name}": np.arange(6).astype(dt).reshape(2, 3)
        for dt in (np.float64, np.float32, np.float16, ml_dtypes.bfloat16, np.int8, np.int16,
                   np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                   ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)
    }
    save_file(every, str(path), metadata={"format": "np"})
    check(tsm, path)
