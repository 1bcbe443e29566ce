"""The reference `safetensors` 0.8 Python surface, checked live against the reference package:
`safe_open` on file objects, `TensorSpec` / `serialize` / `serialize_file` / `deserialize`,
`get_slice`'s rules and error texts, the not-found text, closed files, `SafetensorError`."""

import importlib.util
import io
import mmap

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy

import tensorsmith
import tensorsmith.numpy

TENSORS = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.arange(4, dtype=np.uint8)}


def _read_all(f):
    return {k: np.array(f.get_tensor(k)) for k in f.keys()}


def _same(got, want):
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "m.safetensors"
    tensorsmith.save_file(TENSORS, p, metadata={"k": "v"})
    return p


@pytest.mark.parametrize("mode", ["rb", "r"])
def test_safe_open_on_an_open_file_uses_its_descriptor(path, mode):
    with open(path, mode) as fh:
        with tensorsmith.safe_open(fh, framework="np") as f:
            assert f.metadata() == {"k": "v"}
            _same(_read_all(f), TENSORS)
        with tensorsmith._safe_open_handle(fh, framework="np", device="cpu") as g:
            assert g.offset_keys() == ["a", "b"]
            # Mapped through the descriptor: zero-copy views.
            assert g._f.tensor_bytes("a").zero_copy


def test_safe_open_on_bytesio_reads_through_seek_and_read(path):
    data = path.read_bytes()
    with tensorsmith.safe_open(io.BytesIO(data), framework="np") as f:
        _same(f.get_tensors(), TENSORS)
        np.testing.assert_array_equal(f.get_slice("a")[1:, 1], TENSORS["a"][1:, 1])


class _NoFileno(io.RawIOBase):
    """A file object without a descriptor that counts the bytes it hands out."""

    def __init__(self, data):
        self._b, self.served = io.BytesIO(data), 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, *a):
        return self._b.seek(*a)

    def tell(self):
        return self._b.tell()

    def read(self, n=-1):
        out = self._b.read(n)
        self.served += len(out)
        return out


def test_file_objects_without_descriptor_read_only_what_is_asked(tmp_path):
    big = {"small": np.ones(4, np.float32), "big": np.zeros(1 << 20, np.uint8)}
    data = tensorsmith.save(big)
    fh = _NoFileno(data)
    with tensorsmith.safe_open(fh) as f:
        np.testing.assert_array_equal(f.get_tensor("small"), big["small"])
    assert fh.served < 4096


def test_safe_open_on_an_fsspec_file(path):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    with fs.open("/m.safetensors", "wb") as out:
        out.write(path.read_bytes())
    with fs.open("/m.safetensors", "rb") as fh, tensorsmith._safe_open_handle(fh, "np") as f:
        _same(f.get_tensors(), TENSORS)
    local = fsspec.filesystem("file")
    with local.open(str(path), "rb") as fh, tensorsmith.safe_open(fh) as f:
        _same(f.get_tensors(), TENSORS)


def test_a_broken_file_object_is_an_error_naming_it():
    with pytest.raises(tensorsmith.InvalidFile):
        tensorsmith.safe_open(io.BytesIO(b"\x04\x00\x00\x00\x00\x00\x00\x00{}"))


SPEC_DTYPES = {
    "bool": np.bool_, "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
    "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "float16": np.float16, "float32": np.float32, "float64": np.float64,
    "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu,
    "complex64": np.complex64, "float4_e2m1fn_x2": np.uint8,
}


