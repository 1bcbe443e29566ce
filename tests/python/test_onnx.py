"""ONNX models written by the real `onnx` package (onnx.helper, numpy_helper, save_model with
external data) read by tensorsmith: every dtype the installed onnx supports, values in
raw_data, in typed fields and in external data (one file, and one file per tensor), compared
with `onnx.numpy_helper.to_array` (as the packed little-endian bytes `from_array` writes);
weight-inspect's hash against a Python port of its ONNX algorithm written here, and against the
golden value of ../shared/data/onnx/mnist.onnx; convert to safetensors against to_array."""

import hashlib
import json
import pathlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorsmith  # noqa: E402

MNIST = pathlib.Path(__file__).resolve().parents[3] / "shared/data/onnx/mnist.onnx"
MNIST_HASH = "c83276f54ed2dc74b6c52f8d19da167f5f85f59660a0295e9898f4f0848f9bf8"


def codes():
    """Every data_type code the installed onnx can make arrays of (string aside)."""
    out = []
    for name, code in TensorProto.DataType.items():
        if code in (TensorProto.UNDEFINED, TensorProto.STRING):
            continue
        try:
            numpy_helper.from_array(np.zeros(2, dtype=helper.tensor_dtype_to_np_dtype(code)))
        except Exception:  # this onnx cannot: not tested here
            continue
        out.append((name, code))
    return out


CODES = codes()


def values(code, shape, rng):
    """Random values of `code`'s NumPy dtype (ml_dtypes for the small floats and ints)."""
    dt = helper.tensor_dtype_to_np_dtype(code)
    n = int(np.prod(shape))
    if code == TensorProto.BOOL:
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if np.dtype(dt).kind in "iu" and np.dtype(dt).itemsize >= 1 and dt.name in np.sctypeDict:
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, endpoint=True, dtype=dt).reshape(shape)
    if np.dtype(dt).kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt).reshape(shape)
    if code in (TensorProto.UINT4, TensorProto.UINT2):
        hi = 15 if code == TensorProto.UINT4 else 3
        return rng.integers(0, hi, n, endpoint=True).astype(dt).reshape(shape)
    if code in (TensorProto.INT4, TensorProto.INT2):
        lo = -8 if code == TensorProto.INT4 else -2
        return rng.integers(lo, -lo - 1, n, endpoint=True).astype(dt).reshape(shape)
    if code == TensorProto.FLOAT8E8M0:
        return (2.0 ** rng.integers(-4, 4, n)).astype(dt).reshape(shape)
    return (rng.standard_normal(n) * 2).astype(np.float32).astype(dt).reshape(shape)


def typed_tensor(name, code, arr):
    """The tensor with its values in the typed field onnx.helper picks (raw=False)."""
    return helper.make_tensor(name, code, arr.shape, arr.flatten())


