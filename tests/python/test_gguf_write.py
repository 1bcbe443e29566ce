"""GGUF writing against the reference: files written by gguf-py's GGUFWriter (gguf 0.19.0)
round-trip through `tensorsmith convert` byte for byte; safetensors converted to GGUF (with
metadata, casts and quantization) come out byte-identical to what GGUFWriter writes for the
same keys, values and tensors; and `gguf.GGUFReader` reads our files back exactly."""

import numpy as np
import pytest
import safetensors.numpy

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import GGUFValueType as V  # noqa: E402
from gguf import quants  # noqa: E402

import tensorsmith  # noqa: E402

from conftest import REPO  # noqa: E402

DATA = REPO / "tests" / "data" / "gguf"


def every_value_writer(path, alignment=None):
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint8("v.u8", 200)
    w.add_int8("v.i8", -100)
    w.add_uint16("v.u16", 60000)
    w.add_int16("v.i16", -30000)
    w.add_uint32("v.u32", 4_000_000_000)
    w.add_int32("v.i32", -2_000_000_000)
    w.add_float32("v.f32", 1.5)
    w.add_uint64("v.u64", 2**63 + 5)
    w.add_int64("v.i64", -(2**62))
    w.add_float64("v.f64", 0.1)
    w.add_bool("v.bool", True)
    w.add_string("v.str", "héllo ✓")
    w.add_array("v.arr_i32", [1, -2, 3])
    w.add_array("v.arr_str", ["a", "", "ccc"])
    w.add_array("v.arr_f32", [0.5, -1.25])
    w.add_array("v.arr_bool", [True, False])
    w.add_key_value("v.arr_u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_array("v.nested", [[1, 2], [3]])
    w.add_array("v.nested_str", [["x", "y"], ["z"]])
    return w


def add_tensors(w, rng):
    w.add_tensor("f32", rng.standard_normal((3, 5)).astype(np.float32))
    w.add_tensor("f16", rng.standard_normal((7,)).astype(np.float16))
    w.add_tensor("i32", np.arange(6, dtype=np.int32).reshape(2, 3))
    w.add_tensor("q8", quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), Q.Q8_0),
                 raw_dtype=Q.Q8_0)
    q4k = rng.integers(0, 256, size=(2, 144), dtype=np.uint8)
    w.add_tensor("q4k", q4k, raw_dtype=Q.Q4_K)
    w.add_tensor("empty", np.zeros((0,), np.float32))


