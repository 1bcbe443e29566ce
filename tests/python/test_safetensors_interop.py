"""Interop of the `tensorsmith` binary with the reference `safetensors` package (pinned in
requirements.txt), NumPy and ml_dtypes.

    cargo build -p tensorsmith-cli
    TENSORSMITH_BIN=target/debug/tensorsmith python -m pytest tests/python -q

Files written by the reference pass `validate`, are described the same way by `inspect --json`,
and come out of `convert` byte for byte; casts with `convert --dtype` match NumPy (F16) and
ml_dtypes (BF16) bit for bit; converted files load in the reference, slices and metadata included.
"""

import ctypes
import json
import zlib

import jsonschema
import ml_dtypes
import numpy as np
import pytest
from safetensors import TensorSpec, deserialize, safe_open, serialize
from safetensors.numpy import load_file, save_file

# NumPy dtype -> safetensors header name, for every dtype safetensors.numpy handles.
NUMPY_DTYPES = {
    "bool": "BOOL",
    "uint8": "U8",
    "int8": "I8",
    "int16": "I16",
    "uint16": "U16",
    "int32": "I32",
    "uint32": "U32",
    "int64": "I64",
    "uint64": "U64",
    "float16": "F16",
    "float32": "F32",
    "float64": "F64",
    "complex64": "C64",
}

# Names and shapes written for every dtype: matrices, a scalar and zero-size tensors.
SHAPES = {
    "matrix": (3, 4),
    "cube": (2, 3, 5),
    "scalar": (),
    "empty": (0, 5),
    "empty2": (4, 0),
    "vector": (7,),
}

INSPECT_SCHEMA = {
    "type": "object",
    "required": [
        "schema", "file", "format", "file_size", "header_size", "tensor_count",
        "total_parameters", "total_bytes", "dtypes", "metadata", "tensors",
    ],
    "properties": {
        "schema": {"const": "tensorsmith.inspect/1"},
        "format": {"const": "safetensors"},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
        "dtypes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["dtype", "tensors", "parameters", "bytes"],
            },
        },
        "tensors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "dtype", "shape", "parameters", "byte_length", "data_offsets"],
                "properties": {
                    "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                    "data_offsets": {
                        "type": "array", "minItems": 2, "maxItems": 2,
                        "items": {"type": "integer", "minimum": 0},
                    },
                },
            },
        },
    },
}


def seed(*parts):
    return zlib.crc32(repr(parts).encode())