def build(tmp, how, seed=0):
    """A model of one initializer per dtype (odd element counts, so sub-byte types pad),
    saved with values `how`: raw, typed, external (one file) or external-per-tensor."""
    rng = np.random.default_rng(seed)
    inits, arrays = [], {}
    for name, code in CODES:
        arr = values(code, (3, 5), rng)
        tname = f"t_{name.lower()}"
        t = typed_tensor(tname, code, arr) if how == "typed" else numpy_helper.from_array(arr, tname)
        inits.append(t)
        arrays[tname] = t
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y], inits)
    model = helper.make_model(graph, producer_name="tensorsmith-test")
    path = tmp / "m.onnx"
    if how.startswith("external"):
        onnx.save_model(model, str(path), save_as_external_data=True,
                        all_tensors_to_one_file=(how == "external"), location="m.onnx.data",
                        size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    loaded = onnx.load(str(path))  # external data loaded: the oracle's values
    return path, {t.name: t for t in loaded.graph.initializer}


def expected_bytes(t):
    """to_array's values as the packed little-endian bytes raw_data holds."""
    return numpy_helper.from_array(numpy_helper.to_array(t)).raw_data


@pytest.mark.parametrize("how", ["raw", "typed", "external", "external-per-tensor"])
def test_every_dtype_reads_as_numpy_helper_does(tmp_path, how):
    path, ref = build(tmp_path, how)
    f = tensorsmith.safe_open(str(path))
    assert sorted(f.keys()) == sorted(ref)
    for name, t in ref.items():
        got = bytes(f._f.tensor_bytes(name))
        assert got == expected_bytes(t), (how, name)
        assert f.get_shape(name) == list(t.dims)
        arr = numpy_helper.to_array(t)
        if f.get_dtype(name) not in ("I4", "U4", "I2", "U2", "F4", "F6_E2M3", "F6_E3M2"):
            np.testing.assert_array_equal(f.get_tensor(name).view(np.uint8),
                                          arr.view(np.uint8), err_msg=name)


def test_external_data_hashes_like_its_inline_twin(tmp_path, tsm):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, _ = build(tmp_path / "a", "raw")
    b, _ = build(tmp_path / "b", "external")
    assert ours(tsm, a) == ours(tsm, b)


# --- weight-inspect's ONNX hash, ported from its algorithm (FORMAT-NOTES §7)

WI_NAMES = {1: ("float32", 4), 2: ("uint8", 1), 3: ("int8", 1), 4: ("uint16", 2), 5: ("int16", 2),
            6: ("int32", 4), 7: ("int64", 8), 8: ("string", 1), 9: ("bool", 1),
            10: ("float16", 2), 11: ("float64", 8), 12: ("uint32", 4), 13: ("uint64", 8),
            14: ("complex64", 8), 15: ("complex128", 16), 16: ("bfloat16", 2)}


def rust_debug_list(items):
    """Rust's `{:?}` of a Vec<String> (ASCII names: quotes and backslashes escaped)."""
    esc = [s.replace("\\", "\\\\").replace('"', '\\"') for s in items]
    return "[" + ", ".join(f'"{s}"' for s in esc) + "]"


def inner_str(s):
    out = '"'
    for c in s:
        if c == '"':
            out += '\\"'
        elif c == "\\":
            out += "\\\\"
        elif c == "\n":
            out += "\\n"
        elif c == "\r":
            out += "\\r"
        elif c == "\t":
            out += "\\t"
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out += f"\\u{ord(c):04x}"
        else:
            out += c
    return out + '"'


def wi_onnx_hash(model):
    meta = {}
    if model.HasField("ir_version"):
        meta["ir_version"] = str(model.ir_version)
    for k in ("producer_name", "producer_version", "domain"):
        if model.HasField(k):
            meta[k] = inner_str(getattr(model, k))
    if model.HasField("model_version"):
        meta["model_version"] = str(model.model_version)
    if len(model.opset_import):
        vs = [str(o.version) for o in model.opset_import if o.HasField("version")]
        meta["opset_imports"] = inner_str(rust_debug_list(vs))
    g = model.graph
    if len(g.node):
        ops = sorted(n.op_type for n in g.node if n.HasField("op_type"))
        meta["node_types"] = inner_str(rust_debug_list(ops))
        meta["node_count"] = str(len(g.node))
    if len(g.input):
        meta["input_names"] = inner_str(rust_debug_list([i.name for i in g.input if i.HasField("name")]))
    if len(g.output):
        meta["output_names"] = inner_str(rust_debug_list([o.name for o in g.output if o.HasField("name")]))
    tensors = {}
    for t in g.initializer:
        name, size = WI_NAMES.get(t.data_type, (f"unknown_{t.data_type}", 1))
        n = 1
        for d in t.dims:
            n *= d
        length = n * size if n * size < 2**64 else 0
        tensors[t.name] = {"name": t.name, "dtype": name, "shape": list(t.dims), "byte_length": length}

    def obj(d):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + v
                              for k, v in sorted(d.items(), key=lambda kv: kv[0].encode())) + "}"

    meta_json = obj({k: json.dumps(v, ensure_ascii=False) for k, v in meta.items()})
    tens_json = obj({k: json.dumps(v, ensure_ascii=False, separators=(",", ":"))
                     for k, v in tensors.items()})
    doc = (f'{{"format":"onnx","gguf_version":{model.ir_version if model.HasField("ir_version") else 0},'
           f'"metadata":{meta_json},"tensors":{tens_json}}}')
    return hashlib.sha256(doc.encode()).hexdigest()