def write(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("alignment", [None, 64, 8])
def test_gguf_writer_files_round_trip_byte_for_byte(tmp_path, tsm, alignment):
    src, out = tmp_path / "ref.gguf", tmp_path / "ours.gguf"
    w = every_value_writer(src, alignment)
    add_tensors(w, np.random.default_rng(0))
    write(w)
    tsm.convert(src, out)
    assert out.read_bytes() == src.read_bytes()
    out2 = tmp_path / "py.gguf"
    tensorsmith.convert(src, out2)
    assert out2.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("name", ["vocab_150k.gguf", "alignment64.gguf", "every_type.gguf",
                                  "no_tensors.gguf", "wi_tiny.gguf"])
def test_stored_gguf_files_round_trip_byte_for_byte(tmp_path, tsm, name):
    out = tmp_path / name
    tsm.convert(DATA / name, out)
    assert out.read_bytes() == (DATA / name).read_bytes()


def read_all(path):
    r = gguf.GGUFReader(str(path))
    kv = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        kv[k] = (f.types, f.contents())
    ts = {t.name: (t.tensor_type, tuple(int(x) for x in t.shape), bytes(t.data.tobytes()))
          for t in r.tensors}
    return kv, ts


def test_set_replaces_and_adds_keys_readable_by_gguf_reader(tmp_path, tsm):
    src, out = tmp_path / "ref.gguf", tmp_path / "ours.gguf"
    w = every_value_writer(src)
    add_tensors(w, np.random.default_rng(1))
    write(w)
    tsm.convert(src, out, "--set", "v.u8=u8:7", "--set", "new.key=str:a=b:c",
                "--set", "new.f=f64:2.5", "--set", "v.bool=bool:false")
    kv0, ts0 = read_all(src)
    kv, ts = read_all(out)
    assert list(kv)[: len(kv0)] == list(kv0)  # replaced in place, added at the end
    assert kv["v.u8"] == ([V.UINT8], 7)
    assert kv["v.bool"] == ([V.BOOL], False)
    assert kv["new.key"] == ([V.STRING], "a=b:c")
    assert kv["new.f"] == ([V.FLOAT64], 2.5)
    for k in kv0:
        if k not in ("v.u8", "v.bool"):
            assert kv[k] == kv0[k], k
    assert ts == ts0


def test_bad_set_and_quantize_are_refused(tmp_path, tsm):
    src = DATA / "wi_tiny.gguf"
    for args, msg in [(["--set", "x=u9:1"], "unknown value type"),
                      (["--set", "x=u8:300"], "not a number"),
                      (["--quantize", "Q7_K"], "IQ4_XS"),
                      (["--set", "general.alignment=u32:3"], "alignment")]:
        p = tsm.run("convert", src, tmp_path / "o.gguf", *args, expect=None)
        assert p.returncode != 0
        assert msg in p.stderr.decode(), p.stderr.decode()
        assert not (tmp_path / "o.gguf").exists()
    p = tsm.run("convert", src, tmp_path / "o.safetensors", "--quantize", "Q8_0", expect=None)
    assert p.returncode != 0 and b".gguf" in p.stderr


def safetensors_input(path, rng):
    tensors = {
        "w": rng.standard_normal((4, 64)).astype(np.float32),
        "h": rng.standard_normal((2, 3, 256)).astype(np.float16),
        "bias": rng.standard_normal((64,)).astype(np.float32),  # 1-D: stays float
        "odd": rng.standard_normal((3, 40)).astype(np.float32),  # rows not whole blocks
        "ids": np.arange(8, dtype=np.int32),
    }
    safetensors.numpy.save_file(tensors, str(path), metadata={"format": "pt", "note": "x y"})
    return tensors


def reference_from(tensors, path, qtype=None, dtype=None):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 2)
    w.add_string("safetensors.metadata.format", "pt")
    w.add_string("safetensors.metadata.note", "x y")
    # Our convert keeps the input's file order (safetensors: by dtype, then name).
    for name in file_order(path.with_suffix(".safetensors")):
        t = tensors[name]
        if t.dtype.kind == "f":
            can = qtype is not None and t.ndim >= 2 and t.shape[-1] % gguf.GGML_QUANT_SIZES[qtype][0] == 0
            if can:
                w.add_tensor(name, quants.quantize(t.astype(np.float32), qtype), raw_dtype=qtype)
                continue
            if dtype is not None:
                t = t.astype(dtype)
        w.add_tensor(name, t)
    write(w)


def file_order(path):
    import json
    import struct

    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return sorted(header, key=lambda k: header[k]["data_offsets"][0])


@pytest.mark.parametrize("qtype", [None, "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "TQ1_0",
                                   "TQ2_0", "MXFP4"])
def test_safetensors_to_gguf_matches_gguf_writer(tmp_path, tsm, qtype):
    st = tmp_path / "m.safetensors"
    tensors = safetensors_input(st, np.random.default_rng(2))
    ref, out = tmp_path / "m.gguf", tmp_path / "ours.gguf"
    reference_from(tensors, ref, getattr(Q, qtype) if qtype else None)
    args = ["--set", "general.architecture=str:llama", "--set", "llama.block_count=u32:2"]
    if qtype:
        args += ["--quantize", qtype]
    tsm.convert(st, out, *args)
    assert out.read_bytes() == ref.read_bytes()
    # And through Python.
    out2 = tmp_path / "py.gguf"
    tensorsmith.convert(st, out2, quantize=qtype,
                        gguf_set=["general.architecture=str:llama", "llama.block_count=u32:2"])
    assert out2.read_bytes() == ref.read_bytes()


def test_cast_to_f16_matches_gguf_writer(tmp_path, tsm):
    st = tmp_path / "m.safetensors"
    tensors = safetensors_input(st, np.random.default_rng(3))
    ref, out = tmp_path / "m.gguf", tmp_path / "ours.gguf"
    reference_from(tensors, ref, dtype=np.float16)
    tsm.convert(st, out, "--dtype", "F16", "--set", "general.architecture=str:llama",
                "--set", "llama.block_count=u32:2")
    assert out.read_bytes() == ref.read_bytes()


