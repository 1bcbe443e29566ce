"""zTensor (every version) and GGUF through `safe_open`, and inspect / hash / diff / convert
as functions returning plain Python values."""

import hashlib
import json
import pathlib
import subprocess

import ml_dtypes  # noqa: F401
import numpy as np
import pytest
import safetensors.numpy

import tensorsmith

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"


def zt_cases():
    for ver in ("v0.1", "v1.1", "v2"):
        files = json.loads((DATA / "ztensor" / ver / "expected.json").read_text())["files"]
        for name, case in files.items():
            if case.get("valid"):
                yield pytest.param(DATA / "ztensor" / ver / name, case, id=f"{ver}/{name}")


@pytest.mark.parametrize("path,case", list(zt_cases()))
def test_ztensor_vectors_read_as_their_reference_decoded_them(path, case):
    with tensorsmith.safe_open(path) as f:
        assert f.format[0] == "ztensor"
        assert sorted(o["name"] for o in case["objects"]) == f.keys()
        for o in case["objects"]:
            data = o["components"].get("data")
            if o["layout"] != "dense" or data is None or "hex" not in data:
                continue
            assert f.get_shape(o["name"]) == o["shape"]
            try:
                arr = f.get_tensor(o["name"])
            except tensorsmith.Unsupported:
                continue  # packed sub-byte dtypes: no NumPy view
            got = np.ascontiguousarray(arr).reshape(-1).view(np.uint8).tobytes()
            assert got.hex() == data["hex"], o["name"]


def test_sparse_ztensor_objects_come_back_dense(tmp_path):
    sparse = [p for p in (DATA / "ztensor" / "v1.1").glob("*.zt") if "sparse" in p.name or "csr" in p.name]
    if not sparse:
        pytest.skip("no sparse vector")
    with tensorsmith.safe_open(sparse[0]) as f:
        for k in f.keys():
            arr = f.get_tensor(k)
            assert list(arr.shape) == f.get_shape(k)


def test_gguf_tensors_and_metadata():
    exp = json.loads((DATA / "gguf" / "expected.json").read_text())["every_type.gguf"]
    with tensorsmith.safe_open(DATA / "gguf" / "every_type.gguf") as f:
        assert f.format == ("gguf", "3")
        meta = f.metadata()
        for k, v in exp["metadata"].items():
            if isinstance(v, (str, bool, int)):
                assert meta[k] == v, k
        for t in exp["tensors"]:
            arr = f.get_tensor(t["name"])
            got = np.ascontiguousarray(arr).reshape(-1).view(np.uint8).tobytes()
            assert len(got) == t["n_bytes"]
            assert hashlib.sha256(got).hexdigest() == t["sha256"], t["name"]


def test_nonfinite_metadata_floats_are_python_floats(tmp_path):
    """GGUF float metadata NaN/+inf/-inf (alone and in arrays) reach metadata() as floats,
    not the "NaN"/"Infinity" strings of their JSON spelling; so do they after a conversion
    to zTensor v2, whose metadata is typed too."""
    import math

    src = DATA / "gguf" / "nonfinite_meta.gguf"
    out = tmp_path / "m.zt"
    tensorsmith.convert(src, out, zt_version="2")
    for path in (src, out):
        with tensorsmith.safe_open(path) as f:
            meta = f.metadata()
        for k in ("t.nan32", "t.nan64"):
            assert isinstance(meta[k], float) and math.isnan(meta[k]), (path, k, meta[k])
        assert meta["t.inf32"] == math.inf and isinstance(meta["t.inf32"], float), path
        assert meta["t.ninf64"] == -math.inf and isinstance(meta["t.ninf64"], float), path
        assert meta["t.half32"] == 0.5, path
        assert meta["t.arr_f32"] == [0.0, -math.inf, -1.0], path
        nan, inf, x = meta["t.arr_f64"]
        assert math.isnan(nan) and inf == math.inf and x == 1.5, path