def ours(tsm, path):
    out = tsm.run("hash", "--compat", "weight-inspect", path).stdout.decode()
    return out.split()[0]


def test_port_gives_mnists_golden_hash_and_so_do_we(tsm):
    if not MNIST.exists():
        pytest.skip(f"{MNIST} is not here")
    assert wi_onnx_hash(onnx.load(str(MNIST))) == MNIST_HASH
    assert ours(tsm, MNIST) == MNIST_HASH


@pytest.mark.parametrize("how", ["raw", "typed", "external"])
def test_hash_matches_the_port(tmp_path, tsm, how):
    path, _ = build(tmp_path, how)
    assert ours(tsm, path) == wi_onnx_hash(onnx.load(str(path), load_external_data=False))


def test_hash_keeps_field_presence_and_opset_order(tmp_path, tsm):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]),
                               helper.make_node("Abs", ["y"], ["z"])], "g", [x],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.x", 1)])
    model.domain = ""
    model.producer_version = 'we"ird\\'
    p = tmp_path / "m.onnx"
    onnx.save_model(model, str(p))
    assert ours(tsm, p) == wi_onnx_hash(onnx.load(str(p)))


# --- commands on ONNX

def test_convert_to_safetensors_gives_to_array(tmp_path, tsm):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    path, ref = build(tmp_path, "external")
    out = tmp_path / "out.safetensors"
    p = tsm.run("convert", path, out, expect=None)
    # uint4/uint2 (and complex128) have no safetensors dtype: refused by name, nothing written.
    names = {n for n, _ in CODES}
    if names & {"UINT4", "UINT2", "COMPLEX128"}:
        assert p.returncode == 2, p.stderr
        assert b"t_" in p.stderr and not out.exists()
    keep = [n for n, c in CODES if n in ("FLOAT", "FLOAT16", "BFLOAT16", "INT8", "INT64",
                                          "DOUBLE", "BOOL", "UINT8", "INT32")]
    model = helper.make_model(helper.make_graph(
        [], "g", [], [], [ref[f"t_{n.lower()}"] for n in keep]))
    p2 = tmp_path / "sub.onnx"
    onnx.save_model(model, str(p2), save_as_external_data=True, location="sub.data",
                    size_threshold=0)
    tsm.run("convert", p2, out)
    got = safetensors_numpy.load_file(str(out))
    for n in keep:
        want = numpy_helper.to_array(ref[f"t_{n.lower()}"])
        np.testing.assert_array_equal(got[f"t_{n.lower()}"].view(np.uint8), want.view(np.uint8))


def test_inspect_validate_verify_diff(tmp_path, tsm):
    a, _ = build(tmp_path, "raw")
    (tmp_path / "b").mkdir()
    b, _ = build(tmp_path / "b", "external")
    j = tsm.inspect(b)
    assert j["format"] == "onnx" and j["tensor_count"] == len(CODES)
    tsm.run("validate", b)
    tsm.run("verify", b)
    tsm.run("diff", "--values", a, b)
    if not MNIST.exists():  # ../shared is beside the checkout in CI, not in any clone
        return
    st = tmp_path / "c.safetensors"
    tsm.run("convert", MNIST, st)
    # Across formats the metadata differs in type (typed facts vs strings); tensors agree.
    out = tsm.run("diff", "--values", MNIST, st, expect=1).stdout
    assert b"0 added, 0 removed, 0 changed tensors" in out
    assert b"0 tensors with different values" in out