def random_array(rng, dtype, shape):
    """Random contents: any bit pattern for numeric types (NaNs included), 0/1 for bool."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dt == np.bool_:
        return rng.integers(0, 2, size=n).astype(bool).reshape(shape)
    raw = rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def read_header(path):
    blob = path.read_bytes()
    n = int.from_bytes(blob[:8], "little")
    return json.loads(blob[8 : 8 + n]), blob[8 + n :]


def assert_same_arrays(got, want):
    assert sorted(got) == sorted(want)
    for name, a in want.items():
        b = got[name]
        assert b.dtype == a.dtype, name
        assert b.shape == a.shape, name
        assert b.tobytes() == a.tobytes(), name


def check_inspect(tsm, path, expected, metadata, header_schema):
    """`inspect --json` agrees with the file's own header and with `expected`
    ({name: (dtype, shape, byte_length)})."""
    j = tsm.inspect(path)
    jsonschema.validate(j, INSPECT_SCHEMA)
    assert j["tensor_count"] == len(expected)
    got = {t["name"]: (t["dtype"], tuple(t["shape"]), t["byte_length"]) for t in j["tensors"]}
    assert got == expected
    assert j["metadata"] == (metadata or {})
    assert j["file_size"] == path.stat().st_size
    header, data = read_header(path)
    assert j["header_size"] == path.stat().st_size - len(data)
    for t in j["tensors"]:
        assert t["data_offsets"] == header[t["name"]]["data_offsets"], t["name"]
        assert t["parameters"] == int(np.prod(t["shape"], dtype=np.int64))
    assert j["total_parameters"] == sum(t["parameters"] for t in j["tensors"])
    assert j["total_bytes"] == len(data)
    per_dtype = {}
    for dtype, _shape, nbytes in expected.values():
        c = per_dtype.setdefault(dtype, [0, 0])
        c[0] += 1
        c[1] += nbytes
    assert {d["dtype"]: [d["tensors"], d["bytes"]] for d in j["dtypes"]} == per_dtype
    # The reference header schema, except for the dtype names its pattern misses.
    errors = [
        e for e in jsonschema.Draft202012Validator(header_schema).iter_errors(header)
        if not (e.validator == "pattern" and list(e.path)[-1:] == ["dtype"])
    ]
    assert not errors, [e.message for e in errors]
    return j


# ---------------------------------------------------------------------------------------------
# (a) every dtype of the NumPy API


@pytest.mark.parametrize("metadata", [None, {"format": "np"}], ids=["no-meta", "one-key"])
@pytest.mark.parametrize("dtype", list(NUMPY_DTYPES))
def test_numpy_files_validate_inspect_and_convert_identically(
    tsm, tmp_path, header_schema, dtype, metadata
):
    rng = np.random.default_rng(seed(dtype, metadata))
    tensors = {name: random_array(rng, dtype, shape) for name, shape in SHAPES.items()}
    src = tmp_path / "ref.safetensors"
    save_file(tensors, str(src), metadata=metadata)

    out = tsm.run("validate", "--schema", src).stdout.decode()
    assert out == f"ok: {src} ({len(SHAPES)} tensors)\n"

    expected = {n: (NUMPY_DTYPES[dtype], a.shape, a.nbytes) for n, a in tensors.items()}
    check_inspect(tsm, src, expected, metadata, header_schema)

    dst = tsm.convert(src, tmp_path / "out.safetensors")
    assert dst.read_bytes() == src.read_bytes()
    assert_same_arrays(load_file(str(dst)), tensors)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.safetensors", "ref.safetensors"]


def test_all_numpy_dtypes_in_one_file(tsm, tmp_path, header_schema):
    """The writer's dtype-then-name order across dtypes: one file, every dtype, odd names."""
    rng = np.random.default_rng(7)
    tensors = {}
    for i, dtype in enumerate(NUMPY_DTYPES):
        tensors[f"t.{dtype}"] = random_array(rng, dtype, (i % 3 + 1, 2))
        tensors[f"{chr(ord('z') - i)}.scalar"] = random_array(rng, dtype, ())
    tensors["名前/ü \"q\""] = random_array(rng, "float32", (2,))
    src = tmp_path / "all.safetensors"
    save_file(tensors, str(src), metadata={"k": "v"})
    tsm.run("validate", src)
    expected = {
        n: (NUMPY_DTYPES[str(a.dtype)], a.shape, a.nbytes) for n, a in tensors.items()
    }
    check_inspect(tsm, src, expected, {"k": "v"}, header_schema)
    dst = tsm.convert(src, tmp_path / "out.safetensors")
    assert dst.read_bytes() == src.read_bytes()
    assert_same_arrays(load_file(str(dst)), tensors)


# ---------------------------------------------------------------------------------------------
# (b) bf16, f8 (and f4) through serialize/TensorSpec

# Reference dtype -> (header name, ml_dtypes type or None, bytes per storage element)
SPEC_DTYPES = {
    "bfloat16": ("BF16", ml_dtypes.bfloat16),
    "float8_e4m3fn": ("F8_E4M3", ml_dtypes.float8_e4m3fn),
    "float8_e5m2": ("F8_E5M2", ml_dtypes.float8_e5m2),
    "float8_e4m3fnuz": ("F8_E4M3FNUZ", ml_dtypes.float8_e4m3fnuz),
    "float8_e5m2fnuz": ("F8_E5M2FNUZ", ml_dtypes.float8_e5m2fnuz),
    "float8_e8m0fnu": ("F8_E8M0", ml_dtypes.float8_e8m0fnu),
}


def serialize_specs(arrays, dtype_of, metadata=None):
    """Writes {name: contiguous array} with the reference's TensorSpec API."""
    keep, specs = [], {}
    for name, a in arrays.items():
        data = a.tobytes()
        buf = ctypes.create_string_buffer(data, len(data) or 1)
        keep.append(buf)
        specs[name] = TensorSpec(
            dtype=dtype_of[name], shape=list(a.shape),
            data_ptr=ctypes.addressof(buf), data_len=len(data),
        )
    return serialize(specs, metadata)


