"""`tensorsmith` against the reference `safetensors` package: every vector the reference wrote,
read through both; the reference's own usage patterns with the module swapped; byte-identical
writes; zero-copy views; errors as TensorsmithError subclasses."""

import hashlib
import json
import pathlib

import ml_dtypes  # noqa: F401  (bfloat16 and the 8-bit floats for NumPy)
import numpy as np
import pytest
import safetensors
import safetensors.numpy

import tensorsmith
import tensorsmith.numpy
from tensorsmith import _native

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
ST = DATA / "safetensors"
CASES = json.loads((ST / "expected.json").read_text())["cases"]
VALID = [c for c in CASES if "tensors" in c]
INVALID = [c for c in CASES if "tensors" not in c]


def header_offsets(path):
    data = pathlib.Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    h = json.loads(data[8:8 + n])
    return {k: tuple(v["data_offsets"]) for k, v in h.items() if k != "__metadata__"}


def raw(arr: np.ndarray) -> bytes:
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8).tobytes()


@pytest.mark.parametrize("case", VALID, ids=lambda c: c["file"])
@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_every_reference_vector_reads_the_same(case, backend):
    with tensorsmith.safe_open(ST / case["file"], framework="np", backend=backend) as f:
        assert f.keys() == sorted(t["name"] for t in case["tensors"])
        assert f.metadata() == case["metadata"]
        for t in case["tensors"]:
            assert f.get_dtype(t["name"]) == t["dtype"]
            assert f.get_shape(t["name"]) == t["shape"]
            if t["dtype"] == "F4":  # two values per byte: NumPy has no view
                with pytest.raises(tensorsmith.Unsupported, match="F4"):
                    f.get_tensor(t["name"])
                continue
            arr = f.get_tensor(t["name"])
            assert list(arr.shape) == t["shape"]
            assert raw(arr).hex() == t["hex"], t["name"]
    with safetensors.safe_open(ST / case["file"], framework="np") as ref, \
            tensorsmith.safe_open(ST / case["file"]) as ours:
        assert ref.keys() == ours.keys()
        # Data order; tensors at the same offsets (empty ones) come in the reference's hash
        # order, so compare the offsets.
        offsets = header_offsets(ST / case["file"])
        assert [offsets[k] for k in ref.offset_keys()] == [offsets[k] for k in ours.offset_keys()]
        assert sorted(ref.offset_keys()) == sorted(ours.offset_keys())
        assert ref.metadata() == ours.metadata()


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c["file"])
def test_files_the_reference_refuses_are_refused(case):
    with pytest.raises(Exception):
        safetensors.safe_open(ST / case["file"], framework="np")
    with pytest.raises(tensorsmith.TensorsmithError) as e:
        tensorsmith.safe_open(ST / case["file"])
    assert case["file"] in str(e.value)
    assert isinstance(e.value, (tensorsmith.InvalidFile, ValueError))