def test_hostile_onnx_files_exit_2_naming_the_file(tmp_path, tsm):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(bytes(range(256)) * 3)
    p = tsm.run("inspect", junk, expect=2)
    assert b"junk.onnx" in p.stderr and b"ONNX" in p.stderr
    assert b"header length" not in p.stderr
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(MNIST.read_bytes()[:5000] if MNIST.exists() else b"\x08\x03\x3a\xff\xff")
    p = tsm.run("inspect", cut, expect=2)
    assert b"cut.onnx" in p.stderr


def test_verify_checks_a_recorded_checksum(tmp_path, tsm):
    path, _ = build(tmp_path, "external")
    m = onnx.load(str(path), load_external_data=False)
    data = (tmp_path / "m.onnx.data").read_bytes()
    good = hashlib.sha1(data).hexdigest()
    for t in m.graph.initializer:
        t.external_data.add(key="checksum", value=good)
    onnx.save_model(m, str(path))
    tsm.run("verify", path)
    for t in m.graph.initializer[:1]:
        for e in t.external_data:
            if e.key == "checksum":
                e.value = "0" * 40
    onnx.save_model(m, str(path))
    p = tsm.run("verify", path, expect=None)
    assert p.returncode != 0 and b"sha1" in (p.stdout + p.stderr)


def test_python_inspect_and_convert(tmp_path):
    path, ref = build(tmp_path, "typed")
    info = tensorsmith.inspect(str(path))
    assert info["format"] == "onnx"
    assert {t["name"] for t in info["tensors"]} == set(ref)
    if not MNIST.exists():
        return
    out = tmp_path / "mnist.zt"
    tensorsmith.convert(str(MNIST), str(out))
    with tensorsmith.safe_open(str(out)) as z, tensorsmith.safe_open(str(MNIST)) as o:
        for k in o.keys():
            np.testing.assert_array_equal(z.get_tensor(k), o.get_tensor(k))


# --- writing ONNX through a template

def test_template_write_passes_the_checker_and_loads_back(tmp_path, tsm):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(3)
    big = rng.standard_normal((64, 32)).astype(np.float32)  # 8 KiB: external
    small = rng.standard_normal((4,)).astype(np.float32)  # 16 B: inline
    half = rng.standard_normal((300,)).astype(np.float16)
    inits = [numpy_helper.from_array(np.zeros_like(a), n)
             for n, a in (("big", big), ("small", small), ("half", half))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])
    g = helper.make_graph([helper.make_node("MatMul", ["x", "big"], ["y"])], "g", [x], [y], inits)
    template = tmp_path / "t.onnx"
    onnx.save_model(helper.make_model(g), str(template))
    src = tmp_path / "in.safetensors"
    safetensors_numpy.save_file({"big": big, "small": small, "half": half}, str(src))
    out = tmp_path / "model.onnx"
    tsm.run("convert", src, out, "--onnx-template", template)
    onnx.checker.check_model(str(out))
    m = onnx.load(str(out))
    got = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n, a in (("big", big), ("small", small), ("half", half)):
        np.testing.assert_array_equal(got[n], a)
    loc = {t.name: t.data_location for t in onnx.load(str(out), load_external_data=False).graph.initializer}
    assert loc == {"big": TensorProto.EXTERNAL, "small": TensorProto.DEFAULT,
                   "half": TensorProto.DEFAULT}
    offsets = [int(e.value) for t in onnx.load(str(out), load_external_data=False).graph.initializer
               for e in t.external_data if e.key == "offset"]
    assert all(o % 4096 == 0 for o in offsets)
    # --external-data: every tensor in model.onnx.data.
    out2 = tmp_path / "all.onnx"
    tsm.run("convert", src, out2, "--onnx-template", template, "--external-data")
    onnx.checker.check_model(str(out2))
    m2 = onnx.load(str(out2), load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in m2.graph.initializer)
    got2 = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out2)).graph.initializer}
    np.testing.assert_array_equal(got2["half"], half)
    # Our reader reads it back, and the weight-inspect hash is the template's.
    assert ours(tsm, out) == ours(tsm, template)