@pytest.mark.parametrize("metadata", [None, {"format": "pt"}], ids=["no-meta", "one-key"])
@pytest.mark.parametrize("dtype", list(SPEC_DTYPES))
def test_serialize_written_narrow_floats_round_trip(tsm, tmp_path, header_schema, dtype, metadata):
    name, mltype = SPEC_DTYPES[dtype]
    rng = np.random.default_rng(seed(dtype, metadata))
    arrays = {}
    for tname, shape in SHAPES.items():
        vals = rng.standard_normal(int(np.prod(shape, dtype=np.int64))) * 4
        arrays[tname] = np.abs(vals).astype(mltype).reshape(shape) if dtype.endswith("e8m0fnu") \
            else vals.astype(mltype).reshape(shape)
    arrays["mixed.f32"] = rng.standard_normal(5).astype(np.float32)
    dtype_of = {n: dtype for n in SHAPES} | {"mixed.f32": "float32"}
    src = tmp_path / "ref.safetensors"
    src.write_bytes(serialize_specs(arrays, dtype_of, metadata))

    tsm.run("validate", "--schema", src)
    expected = {n: (name, a.shape, a.nbytes) for n, a in arrays.items()}
    expected["mixed.f32"] = ("F32", (5,), 20)
    check_inspect(tsm, src, expected, metadata, header_schema)

    dst = tsm.convert(src, tmp_path / "out.safetensors")
    assert dst.read_bytes() == src.read_bytes()
    back = dict(deserialize(dst.read_bytes()))
    assert sorted(back) == sorted(arrays)
    for tname, a in arrays.items():
        assert back[tname]["shape"] == list(a.shape)
        got = np.frombuffer(bytes(back[tname]["data"]), dtype=a.dtype).reshape(a.shape)
        assert got.tobytes() == a.tobytes(), tname


def test_serialize_written_f4_round_trips(tsm, tmp_path):
    # float4_e2m1fn_x2 stores two values per byte; the header doubles the last dimension.
    rng = np.random.default_rng(4)
    arrays = {"w": rng.integers(0, 256, size=(3, 4), dtype=np.uint8), "e": np.zeros((0, 2), np.uint8)}
    src = tmp_path / "f4.safetensors"
    src.write_bytes(serialize_specs(arrays, {"w": "float4_e2m1fn_x2", "e": "float4_e2m1fn_x2"}))
    tsm.run("validate", src)
    header, _ = read_header(src)
    j = tsm.inspect(src)
    got = {t["name"]: (t["dtype"], t["shape"], t["byte_length"]) for t in j["tensors"]}
    assert got == {
        "w": ("F4", header["w"]["shape"], 12),
        "e": ("F4", header["e"]["shape"], 0),
    }
    assert header["w"]["shape"] == [3, 8]
    dst = tsm.convert(src, tmp_path / "out.safetensors")
    assert dst.read_bytes() == src.read_bytes()


# ---------------------------------------------------------------------------------------------
# (c) casts bit for bit


def f16_ties_and_neighbours(rng, n):
    """f32 values exactly halfway between two adjacent f16 values, and 1 f32 ulp either side."""
    h = rng.integers(0, 0x7bff, size=n, dtype=np.uint16)  # finite, below max: next exists
    lo = h.view(np.float16).astype(np.float64)
    hi = (h + 1).view(np.float16).astype(np.float64)
    mid = ((lo + hi) / 2).astype(np.float32)  # exact: 12 significant bits
    assert np.all(mid.astype(np.float64) == (lo + hi) / 2)
    sign = np.where(rng.integers(0, 2, size=n) == 1, -1, 1).astype(np.float32)
    mid = mid * sign
    return np.concatenate(
        [mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))]
    )


def special_f32():
    big = [65504, 65505, 65519, 65519.996, 65520, 65535, 65536, 1e6, 3.4028235e38]
    tiny = [2.0**-14, 2.0**-15, 2.0**-24, 2.0**-25, 3 * 2.0**-25, 2.0**-26, 1e-8, 1e-45]
    vals = big + tiny + [1.0, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 0.1, 0.7, np.pi]
    vals = vals + [-v for v in vals] + [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan]
    return np.array(vals, dtype=np.float32)


