"""`tensorsmith.stats` (and `tensorsmith stats --json`) against NumPy over the same values:
exact for min, max and every count; mean and std within 1e-6 × max(|mean|, std) + 1e-12 of
NumPy's float64 ones; GGUF block types against NumPy over `gguf.quants.dequantize`; the
overflow and flush-to-zero fractions against NumPy's casts (float16, and ml_dtypes' bfloat16,
float8_e4m3fn and float8_e5m2); integer histograms against `numpy.histogram`."""

import json

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

import tensorsmith

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import quants  # noqa: E402

TARGETS = {
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "f8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "f8_e5m2": ml_dtypes.float8_e5m2,
}

SUB_BYTE_INTS = [np.dtype(getattr(ml_dtypes, n)) for n in ("int4", "uint4", "int2", "uint2")
                 if hasattr(ml_dtypes, n)]


def reference(x):
    """What stats must say about the array `x` (in its own dtype), computed by NumPy."""
    x = np.asarray(x).reshape(-1)
    if x.dtype in SUB_BYTE_INTS:
        x = x.astype(np.int64)
    if x.dtype.kind in "iub":
        v = x.astype(np.int64) if x.dtype != np.uint64 else x
        out = {"kind": "integer", "count": v.size, "zeros": int((v == 0).sum())}
        if v.size:
            lo, hi = int(v.min()), int(v.max())
            out |= {"min": lo, "max": hi, "mean": float(v.mean(dtype=np.float64)),
                    "std": float(v.std(dtype=np.float64)),
                    "histogram": {"min": lo, "max": hi, "counts":
                                  np.histogram(v, bins=64, range=(lo, hi))[0].tolist()}}
        return out
    f = x.astype(np.float64)  # exact for every float type here
    fin = np.isfinite(f)
    v = f[fin]
    nz = v[v != 0]
    smallest_normal = float(ml_dtypes.finfo(x.dtype).smallest_normal)
    out = {
        "kind": "float", "count": int(v.size),
        "nan": int(np.isnan(f).sum()), "pos_inf": int(np.isposinf(f).sum()),
        "neg_inf": int(np.isneginf(f).sum()), "zeros": int((f == 0).sum()),
        "subnormals": int((np.abs(nz) < smallest_normal).sum()),
    }
    if v.size:
        out |= {"min": float(np.nanmin(v)), "max": float(np.nanmax(v)),
                "mean": float(v.mean(dtype=np.float64)), "std": float(v.std(dtype=np.float64))}
    if nz.size:
        # floor(log2 |x|) exactly: |x| = m · 2^e with 0.5 ≤ m < 1.
        e = np.frexp(nz)[1].astype(np.int64) - 1
        first = int(e.min())
        out["exponents"] = {"first": first,
                            "counts": np.bincount(e - first).tolist()}
    if x.size:
        over, flush = {}, {}
        with np.errstate(over="ignore", invalid="ignore"):
            for name, t in TARGETS.items():
                # From F32 (exact for every narrower float) or from F64 itself.
                src = f if x.dtype == np.float64 else x.astype(np.float32)
                y = src.astype(t).astype(np.float64)
                over[name] = int((fin & ~np.isfinite(y)).sum()) / x.size
                flush[name] = int((fin & (f != 0) & (y == 0)).sum()) / x.size
        out["overflow"], out["flush"] = over, flush
    return out


def assert_matches(got, want, name):
    for k, w in want.items():
        g = got[k]
        if k in ("mean", "std"):
            tol = 1e-6 * max(abs(want["mean"]), want["std"]) + 1e-12
            assert abs(g - w) <= tol, (name, k, g, w)
        else:
            assert g == w, (name, k, g, w)
    for k in ("min", "max", "mean", "std"):
        if k not in want:
            assert got[k] is None, (name, k)