def test_gguf_reader_reads_our_quantized_file(tmp_path, tsm):
    st = tmp_path / "m.safetensors"
    tensors = safetensors_input(st, np.random.default_rng(4))
    out = tmp_path / "ours.gguf"
    tsm.convert(st, out, "--quantize", "Q4_0")
    r = gguf.GGUFReader(str(out))
    got = {t.name: t for t in r.tensors}
    assert set(got) == set(tensors)
    assert got["w"].tensor_type == Q.Q4_0
    assert got["h"].tensor_type == Q.Q4_0
    assert got["bias"].tensor_type == Q.F32
    assert got["odd"].tensor_type == Q.F32
    assert got["ids"].tensor_type == Q.I32
    for name, t in tensors.items():
        assert tuple(int(x) for x in reversed(got[name].shape)) == t.shape
    assert np.array_equal(got["bias"].data, tensors["bias"])
    want = quants.quantize(tensors["w"], Q.Q4_0)
    assert got["w"].data.tobytes() == want.tobytes()
    assert r.fields["safetensors.metadata.format"].contents() == "pt"
    # And our reader agrees: dequantized values as gguf-py's.
    with tensorsmith.safe_open(str(out), "np") as f:
        assert np.array_equal(f.get_tensor("w", dequantize=True),
                              quants.dequantize(want, Q.Q4_0))


def test_gguf_to_gguf_dequantizes_with_dtype(tmp_path, tsm):
    src = tmp_path / "ref.gguf"
    w = every_value_writer(src)
    add_tensors(w, np.random.default_rng(5))
    write(w)
    out = tmp_path / "f32.gguf"
    tsm.convert(src, out, "--dtype", "F32")
    r0, r = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(out))
    t0 = {t.name: t for t in r0.tensors}
    for t in r.tensors:
        if t.name in ("q8", "q4k"):
            assert t.tensor_type == Q.F32
            ref = quants.dequantize(t0[t.name].data, t0[t.name].tensor_type)
            assert t.data.tobytes() == ref.tobytes()
        elif t.name != "i32":
            assert t.tensor_type == Q.F32


def test_digest_records_are_not_carried(tmp_path, tsm):
    st, dg, out = tmp_path / "m.safetensors", tmp_path / "d.safetensors", tmp_path / "o.gguf"
    safetensors_input(st, np.random.default_rng(6))
    tsm.convert(st, dg, "--digest", "xxh3")
    tsm.convert(dg, out)
    keys = set(gguf.GGUFReader(str(out)).fields)
    assert "safetensors.metadata.format" in keys
    assert not any("digest" in k for k in keys)


def test_scalars_and_every_plain_dtype_round_trip_through_gguf(tmp_path, tsm):
    st, out, back = tmp_path / "m.safetensors", tmp_path / "o.gguf", tmp_path / "b.safetensors"
    tensors = {"s": np.array(1.5, np.float32), "i8": np.arange(4, dtype=np.int8),
               "i16": np.arange(4, dtype=np.int16), "i64": np.arange(4, dtype=np.int64),
               "f64": np.linspace(0, 1, 6).reshape(2, 3), "m": np.ones((2, 2, 2, 2), np.float16)}
    safetensors.numpy.save_file(tensors, str(st))
    tsm.convert(st, out)
    tsm.convert(out, back)
    got = safetensors.numpy.load_file(str(back))
    for k, v in tensors.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and np.array_equal(got[k], v), k


@pytest.mark.parametrize("zt_version", ["0.1", "1.1", "2"])
def test_ztensor_to_gguf_has_the_same_tensors_as_from_safetensors(tmp_path, tsm, zt_version):
    st, zt = tmp_path / "m.safetensors", tmp_path / "m.zt"
    safetensors_input(st, np.random.default_rng(8))
    args = ["--zt-version", zt_version] + (["--drop-metadata"] if zt_version == "0.1" else [])
    tsm.convert(st, zt, *args)
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    tsm.convert(st, a, "--quantize", "Q5_1")
    tsm.convert(zt, b, "--quantize", "Q5_1")
    _, ta = read_all(a)
    _, tb = read_all(b)
    assert ta == tb