def random_f32(rng):
    scaled = rng.standard_normal(60_000) * 10.0 ** rng.uniform(-12, 8, 60_000)
    subnormal16 = rng.uniform(-(2.0**-14), 2.0**-14, 20_000)
    any_bits = rng.integers(0, 2**32, size=60_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    any_bits = any_bits[~np.isnan(any_bits)]  # NaN payloads are checked apart
    return np.concatenate(
        [
            special_f32(),
            f16_ties_and_neighbours(rng, 20_000),
            scaled.astype(np.float32),
            subnormal16.astype(np.float32),
            any_bits,
        ]
    )


def tensor_bits(path, name):
    """The raw little-endian uint16 patterns of a 16-bit tensor, via the reference reader."""
    t = dict(deserialize(path.read_bytes()))[name]
    return t["dtype"], t["shape"], np.frombuffer(bytes(t["data"]), dtype="<u2")


def assert_bits_equal(got, want, inputs):
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, "\n".join(
        f"input {inputs[i]!r} ({inputs.view(np.uint32 if inputs.dtype == np.float32 else np.uint64)[i]:#x}):"
        f" got {got[i]:#06x}, want {want[i]:#06x}"
        for i in bad[:20]
    ) + f"\n({bad.size} mismatches)"


def convert_one(tsm, tmp_path, x, *opts):
    src = tmp_path / f"in_{x.dtype}.safetensors"
    save_file({"x": x, "ids": np.arange(5, dtype=np.int64)}, str(src), metadata={"m": "1"})
    dst = tsm.convert(src, tmp_path / "out.safetensors", *opts)
    back_ids = load_file(str(dst))["ids"] if "BF16" not in opts else None
    if back_ids is not None:
        assert np.array_equal(back_ids, np.arange(5))
    return dst


def test_f32_to_f16_nearest_matches_numpy(tsm, tmp_path):
    rng = np.random.default_rng(16)
    x = random_f32(rng)
    dst = convert_one(tsm, tmp_path, x, "--dtype", "F16")
    got = load_file(str(dst))["x"]
    assert got.dtype == np.float16 and got.shape == x.shape
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    assert_bits_equal(got.view(np.uint16), want.view(np.uint16), x)
    # Canonical NaNs come out as NumPy's.
    assert got.view(np.uint16)[np.isnan(x)].tolist() == want.view(np.uint16)[np.isnan(x)].tolist()
    # The explicit flag gives the same file.
    again = tsm.convert(dst.with_name("in_float32.safetensors"), tmp_path / "again.safetensors",
                        "--dtype", "f16", "--rounding", "nearest")
    assert again.read_bytes() == dst.read_bytes()


def test_f32_nan_payloads_stay_nan_with_their_sign(tsm, tmp_path):
    bits = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FA00000, 0x7FFFFFFF],
                    dtype=np.uint32)
    x = bits.view(np.float32)
    for dtype in ("F16", "BF16"):
        dst = convert_one(tsm, tmp_path, x, "--dtype", dtype)
        _, _, got = tensor_bits(dst, "x")
        exp_mask = 0x7C00 if dtype == "F16" else 0x7F80
        assert np.all(got & exp_mask == exp_mask) and np.all(got & (0x3FF if dtype == "F16" else 0x7F))
        assert (got >> 15).tolist() == (bits >> 31).tolist()
        assert got[0] == (0x7E00 if dtype == "F16" else 0x7FC0)
        assert got[1] == (0xFE00 if dtype == "F16" else 0xFFC0)


def nan_patterns(dtype, rng):
    """NaN bit patterns of a float dtype: every one for the 16-bit types, a spread of
    signalling and quiet payloads of both signs for F32 and F64."""
    bits, uint = {np.float16: (16, np.uint16), ml_dtypes.bfloat16: (16, np.uint16),
                  np.float32: (32, np.uint32), np.float64: (64, np.uint64)}[dtype]
    if bits == 16:
        x = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(dtype)
        return x[np.isnan(x.astype(np.float32))]
    man = 23 if bits == 32 else 52
    one = uint(1)
    pay = [one, one << uint(man - 1), (one << uint(man - 1)) - one, (one << uint(man)) - one,
           one << uint(man - 2), (one << uint(man - 1)) | one]
    pay += list(rng.integers(1, 2**min(man, 62), size=200, dtype=np.uint64).astype(uint))
    pay += [p | (one << uint(man - 1)) for p in pay[6:106]]  # quiet ones with those payloads
    exp = ((one << uint(bits - 1 - man)) - one) << uint(man)
    sign = one << uint(bits - 1)
    out = np.array([exp | p for p in pay] + [sign | exp | p for p in pay], dtype=uint)
    return out.view(dtype)