def special_f32(rng, n):
    """Normal values of many magnitudes, plus NaN, ±Inf, zeros of both signs, F32 subnormals,
    and values at and around every overflow and flush threshold."""
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))).astype(np.float32)
    edges = []
    for t in (65504.0, 65520.0, 448.0, 464.0, 57344.0, 61440.0, 3.3895314e38,
              2.0**-24, 2.0**-25, 2.0**-9, 2.0**-10, 2.0**-16, 2.0**-17, 2.0**-133, 2.0**-134):
        c = np.float32(t)
        edges += [c, np.nextafter(c, np.float32(0)), np.nextafter(c, np.float32(np.inf))]
    edges = np.array(edges, np.float32)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -3e-39, 1e-40], np.float32)
    v[: edges.size] = edges
    v[edges.size: 2 * edges.size] = -edges
    v[2 * edges.size: 2 * edges.size + special.size] = special
    return v


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(32)
    f32 = special_f32(rng, 200_003)
    with np.errstate(over="ignore"):
        return {
            "f32": f32.reshape(-1, 1),
            "f16": f32.astype(np.float16),
            "bf16": f32.astype(ml_dtypes.bfloat16),
            "e4m3": f32.astype(ml_dtypes.float8_e4m3fn),
            "e5m2": f32.astype(ml_dtypes.float8_e5m2),
            "e4m3fnuz": f32.astype(ml_dtypes.float8_e4m3fnuz),
            "f64": (rng.standard_normal(5000) * 1e150).astype(np.float64),
            "f64_tiny": np.concatenate([np.array([5e-324, -2e-310, 0.0, np.nan]),
                                        rng.standard_normal(100) * 1e-8]),
            "const": np.full((3, 7), 2.5, np.float32),
            "empty": np.zeros((0, 4), np.float32),
            "i8": rng.integers(-128, 128, 1001).astype(np.int8),
            "u16": rng.integers(0, 65536, 999).astype(np.uint16),
            "i64": rng.integers(-(2**62), 2**62, 500).astype(np.int64),
            "i32_one": np.full(10, 7, np.int32),
            "bool": rng.integers(0, 2, 77).astype(np.bool_),
        }


@pytest.fixture(scope="module")
def model(arrays, tmp_path_factory):
    path = tmp_path_factory.mktemp("stats") / "m.safetensors"
    tensorsmith.save_file(arrays, path)
    return path


def test_every_dtype_matches_numpy(arrays, model):
    got = tensorsmith.stats(model)
    assert set(got) == set(arrays)
    for name, x in arrays.items():
        assert_matches(got[name], reference(x), name)
    # The fixture reaches what it is meant to reach.
    s = got["f32"]
    assert s["nan"] == 1 and s["pos_inf"] == 1 and s["subnormals"] > 0
    assert all(s["overflow"][t] > 0 for t in ("f16", "f8_e4m3fn", "f8_e5m2"))
    assert all(s["flush"][t] > 0 for t in TARGETS)
    assert got["f64_tiny"]["subnormals"] == 2
    assert got["e4m3fnuz"]["dtype"] == "F8_E4M3FNUZ"


def test_the_cli_json_is_the_same_document(tsm, model):
    doc = json.loads(tsm.run("stats", "--json", model).stdout)
    assert doc["schema"] == "tensorsmith.stats/1"
    assert {t["name"]: t for t in doc["tensors"]} == tensorsmith.stats(model)


def test_selection_by_pattern(model):
    assert set(tensorsmith.stats(model, tensors="f*")) == {"f32", "f16", "f64", "f64_tiny"}
    assert set(tensorsmith.stats(model, tensors=["e?m?", "i8"])) == {"e4m3", "e5m2", "i8"}
    with pytest.raises(tensorsmith.OptionError, match="never closed"):
        tensorsmith.stats(model, tensors="[x")


def test_large_tensor_across_chunks_matches_numpy(tmp_path):
    # 12 MiB of BF16: several chunks measured in parallel, merged.
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(6 * 2**20) * 3 + 100).astype(ml_dtypes.bfloat16)
    x[12345] = np.nan
    path = tmp_path / "big.safetensors"
    tensorsmith.save_file({"w": x}, path)
    assert_matches(tensorsmith.stats(path)["w"], reference(x), "w")