def _specs(mod, arrays):
    return {k: mod.TensorSpec(dtype=name, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
            for k, (name, a) in arrays.items()}


@pytest.mark.parametrize("dtype", sorted(SPEC_DTYPES))
def test_serialize_is_byte_identical_to_the_reference(dtype, tmp_path):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=32, dtype=np.uint8)
    if dtype == "bool":
        a = a % 2
    arr = np.frombuffer(a.tobytes(), dtype=SPEC_DTYPES[dtype]).reshape(2, -1)
    arrays = {"x": (dtype, arr), "e": (dtype, arr[:0])}
    meta = {"framework": "np"}
    ours = tensorsmith.serialize(_specs(tensorsmith, arrays), metadata=meta)
    ref = safetensors.serialize(_specs(safetensors, arrays), metadata=meta)
    assert ours == ref
    tensorsmith.serialize_file(_specs(tensorsmith, arrays), tmp_path / "o.st", metadata=meta)
    safetensors.serialize_file(_specs(safetensors, arrays), tmp_path / "r.st", metadata=meta)
    assert (tmp_path / "o.st").read_bytes() == (tmp_path / "r.st").read_bytes()
    # The reference's order is its hash map's; ours is the file's.
    ours_d = tensorsmith.deserialize(ref)
    assert dict(ours_d) == dict(safetensors.deserialize(ref))
    assert [n for n, _ in ours_d] == tensorsmith.safe_open(tmp_path / "o.st").offset_keys()


def test_tensorspec_names_shapes_and_refusals():
    a = np.zeros((3, 2), np.uint8)
    for mod in (tensorsmith, safetensors):
        s = mod.TensorSpec(dtype="float4_e2m1fn_x2", shape=(3, 2), data_ptr=a.ctypes.data,
                           data_len=a.nbytes)
        assert (s.dtype, s.shape, s.data_len) == ("F4", [3, 4], 6)
        assert mod.TensorSpec(dtype="bfloat16", shape=[], data_ptr=0, data_len=0).dtype == "BF16"
    with pytest.raises(tensorsmith.SafetensorError, match='Unknown dtype "nonsense"'):
        tensorsmith.TensorSpec(dtype="nonsense", shape=[1], data_ptr=0, data_len=0)
    with pytest.raises(TypeError):
        tensorsmith.TensorSpec("float32", [1], 0, 0)  # keyword-only, as the reference
    with pytest.raises(TypeError):
        tensorsmith.serialize({"t": {"dtype": "float32", "shape": [1], "data_ptr": 0, "data_len": 0}})
    bad = tensorsmith.TensorSpec(dtype="float32", shape=[4], data_ptr=a.ctypes.data, data_len=6)
    with pytest.raises(tensorsmith.SafetensorError, match="^Error while serializing: "):
        tensorsmith.serialize({"t": bad})


def test_deserialize_errors_carry_the_reference_prefix():
    with pytest.raises(tensorsmith.SafetensorError, match="^Error while deserializing: "):
        tensorsmith.deserialize(b"\x01\x00")


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return None


INDEXES = [
    np.s_[:], (), np.s_[:2], np.s_[:, :2], np.s_[0, :2], np.s_[2:, -1], np.s_[2:, -5], [],
    np.s_[..., 1], np.s_[1, ...], np.s_[::3, 1::2], np.s_[9], np.s_[3:3], np.s_[0, 0],
]
BAD = [
    np.s_[2:, -6], [0, 1], np.s_[2:, 20], np.s_[:20], np.s_[:, :20], np.s_[10], np.s_[0, 0, 0],
    np.s_[::0], np.s_[::-1], np.s_[..., ...], np.s_[10:], np.s_["a"], np.s_[:, 5:],
]


@pytest.fixture
def both(tmp_path):
    arr = np.random.default_rng(1).random((10, 5))
    p = tmp_path / "s.safetensors"
    tensorsmith.save_file({"a": arr}, p)
    with tensorsmith.safe_open(p) as f, safetensors.safe_open(p, framework="np") as g:
        yield f.get_slice("a"), g.get_slice("a"), arr


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_slices_match_the_reference(both, index):
    ours, ref, arr = both
    got, want = ours[index], ref[index]
    assert got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("index", BAD, ids=repr)
def test_bad_slices_fail_with_the_reference_text(both, index):
    ours, ref, _ = both
    got, want = _error(lambda: ours[index]), _error(lambda: ref[index])
    assert want is not None and got is not None
    assert got[1] == want[1]
    assert issubclass(got[0], tensorsmith.SafetensorError) and issubclass(got[0], IndexError)