@pytest.mark.parametrize("src", ["F16", "BF16", "F32", "F64"])
def test_nans_are_cast_as_numpy_casts_them(tsm, tmp_path, src):
    """Every cast of a NaN gives NumPy's bits (ml_dtypes' for BF16): a signalling NaN stays
    signalling to and from F16, BF16 gets the quiet NaN, the wide types quiet it; the sign
    always kept. F16C instructions and the `half` crate differ from NumPy here."""
    types = {"F16": np.float16, "BF16": ml_dtypes.bfloat16, "F32": np.float32,
             "F64": np.float64}
    uints = {2: np.uint16, 4: np.uint32, 8: np.uint64}
    x = nan_patterns(types[src], np.random.default_rng(7))
    for dst in types:
        if dst == src:
            continue
        out = convert_one(tsm, tmp_path, x, "--dtype", dst)
        t = dict(deserialize(out.read_bytes()))["x"]
        assert t["dtype"] == dst
        width = np.dtype(types[dst]).itemsize
        got = np.frombuffer(bytes(t["data"]), dtype=uints[width])
        with np.errstate(invalid="ignore"):
            want = x.astype(types[dst]).view(uints[width])
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, f"{src} to {dst}: " + ", ".join(
            f"{int(x.view(uints[x.itemsize])[i]):#x} gave {int(got[i]):#x}, numpy {int(want[i]):#x}"
            for i in bad[:8]) + f" ({bad.size} of {x.size})"


def test_f32_to_bf16_nearest_matches_ml_dtypes(tsm, tmp_path):
    rng = np.random.default_rng(17)
    x = random_f32(rng)
    # Ties of BF16 too: low 16 bits exactly 0x8000.
    ties = (rng.integers(0, 2**32, size=20_000, dtype=np.uint64).astype(np.uint32) & 0xFFFF0000) | 0x8000
    ties = ties.view(np.float32)
    x = np.concatenate([x, ties[~np.isnan(ties)]])
    dst = convert_one(tsm, tmp_path, x, "--dtype", "BF16")
    dtype, shape, got = tensor_bits(dst, "x")
    assert dtype == "BF16" and shape == [x.size]
    want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert_bits_equal(got, want, x)


def test_truncation_keeps_top_bits(tsm, tmp_path):
    rng = np.random.default_rng(18)
    x = random_f32(rng)
    b = x.view(np.uint32)
    dst = convert_one(tsm, tmp_path, x, "--dtype", "BF16", "--rounding", "truncate")
    _, _, got = tensor_bits(dst, "x")
    assert_bits_equal(got, (b >> 16).astype(np.uint16), x)

    # F16: drop low mantissa bits, flush |x| < 2^-14 to signed zero, |x| >= 65536 to inf.
    dst = convert_one(tsm, tmp_path, x, "--dtype", "F16", "--rounding", "truncate")
    _, _, got = tensor_bits(dst, "x")
    b = b.astype(np.int64)
    sign, e, m = (b >> 31) << 15, (b >> 23) & 0xFF, b & 0x7FFFFF
    e16 = e - 127 + 15
    want = np.where(e16 >= 31, sign | 0x7C00, np.where(e16 <= 0, sign, sign | (e16 << 10) | (m >> 13)))
    want = np.where(e == 0xFF, sign | 0x7C00 | np.where(m != 0, 0x200, 0), want).astype(np.uint16)
    assert_bits_equal(got, want, x)
    # Spot values independent of the formula above.
    for v, w in [(65535.0, 0x7BFF), (65536.0, 0x7C00), (0.7, 0x3999), (-(2.0**-20), 0x8000)]:
        i = np.nonzero(x.view(np.uint32) == np.float32(v).view(np.uint32))[0]
        if i.size:
            assert got[i[0]] == w, v