def test_inspect_hash_diff_convert_return_plain_python(tmp_path):
    tensors = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(4, np.float32)}
    st = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(tensors, str(st), metadata={"format": "np"})

    info = tensorsmith.inspect(st)
    assert info["schema"] == "tensorsmith.inspect/1"
    assert json.loads(json.dumps(info)) == info  # plain JSON values all the way down
    assert {t["name"] for t in info["tensors"]} == {"w", "b"}

    files = {}
    for ver in ("0.1", "1.1", "2"):
        out = tmp_path / f"m{ver}.zt"
        assert tensorsmith.convert(st, out, zt_version=ver, compress=3, drop_metadata=ver == "0.1") == [str(out)]
        files[ver] = out
        with tensorsmith.safe_open(out) as f:
            np.testing.assert_array_equal(f.get_tensor("w"), tensors["w"])
    h = tensorsmith.hash(st, content=True)
    assert h["structural_id"].startswith("ts1-") and h["content_digest"].startswith("tc1-")
    for ver in ("1.1", "2"):  # same model in another format: same IDs
        assert tensorsmith.hash(files[ver], content=True) == h
    wi = tensorsmith.hash(DATA / "gguf" / "wi_tiny.gguf", compat="weight-inspect")
    assert wi["structural_hash"].startswith("d775e08a")

    d = tensorsmith.diff(st, files["2"], values=True)
    assert d["schema"] == "tensorsmith.diff/1" and d["same"] is True
    half = tmp_path / "h.safetensors"
    tensorsmith.convert(st, half, dtype="F16")
    d = tensorsmith.diff(st, half, values=True)
    assert d["same"] is False
    assert {c["name"] for c in d["tensors"]["changed"]} == {"w", "b"}
    with safetensors.safe_open(str(half), framework="np") as f:
        assert f.get_tensor("w").dtype == np.float16

    (tmp_path / "s").mkdir()
    shards = tensorsmith.convert(st, tmp_path / "s" / "model.safetensors", shard_size=48)
    assert shards[-1].endswith("model.safetensors.index.json") and len(shards) == 3
    with tensorsmith.safe_open(shards[-1]) as f:  # a shard index opens as one model
        np.testing.assert_array_equal(f.get_tensor("b"), tensors["b"])

    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.convert(st, tmp_path / "x.safetensors", compress=3)
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.convert(st, tmp_path / "x.zt", zt_version="3")


def test_convert_append_adds_to_a_v2_file(tmp_path):
    base, more = tmp_path / "base.safetensors", tmp_path / "more.safetensors"
    safetensors.numpy.save_file({"w": np.arange(6, dtype=np.float32)}, str(base))
    safetensors.numpy.save_file({"v": np.ones(3, np.int64)}, str(more))
    zt = tmp_path / "m.zt"
    tensorsmith.convert(base, zt, compress=3)
    assert tensorsmith.convert(more, zt, append=True, compress=3) == [str(zt)]
    with tensorsmith.safe_open(zt) as f:
        assert f.keys() == ["v", "w"]
        np.testing.assert_array_equal(f.get_tensor("w"), np.arange(6, dtype=np.float32))
        np.testing.assert_array_equal(f.get_tensor("v"), np.ones(3, np.int64))
    before = zt.read_bytes()
    with pytest.raises(tensorsmith.TensorsmithError, match="already in the file"):
        tensorsmith.convert(more, zt, append=True)
    assert zt.read_bytes() == before
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.convert(more, tmp_path / "x.safetensors", append=True)


def test_the_cli_and_the_package_agree(tmp_path, tsm):
    st = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({"a": np.zeros((2, 2), np.float64)}, str(st))
    cli = json.loads(subprocess.run([tsm.path, "inspect", "--json", str(st)], capture_output=True,
                                    check=True).stdout)
    assert cli == tensorsmith.inspect(st)