def usage(mod, tmp: pathlib.Path):
    """The reference's documented usage, written once, run with either module."""
    tensors = {
        "embedding": np.arange(512 * 16, dtype=np.float32).reshape(512, 16),
        "attention": np.eye(8, dtype=np.float64),
        "ids": np.arange(-5, 5, dtype=np.int64),
        "mask": np.array([True, False, True]),
        "half": np.linspace(-2, 2, 7).astype(np.float16),
        "scalar": np.array(3.5, dtype=np.float32),
        "big_endian": np.arange(4, dtype=">i4"),
    }
    path = tmp / f"{mod.__name__}.safetensors"
    mod.numpy.save_file(tensors, str(path), metadata={"format": "np"})
    out = {"file": path.read_bytes(), "bytes": mod.numpy.save(tensors, metadata={"format": "np"})}
    got = {}
    with mod.safe_open(str(path), framework="np", device="cpu") as f:
        out["metadata"] = f.metadata()
        for k in f.keys():
            got[k] = np.array(f.get_tensor(k))
        s = f.get_slice("embedding")
        vocab, hidden = s.get_shape()
        out["slices"] = [s[:, :hidden // 2], s[3], s[10:20:3, 1], s[..., 0], s[500:]]
        out["slice_dtype"] = s.get_dtype()
    out["tensors"] = got
    out["load_file"] = mod.numpy.load_file(str(path))
    out["load"] = mod.numpy.load(out["bytes"])
    return out


def test_reference_usage_works_unchanged_with_tensorsmith(tmp_path):
    ref = usage(safetensors, tmp_path)
    ours = usage(tensorsmith, tmp_path)
    # Byte-identical output (one metadata key: the reference's order is then fixed).
    assert ours["file"] == ref["file"]
    assert ours["bytes"] == ref["bytes"]
    assert ours["metadata"] == ref["metadata"] == {"format": "np"}
    assert ours["slice_dtype"] == ref["slice_dtype"] == "F32"
    for a, b in zip(ours["slices"], ref["slices"]):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype and a.shape == b.shape
    for which in ("tensors", "load_file", "load"):
        assert ours[which].keys() == ref[which].keys()
        for k in ref[which]:
            a, b = ours[which][k], ref[which][k]
            assert a.dtype == b.dtype and a.shape == b.shape, (which, k)
            assert raw(a) == raw(b), (which, k)


def test_load_of_bytes_covers_dtypes_the_reference_numpy_module_lacks():
    t = {"bf": np.linspace(-2, 2, 7).astype(ml_dtypes.bfloat16),
         "f8": np.linspace(-2, 2, 7).astype(ml_dtypes.float8_e4m3fn)}
    back = tensorsmith.load(tensorsmith.save(t))
    for k, v in t.items():
        assert back[k].dtype == v.dtype and raw(back[k]) == raw(v)
    assert dict(safetensors.deserialize(tensorsmith.save(t)))["bf"]["dtype"] == "BF16"


def test_files_we_write_the_reference_reads(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {f"t{i}": rng.standard_normal((i + 1, 3)).astype(dt)
               for i, dt in enumerate([np.float32, np.float64, np.float16, np.int8, np.uint64])}
    tensorsmith.save_file(tensors, tmp_path / "o.safetensors", metadata={"a": "1", "b": "2"})
    back = safetensors.numpy.load_file(str(tmp_path / "o.safetensors"))
    for k, v in tensors.items():
        np.testing.assert_array_equal(back[k], v)
    with safetensors.safe_open(str(tmp_path / "o.safetensors"), framework="np") as f:
        assert f.metadata() == {"a": "1", "b": "2"}


def base_chain(arr):
    while isinstance(arr, (np.ndarray, memoryview)):
        arr = arr.obj if isinstance(arr, memoryview) else arr.base
    return arr


def test_tensors_are_zero_copy_views_of_the_map(tmp_path):
    big = np.arange(16 << 20, dtype=np.float32)  # 64 MiB
    safetensors.numpy.save_file({"big": big, "small": np.ones(3, np.int8)}, str(tmp_path / "b.safetensors"))
    with tensorsmith.safe_open(tmp_path / "b.safetensors", readonly=True) as f:
        arr = f.get_tensor("big")
    owner = base_chain(arr)
    assert isinstance(owner, _native.Bytes) and owner.zero_copy
    assert len(owner) == big.nbytes
    assert not arr.flags.writeable and not arr.flags.owndata
    with pytest.raises(ValueError):
        arr[0] = 1
    # Still valid after the file object is gone: the view keeps the map alive.
    del f
    np.testing.assert_array_equal(arr[-3:], big[-3:])
    # Two reads of the same tensor share the same mapped bytes.
    with tensorsmith.safe_open(tmp_path / "b.safetensors", readonly=True) as f:
        a, b = f.get_tensor("big"), f.get_tensor("big")
        assert np.shares_memory(a, a) and a.ctypes.data == b.ctypes.data


def test_errors_name_the_file_and_derive_from_python_builtins(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        tensorsmith.safe_open(tmp_path / "missing.safetensors")
    assert isinstance(e.value, tensorsmith.TensorsmithError)
    assert "missing.safetensors" in str(e.value)
    p = tmp_path / "x.safetensors"
    tensorsmith.save_file({"a": np.zeros(2, np.float32)}, p)
    with tensorsmith.safe_open(p) as f:
        with pytest.raises(KeyError) as e:
            f.get_tensor("nope")
        assert isinstance(e.value, tensorsmith.TensorNotFound)
        assert "nope" in str(e.value) and "x.safetensors" in str(e.value)
        with pytest.raises(IndexError):
            f.get_slice("a")[5]
        # Negative indices and steps (the reference refuses negatives).
        np.testing.assert_array_equal(f.get_slice("a")[-1:], np.zeros(1, np.float32))
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.safe_open(p, framework="nonsense")
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.safe_open(p, backend="mystery")
    p.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(tensorsmith.InvalidFile, match="truncated|past the end|x.safetensors"):
        tensorsmith.safe_open(p)
    with pytest.raises(tensorsmith.InvalidInput):
        tensorsmith.save_file({1: np.zeros(2)}, tmp_path / "y.safetensors")
    with pytest.raises(tensorsmith.Unsupported):
        tensorsmith.save_file({"o": np.array(["a"], dtype=object)}, tmp_path / "y.safetensors")
    assert not (tmp_path / "y.safetensors").exists()


def test_pytorch_when_installed(tmp_path):
    torch = pytest.importorskip("torch")
    import tensorsmith.torch as tt

    t = {"w": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), "b": torch.ones(2)}
    tt.save_file(t, tmp_path / "t.safetensors")
    back = tt.load_file(tmp_path / "t.safetensors")
    assert torch.equal(back["w"], t["w"]) and back["w"].dtype == torch.bfloat16
    with tensorsmith.safe_open(tmp_path / "t.safetensors", framework="pt") as f:
        assert torch.equal(f.get_slice("w")[:, 1], t["w"][:, 1])


def test_content_digest_matches_a_python_recomputation_of_the_bytes(tmp_path):
    # hash(content=True) covers the tensor bytes: changing one byte changes it.
    p = tmp_path / "h.safetensors"
    tensorsmith.save_file({"a": np.arange(10, dtype=np.int32)}, p)
    h1 = tensorsmith.hash(p, content=True)
    data = bytearray(p.read_bytes())
    data[-1] ^= 1
    p.write_bytes(bytes(data))
    h2 = tensorsmith.hash(p, content=True)
    assert h1["structural_id"] == h2["structural_id"]
    assert h1["content_digest"] != h2["content_digest"]
    assert hashlib.sha256(bytes(data)).hexdigest() not in h2["content_digest"]