def test_template_refusals_write_nothing(tmp_path, tsm):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    a = np.ones((2, 3), dtype=np.float32)
    g = helper.make_graph([], "g", [], [], [numpy_helper.from_array(a, "w")])
    template = tmp_path / "t.onnx"
    onnx.save_model(helper.make_model(g), str(template))
    out = tmp_path / "o.onnx"
    cases = {
        "missing": {"v": a},
        "shape": {"w": np.ones((3, 2), dtype=np.float32)},
        "dtype": {"w": a.astype(np.float16)},
        "extra": {"w": a, "extra": a},
    }
    for why, tensors in cases.items():
        src = tmp_path / f"{why}.safetensors"
        safetensors_numpy.save_file(tensors, str(src))
        p = tsm.run("convert", src, out, "--onnx-template", template, expect=2)
        assert not out.exists() and not (tmp_path / "o.onnx.data").exists(), why
        assert p.stderr, why
    # A cast where --dtype asks for the template's dtype; extras left out with --allow-extra.
    src = tmp_path / "ok.safetensors"
    safetensors_numpy.save_file({"w": a.astype(np.float16), "extra": a}, str(src))
    tsm.run("convert", src, out, "--onnx-template", template, "--dtype", "F32", "--allow-extra")
    np.testing.assert_array_equal(numpy_helper.to_array(onnx.load(str(out)).graph.initializer[0]), a)


def test_sparse_initializers_densify_as_onnx_does(tmp_path, tsm):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    vals = numpy_helper.from_array(np.array([1.5, -2.0, 3.0], dtype=np.float32), "sp")
    lin = numpy_helper.from_array(np.array([1, 5, 11], dtype=np.int64), "sp_i")
    coo = numpy_helper.from_array(np.array([[0, 1], [1, 1], [2, 3]], dtype=np.int64), "sp2_i")
    vals2 = numpy_helper.from_array(np.array([4.0, 5.0, 6.0], dtype=np.float32), "sp2")
    sparse = [helper.make_sparse_tensor(vals, lin, [3, 4]),
              helper.make_sparse_tensor(vals2, coo, [3, 4])]
    g = helper.make_graph([], "g", [], [], [], sparse_initializer=sparse)
    p = tmp_path / "s.onnx"
    onnx.save_model(helper.make_model(g), str(p))
    out = tmp_path / "d.safetensors"
    tsm.run("convert", p, out, expect=2)
    tsm.run("convert", p, out, "--densify")
    got = safetensors_numpy.load_file(str(out))
    for sp in sparse:
        want = numpy_helper.to_array(numpy_helper.from_array(
            _dense_of(sp), sp.values.name))
        np.testing.assert_array_equal(got[sp.values.name], want)


def _dense_of(sp):
    """A sparse initializer made dense by onnx.proto's rule (indices linear, or one row of
    coordinates per value), written here with NumPy: onnx has no densify of its own."""
    from onnx.numpy_helper import to_array
    values, idx = to_array(sp.values), to_array(sp.indices)
    dense = np.zeros(int(np.prod(sp.dims)), dtype=values.dtype)
    if idx.ndim == 2:
        idx = np.ravel_multi_index(idx.T, tuple(sp.dims))
    dense[idx] = values
    return dense.reshape(tuple(sp.dims))


def test_python_convert_writes_onnx_through_a_template(tmp_path):
    a = np.arange(600, dtype=np.float32).reshape(20, 30)
    g = helper.make_graph([], "g", [], [], [numpy_helper.from_array(np.zeros_like(a), "w")])
    template = tmp_path / "t.onnx"
    onnx.save_model(helper.make_model(g), str(template))
    src = tmp_path / "in.safetensors"
    tensorsmith.save_file({"w": a}, str(src))
    out = tmp_path / "o.onnx"
    files = tensorsmith.convert(src, out, onnx_template=template)
    assert sorted(files) == sorted([str(out), str(out) + ".data"])
    onnx.checker.check_model(str(out))
    np.testing.assert_array_equal(numpy_helper.to_array(onnx.load(str(out)).graph.initializer[0]), a)