def test_f64_to_f16_rounds_once_like_numpy(tsm, tmp_path):
    rng = np.random.default_rng(64)
    # Double-rounding traps: just off an f16 tie by less than half an f32 ulp, so going through
    # f32 first would land on the tie.
    mid = f16_ties_and_neighbours(rng, 20_000)[:20_000].astype(np.float64)
    delta = np.spacing(mid.astype(np.float32)).astype(np.float64) / 4
    traps = np.concatenate([mid + delta, mid - delta])
    with np.errstate(over="ignore", invalid="ignore"):
        via_f32 = traps.astype(np.float32).astype(np.float16)
        assert np.count_nonzero(traps.astype(np.float16) != via_f32) > 10_000  # the traps bite
    x = np.concatenate(
        [
            traps,
            special_f32().astype(np.float64),
            rng.standard_normal(50_000) * 10.0 ** rng.uniform(-12, 8, 50_000),
            rng.uniform(-(2.0**-13), 2.0**-13, 20_000),
            np.array([2.0**-25 + 2.0**-60, -(2.0**-25) - 2.0**-70, 65519.99999999, 1e300, 5e-324]),
        ]
    )
    dst = convert_one(tsm, tmp_path, x, "--dtype", "F16")
    got = load_file(str(dst))["x"]
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    assert_bits_equal(got.view(np.uint16), want.view(np.uint16), x)


# ---------------------------------------------------------------------------------------------
# (d) converted files in safe_open, slices included


def test_converted_files_load_in_safe_open_with_slices(tsm, tmp_path):
    rng = np.random.default_rng(5)
    tensors = {
        "w": rng.standard_normal((6, 8)).astype(np.float32),
        "cube": rng.standard_normal((3, 4, 5)),
        "ids": rng.integers(-1000, 1000, size=(10,), dtype=np.int64),
        "s": np.array(3.5, dtype=np.float32),
        "z": np.zeros((0, 3), np.float32),
    }
    src = tmp_path / "in.safetensors"
    save_file(tensors, str(src), metadata={"format": "np"})
    for opts, float_dtype in [((), None), (("--dtype", "F16"), np.float16),
                              (("--dtype", "F64"), np.float64)]:
        dst = tsm.convert(src, tmp_path / "out.safetensors", *opts)
        want = {k: (v.astype(float_dtype) if float_dtype and v.dtype.kind == "f" else v)
                for k, v in tensors.items()}
        with safe_open(str(dst), framework="np") as f:
            assert sorted(f.keys()) == sorted(tensors)
            assert f.metadata() == {"format": "np"}
            for k, v in want.items():
                got = f.get_tensor(k)
                assert got.dtype == v.dtype and got.shape == v.shape, k
                assert got.tobytes() == v.tobytes(), k
            sl = f.get_slice("w")
            assert sl.get_shape() == [6, 8]
            assert sl.get_dtype() == NUMPY_DTYPES[str(want["w"].dtype)]
            assert np.array_equal(sl[1:4], want["w"][1:4])
            assert np.array_equal(sl[2:5, 3:7], want["w"][2:5, 3:7])
            assert np.array_equal(sl[:, 5:], want["w"][:, 5:])
            assert np.array_equal(f.get_slice("cube")[1:3, 0:2, 4:5], want["cube"][1:3, 0:2, 4:5])
            assert np.array_equal(f.get_slice("ids")[3:9], want["ids"][3:9])
            assert f.get_slice("z").get_shape() == [0, 3]  # the reference cannot slice it


# ---------------------------------------------------------------------------------------------
# (e) several metadata keys


def test_many_metadata_keys_survive_convert(tsm, tmp_path, header_schema):
    metadata = {
        "format": "pt",
        "note": 'quote " backslash \\ tab \t newline \n é 名前',
        "config": json.dumps({"a": [1, 2], "b": {"c": None}}),
        "empty": "",
        "zz.last": "x" * 300,
    }
    tensors = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(3, np.uint8)}
    src = tmp_path / "meta5.safetensors"
    save_file(tensors, str(src), metadata=metadata)
    expected = {n: (NUMPY_DTYPES[str(a.dtype)], a.shape, a.nbytes) for n, a in tensors.items()}
    check_inspect(tsm, src, expected, metadata, header_schema)
    for opts in [(), ("--dtype", "F16")]:
        dst = tsm.convert(src, tmp_path / "out.safetensors", *opts)
        with safe_open(str(dst), framework="np") as f:
            assert f.metadata() == metadata
        header, _ = read_header(dst)
        assert header["__metadata__"] == metadata
        assert list(header["__metadata__"]) == sorted(metadata)  # written sorted
        assert tsm.inspect(dst)["metadata"] == metadata
        back = load_file(str(dst))
        assert np.array_equal(back["a"], tensors["a"])
        assert back["a"].dtype == (np.float16 if opts else np.float32)
    # Same content in another key order: the same length as the reference file.
    assert tsm.convert(src, tmp_path / "out.safetensors").stat().st_size == src.stat().st_size