@pytest.mark.parametrize("index", [np.s_[0.0:2.0], np.s_[:, "a":2], np.s_[0:2:1.0]], ids=repr)
def test_bounds_that_are_not_integers_are_the_references_type_error(both, index):
    ours, ref, _ = both
    got, want = _error(lambda: ours[index]), _error(lambda: ref[index])
    assert got == want and want[0] is TypeError


def test_negative_slice_bounds_are_an_extension(both):
    ours, _, arr = both
    np.testing.assert_array_equal(ours[-3:, 1:-1], arr[-3:, 1:-1])
    assert _error(lambda: ours[-11:])[1] == "Invalid index -11 for dimension 0 of size 10"


def test_not_found_and_closed_files_as_the_reference(path, tmp_path):
    missing = str(tmp_path / "nope.safetensors")
    for mod in (tensorsmith, safetensors):
        with pytest.raises(FileNotFoundError) as e:
            mod.safe_open(missing, framework="np")
        assert str(e.value) == f"No such file or directory: {missing}"
    with tensorsmith.safe_open(path) as f:
        s = f.get_slice("a")
    with pytest.raises(tensorsmith.SafetensorError, match="^File is closed$"):
        f.keys()
    np.testing.assert_array_equal(s[:1], TENSORS["a"][:1])  # a slice outlives its file


def test_the_reference_names_are_there():
    assert tensorsmith.SafetensorError is tensorsmith.TensorsmithError
    for name in ("serialize", "serialize_file", "deserialize", "TensorSpec", "safe_open",
                 "_safe_open_handle", "SafetensorError", "__version__"):
        assert hasattr(tensorsmith, name), name
    for name in ("load", "load_file", "save", "save_file"):
        assert hasattr(tensorsmith.numpy, name)


def test_one_file_object_read_from_many_threads():
    from concurrent.futures import ThreadPoolExecutor

    tensors = {f"t{i}": np.full(5000, i, np.float32) for i in range(16)}
    fh = _NoFileno(tensorsmith.save(tensors, metadata={"m": "x"}))
    with tensorsmith.safe_open(fh) as f:
        def one(k):
            assert f.metadata() == {"m": "x"}
            return k, np.array(f.get_tensor(k))

        with ThreadPoolExecutor(8) as ex:
            got = dict(ex.map(one, sorted(tensors) * 4))
    _same(got, tensors)


def _owner(arr):
    """The object whose memory an array views (through arrays and memoryviews)."""
    while isinstance(arr, (np.ndarray, memoryview)):
        arr = arr.obj if isinstance(arr, memoryview) else arr.base
    return arr


def test_numpy_load_never_aliases_the_callers_buffer():
    data = tensorsmith.save(TENSORS)
    buf = bytearray(data)
    got = tensorsmith.numpy.load(buf)
    buf[:] = bytes(len(buf))  # the caller reuses its buffer
    _same(got, TENSORS)
    # Owned and writable, as the reference's arrays (its deserialize copies).
    want = safetensors.numpy.load(data)
    assert all(got[k].flags.writeable and want[k].flags.writeable for k in TENSORS)
    # readonly=True: read-only views of immutable bytes; a mutable buffer copied once.
    views = tensorsmith.numpy.load(data, readonly=True)
    assert _owner(views["a"]) is data and not views["a"].flags.writeable
    buf = bytearray(data)
    ro = tensorsmith.load(memoryview(buf), readonly=True)
    buf[:] = bytes(len(buf))
    _same(ro, TENSORS)