def test_the_reference_writers_file_and_numpy_script_agree(tmp_path):
    # The benchmark's NumPy script, on a file the reference package wrote.
    rng = np.random.default_rng(3)
    path = tmp_path / "ref.safetensors"
    safetensors.numpy.save_file({"a": rng.standard_normal((64, 33)).astype(np.float32),
                                 "b": rng.standard_normal(1000).astype(np.float16)}, path)
    got = tensorsmith.stats(path)
    for name, x in safetensors.numpy.load_file(path).items():
        f = x.astype(np.float32)
        s = got[name]
        assert (s["min"], s["max"]) == (float(np.nanmin(f)), float(np.nanmax(f)))
        assert abs(s["mean"] - f.mean(dtype=np.float64)) <= 1e-6 * abs(s["mean"]) + 1e-12
        assert abs(s["std"] - f.std(dtype=np.float64)) <= 1e-6 * s["std"] + 1e-12
        assert s["nan"] == int(np.isnan(f).sum()) and s["pos_inf"] == int(np.isinf(f).sum())


# ---------------------------------------------------------------- GGUF block types

TYPES = [
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
    "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_NL", "IQ4_XS",
    "TQ1_0", "TQ2_0", "MXFP4", "NVFP4",
]
# Byte offsets of each type's f16 scales (small finite ones, so that most values are finite;
# the first blocks then get NaN, infinite and subnormal scales).
F16_AT = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ1_S": [0], "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0],
    "IQ4_NL": [0], "IQ4_XS": [0], "TQ1_0": [52], "TQ2_0": [64],
}
SPECIAL_F16 = [0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8000, 0x7BFF]


def blocks(qtype, seed, rows=16, per_row=40):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(rows, per_row * size), dtype=np.uint8)
    b = data.reshape(-1, size)
    for at in F16_AT.get(qtype.name, []):
        h = rng.integers(0x1C00, 0x3C00, len(b))  # 2^-8 ..< 1
        b[:, at], b[:, at + 1] = h & 0xFF, h >> 8
        for k, s in enumerate(SPECIAL_F16):
            b[k, at], b[k, at + 1] = s & 0xFF, s >> 8
    return data


@pytest.fixture(scope="module")
def gguf_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("stats") / "q.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    refs = {}
    for i, name in enumerate(TYPES):
        qtype = getattr(Q, name)
        data = blocks(qtype, 500 + i)
        refs[name.lower()] = quants.dequantize(data, qtype)
        w.add_tensor(name.lower(), data, raw_dtype=qtype)
    # A real quantization of smooth values, Q8_0 as llama.cpp would write it.
    vals = np.sin(np.arange(64 * 256, dtype=np.float32) * 0.01).reshape(64, 256) * 4
    q8 = quants.quantize(vals, Q.Q8_0)
    refs["q8_0_real"] = quants.dequantize(q8, Q.Q8_0)
    w.add_tensor("q8_0_real", q8, raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, refs


@pytest.mark.parametrize("name", [t.lower() for t in TYPES] + ["q8_0_real"])
def test_gguf_blocks_match_numpy_over_gguf_dequantize(gguf_model, name):
    path, refs = gguf_model
    got = tensorsmith.stats(path, tensors=name)[name]
    assert got["dtype"] == "F32" and got["type"] == name.replace("_real", "")
    assert_matches(got, reference(refs[name]), name)


def test_bundled_gguf_file_matches_gguf_py(tmp_path):
    path = "tests/data/gguf/every_type.gguf"
    got = tensorsmith.stats(path)
    r = gguf.GGUFReader(path)
    assert len(got) == len(r.tensors)
    for t in r.tensors:
        x = np.asarray(t.data)
        if t.tensor_type not in (Q.F32, Q.F16, Q.BF16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64):
            x = quants.dequantize(x, t.tensor_type)
        assert_matches(got[t.name], reference(x), t.name)


def test_compressed_ztensor_and_onnx_typed_fields(model, arrays, tmp_path):
    zt = tmp_path / "m.zt"
    tensorsmith.convert(model, zt, zt_version="2", compress=3)
    assert tensorsmith.stats(zt)["bf16"] == tensorsmith.stats(model)["bf16"]
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    path = "tests/data/onnx/typed.onnx"
    got = tensorsmith.stats(path)
    m = onnx.load(path)
    for init in m.graph.initializer:
        if init.name not in got or got[init.name]["not_measured"]:
            continue
        assert_matches(got[init.name], reference(numpy_helper.to_array(init)), init.name)