def test_loaded_arrays_are_writable_as_the_references_and_never_reach_the_file(path):
    before = path.read_bytes()
    for mod in (safetensors, tensorsmith):
        sd = mod.numpy.load_file(str(path))
        sd["a"] *= 2
        np.testing.assert_array_equal(sd["a"], TENSORS["a"] * 2)
        with mod.safe_open(str(path), framework="np") as f:
            t = f.get_tensor("a")
            t += 1
            # Each read is independent of earlier ones, as the reference's copies are.
            np.testing.assert_array_equal(f.get_tensor("a"), TENSORS["a"])
            np.testing.assert_array_equal(t, TENSORS["a"] + 1)
    assert path.read_bytes() == before
    # No up-front copy: a view of a private (copy-on-write) map of the file.
    sd = tensorsmith.load_file(path)
    assert isinstance(_owner(sd["a"]), mmap.mmap) and sd["a"].flags.writeable
    assert tensorsmith.load_file(path, backend="pread")["b"].flags.writeable
    # The zero-copy read-only views of the shared map, on request.
    ro = tensorsmith.load_file(path, readonly=True)["a"]
    assert not ro.flags.writeable and getattr(_owner(ro), "zero_copy", False)
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.safe_open(path, framework="pt", readonly=True)
    # File objects: owned, writable arrays by default; views of the map on request.
    with open(path, "rb") as fh, tensorsmith._safe_open_handle(fh) as f:
        assert f.get_tensor("a").flags.writeable
    with open(path, "rb") as fh, tensorsmith._safe_open_handle(fh, readonly=True) as f:
        assert not f.get_tensor("a").flags.writeable


_MODULE = {"flax": "jax", "jax": "jax", "tf": "tensorflow", "tensorflow": "tensorflow",
           "mlx": "mlx"}


@pytest.mark.parametrize("framework", sorted(_MODULE))
def test_other_frameworks_open_as_the_reference(path, framework):
    with tensorsmith.safe_open(path, framework=framework) as f, \
            safetensors.safe_open(str(path), framework=framework) as g:
        assert f.keys() == g.keys() and f.metadata() == g.metadata() == {"k": "v"}
        assert f.get_slice("a").get_shape() == g.get_slice("a").get_shape() == [2, 3]
        if importlib.util.find_spec(_MODULE[framework]) is None:
            # Not installed: the reference's error (the framework's ImportError).
            for get in (lambda h: h.get_tensor("a"), lambda h: h.get_slice("a")[:1]):
                want = _error(lambda: get(g))
                assert want is not None and issubclass(want[0], ImportError)
                assert _error(lambda: get(f)) == want
        else:
            assert type(f.get_tensor("a")) is type(g.get_tensor("a"))


def test_framework_names_refused_and_imported_as_the_reference(path):
    ours = _error(lambda: tensorsmith.safe_open(path, framework="nonsense"))
    want = _error(lambda: safetensors.safe_open(str(path), framework="nonsense"))
    assert ours[1] == want[1] and want[0].__name__ == "SafetensorError"
    assert issubclass(ours[0], tensorsmith.SafetensorError)
    if importlib.util.find_spec("paddle") is None:
        # Paddle is imported on opening, by both.
        ours = _error(lambda: tensorsmith.safe_open(path, framework="paddle"))
        assert ours == _error(lambda: safetensors.safe_open(str(path), framework="paddle"))
        assert issubclass(ours[0], ImportError)


@pytest.mark.parametrize("header", [
    b'{"__metadata__":null,"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
    b'{"__metadata__" : \n null,"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
    b'{"__metadata__":{},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
    b'{"__metadata__" :\t{ },"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
    b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
    b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"note":"__metadata__"}}',
    b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"__metadata__":{"a":"b"}}',
])
def test_metadata_null_empty_and_absent_read_as_the_reference_reads_them(tmp_path, header):
    """`"__metadata__": null` is no metadata (None), `{}` an empty dict, whatever the spaces
    around it; a string "__metadata__" elsewhere is not the key."""
    header += b" " * (-len(header) % 8)
    p = tmp_path / "m.safetensors"
    p.write_bytes(len(header).to_bytes(8, "little") + header + b"\x07")
    with safetensors.safe_open(p, framework="np") as f:
        want = f.metadata()
    for backend in ("mmap", "pread"):
        with tensorsmith.safe_open(p, framework="np", backend=backend) as f:
            assert f.metadata() == want and (f.metadata() is None) == (want is None), backend
            assert f.get_tensor("x").tolist() == [7]
