"""tensorsmith.torch against the reference safetensors.torch (0.8.0) with real PyTorch:
zero-copy writable CPU tensors, dtypes without NumPy's extras, devices, owned reads for pread
and file objects, the save refusals and texts, save_model/load_model with tied weights, and
loads onto CUDA (skipped without a GPU)."""

import gc
import io
import os
import threading

import numpy as np
import pytest
import safetensors
import safetensors.torch as ref
import torch

import tensorsmith
import tensorsmith.torch as ours

# Run in .venv-torch (tests/python/requirements-torch.txt): real torch, the reference
# `safetensors`, transformers; no ml_dtypes. CUDA cases run where a GPU is.
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

OPTIONAL = ["uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
            "float8_e5m2fnuz", "float8_e8m0fnu"]


def every_dtype():
    g = torch.Generator().manual_seed(0)
    d = {
        "f64": torch.randn(3, 2, generator=g, dtype=torch.float64),
        "f32": torch.randn(4, 5, generator=g),
        "f16": torch.randn(7, generator=g).half(),
        "bf16": torch.randn(2, 3, 4, generator=g).bfloat16(),
        "i64": torch.arange(-3, 3, dtype=torch.int64),
        "i32": torch.arange(6, dtype=torch.int32).reshape(2, 3),
        "i16": torch.tensor([-5, 7], dtype=torch.int16),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "c64": torch.randn(3, generator=g, dtype=torch.complex64),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
    }
    for name in OPTIONAL:
        if hasattr(torch, name):
            d[name] = torch.tensor([1, 2, 3], dtype=torch.int32).to(getattr(torch, name))
    return d


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
    if a.numel():
        assert torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


@pytest.fixture
def ref_file(tmp_path):
    p = tmp_path / "ref.safetensors"
    ref.save_file(every_dtype(), p, metadata={"format": "pt"})
    return p


def test_bf16_float8_and_unsigned_need_no_ml_dtypes(ref_file, monkeypatch):
    # As if ml_dtypes were not installed (it is not in .venv-torch; other machines may have it).
    monkeypatch.setitem(__import__("sys").modules, "ml_dtypes", None)
    want = ref.load_file(ref_file)
    got = ours.load_file(ref_file)
    for k in ("bf16", "float8_e4m3fn", "uint16"):
        if k in want:
            same(got[k], want[k])


def test_every_dtype_loads_as_the_reference_and_saves_byte_identical(tmp_path, ref_file):
    want = ref.load_file(ref_file)
    got = ours.load_file(ref_file)
    assert list(got) == list(want)
    for k in want:
        same(got[k], want[k])
    out = tmp_path / "ours.safetensors"
    ours.save_file(every_dtype(), out, metadata={"format": "pt"})
    assert out.read_bytes() == ref_file.read_bytes()
    assert ours.save(every_dtype()) == ref.save(every_dtype())
    for k, v in ours.load(ref_file.read_bytes()).items():
        same(v, want[k])


def test_cpu_tensors_are_writable_views_of_a_private_map(tmp_path, ref_file):
    before = ref_file.read_bytes()
    with tensorsmith.safe_open(ref_file, framework="pt") as f:
        a, b = f.get_tensor("f32"), f.get_tensor("i32")
    # One mapping of the file, shared by both, kept alive after the file is closed.
    base = a.untyped_storage().data_ptr() - ref_file.read_bytes().find(a.numpy().tobytes())
    assert b.untyped_storage().data_ptr() - base == before.find(b.numpy().tobytes())
    a[0, 0] = 1234.5
    del b
    gc.collect()
    assert a[0, 0].item() == 1234.5
    assert ref_file.read_bytes() == before  # copy-on-write: the file is untouched
    # A file replaced by a rename while mapped: loaded tensors keep the old bytes.
    c = ours.load_file(ref_file)["f64"]
    old = c.clone()
    tmp = tmp_path / "new.safetensors"
    ours.save_file({"f64": torch.zeros(3, 2, dtype=torch.float64)}, tmp)
    os.replace(tmp, ref_file)
    assert torch.equal(c, old)


def test_slices_are_views_when_contiguous(ref_file):
    with tensorsmith.safe_open(ref_file, framework="pt") as f:
        full = f.get_tensor("f32")
        rows = f.get_slice("f32")[1:3]
        cols = f.get_slice("f32")[:, 1:3]
    assert torch.equal(rows, full[1:3]) and torch.equal(cols, full[:, 1:3])
    assert rows.untyped_storage().data_ptr() == full.untyped_storage().data_ptr()
    assert cols.is_contiguous()


@pytest.mark.parametrize("how", ["pread", "fileobj", "bytesio"])
def test_pread_and_file_objects_give_owned_tensors(ref_file, how):
    want = ref.load_file(ref_file)
    if how == "pread":
        got = ours.load_file(ref_file, backend="pread")
    else:
        fobj = open(ref_file, "rb") if how == "fileobj" else io.BytesIO(ref_file.read_bytes())
        with fobj, tensorsmith.safe_open(fobj, framework="pt") as f:
            got = f.get_tensors()
    for k in want:
        same(got[k], want[k])
    got["f32"][0, 0] = 7.0  # owned and writable


def test_devices_as_the_reference_takes_them(ref_file):
    for dev in ("cpu", torch.device("cpu"), None):
        assert ours.load_file(ref_file, device=dev)["f32"].device.type == "cpu"
    meta = ours.load_file(ref_file, device="meta")["bf16"]
    assert meta.device.type == "meta" and meta.shape == (2, 3, 4)
    for bad in ("foo", -1):
        with pytest.raises(tensorsmith.SafetensorError, match=f"device {bad} is invalid"):
            ours.load_file(ref_file, device=bad)
    if not torch.cuda.is_available():
        for missing in ("cuda", "cuda:0", 0):
            with pytest.raises(RuntimeError):
                ref.load_file(ref_file, device=missing)
            with pytest.raises(RuntimeError):
                ours.load_file(ref_file, device=missing)


def test_other_formats_through_torch(tmp_path):
    src = tmp_path / "a.safetensors"
    ours.save_file({"w": torch.randn(64, 32).bfloat16(), "b": torch.arange(9.0)}, src)
    zt = tmp_path / "a.zt"
    tensorsmith.convert(src, zt, compress=3)
    gg = tmp_path / "a.gguf"
    tensorsmith.convert(src, gg, dtype="F32")
    want = ours.load_file(src)
    for k, v in ours.load_file(zt).items():
        same(v, want[k])
    got = ours.load_file(gg)
    assert torch.equal(got["w"], want["w"].float()) and torch.equal(got["b"], want["b"])


def test_a_truncated_file_under_pread_is_a_clear_error(tmp_path):
    p = tmp_path / "t.safetensors"
    ours.save_file({"a": torch.zeros(1024), "b": torch.zeros(1024)}, p)
    with tensorsmith.safe_open(p, framework="pt", backend="pread") as f:
        os.truncate(p, os.path.getsize(p) - 100)
        f.get_tensor("a")
        with pytest.raises(tensorsmith.SafetensorError, match="t.safetensors"):
            f.get_tensor("b")


def test_save_refusals_match_the_reference():
    base = torch.zeros(4, 4)
    cases = {
        "shared": {"a": base, "b": base[:2]},
        "sparse": {"s": torch.zeros(3, 3).to_sparse()},
        "noncontig": {"t": torch.zeros(3, 4).t()},
        "notdict": [("a", base)],
        "nottensor": {"a": 3},
    }
    for name, tensors in cases.items():
        with pytest.raises(Exception) as want:
            ref.save(tensors)
        with pytest.raises(Exception) as got:
            ours.save(tensors)
        assert isinstance(got.value, type(want.value)), name
        assert str(got.value) == str(want.value), name


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight
        self.norm = torch.nn.LayerNorm(4)


def test_save_model_and_load_model_with_tied_weights(tmp_path):
    torch.manual_seed(0)
    m = Tied()
    a, b = tmp_path / "ref.safetensors", tmp_path / "ours.safetensors"
    ref.save_model(m, a)
    ours.save_model(m, b)
    assert a.read_bytes() == b.read_bytes()
    for loader in (ref.load_model, ours.load_model):
        m2 = Tied()
        assert loader(m2, b) == ref.load_model(Tied(), a)
        assert torch.equal(m2.head.weight, m.emb.weight)
        assert m2.head.weight.data_ptr() == m2.emb.weight.data_ptr()
    sd = {"emb.weight": torch.zeros(10, 4)}
    ours.save_file(sd, tmp_path / "partial.safetensors")
    with pytest.raises(RuntimeError) as want:
        ref.load_model(Tied(), tmp_path / "partial.safetensors")
    with pytest.raises(RuntimeError) as got:
        ours.load_model(Tied(), tmp_path / "partial.safetensors")
    assert str(got.value) == str(want.value)
    assert ours._find_shared_tensors(m.state_dict()) == ref._find_shared_tensors(m.state_dict())
    assert (ours._remove_duplicate_names(m.state_dict())
            == ref._remove_duplicate_names(m.state_dict()))


def test_numpy_framework_still_refuses_devices(ref_file):
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.safe_open(ref_file, framework="np", device="cuda")
    with tensorsmith.safe_open(ref_file, framework="np") as f:
        assert isinstance(f.get_tensor("f32"), np.ndarray)


@cuda
@pytest.mark.parametrize("direct", ["0", "1"])
@pytest.mark.parametrize("device", ["cuda", "cuda:0", 0])
def test_cuda_load_equals_the_cpu_load(tmp_path, ref_file, device, direct, monkeypatch):
    monkeypatch.setenv("TENSORSMITH_DIRECT_IO", direct)  # through the cache, or around it
    want = ref.load_file(ref_file)
    got = ours.load_file(ref_file, device=device)
    for k in want:
        assert got[k].device.type == "cuda"
        same(got[k].cpu(), want[k])


@cuda
def test_cuda_load_of_a_sharded_checkpoint_and_one_tensor_at_a_time(tmp_path):
    g = torch.Generator().manual_seed(1)
    big = {f"t{i}": torch.randn(257, 1031, generator=g) for i in range(12)}
    src = tmp_path / "big.safetensors"
    ours.save_file(big, src)
    ck = tmp_path / "ck"
    ck.mkdir()
    tensorsmith.convert(src, ck / "model.safetensors", shard_size="3MB")
    os.environ["TENSORSMITH_PINNED_MIB"] = "64"  # a ring smaller than the file
    try:
        got = ours.load_file(ck, device="cuda")
    finally:
        del os.environ["TENSORSMITH_PINNED_MIB"]
    for k, v in big.items():
        assert torch.equal(got[k].cpu(), v)
    with tensorsmith.safe_open(src, framework="pt", device="cuda:0") as f:
        assert torch.equal(f.get_tensor("t3").cpu(), big["t3"])
        assert torch.equal(f.get_slice("t4")[2:5].cpu(), big["t4"][2:5])
    errors = []

    def worker():
        try:
            r = ours.load_file(src, device="cuda")
            assert all(torch.equal(r[k].cpu(), v) for k, v in big.items())
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@cuda
def test_cuda_load_of_a_truncated_file_is_a_clear_error(tmp_path):
    p = tmp_path / "t.safetensors"
    ours.save_file({"a": torch.zeros(1 << 20), "b": torch.zeros(1 << 20)}, p)
    with tensorsmith.safe_open(p, framework="pt", device="cuda", backend="pread") as f:
        os.truncate(p, os.path.getsize(p) - 100)
        with pytest.raises(tensorsmith.SafetensorError, match="t.safetensors"):
            f.get_tensors()


def test_lazily_fetched_tensors_are_written_in_turn(tmp_path):
    from tensorsmith import _native

    fetched = []

    def fetch(name, n):
        def f():
            fetched.append(name)
            return np.arange(n, dtype=np.float32).view(np.uint8)
        return f

    p = tmp_path / "lazy.safetensors"
    _native.serialize_file([("a", "F32", [3], fetch("a", 3)), ("b", "F32", [2], fetch("b", 2))],
                           str(p), None)
    assert fetched == ["a", "b"]
    got = ours.load_file(p)
    assert got["a"].tolist() == [0, 1, 2] and got["b"].tolist() == [0, 1]
    with pytest.raises(tensorsmith.SafetensorError, match="not 12"):
        _native.serialize_file([("a", "F32", [3], fetch("a", 2))], str(tmp_path / "x"), None)
    assert not (tmp_path / "x").exists()


@cuda
def test_cuda_tensors_save_as_the_reference(tmp_path):
    d = {k: v.to("cuda") for k, v in every_dtype().items()}
    a, b = tmp_path / "ref.safetensors", tmp_path / "ours.safetensors"
    ref.save_file(d, a)
    ours.save_file(d, b)
    assert a.read_bytes() == b.read_bytes()
    assert ours.save(d) == ref.save(d)


def _served(tmp_path):
    g = torch.Generator().manual_seed(2)
    tensors = {f"w{i}": torch.randn(300, 517, generator=g) for i in range(6)}
    tensors["h"] = torch.randn(64, 64, generator=g).to(torch.bfloat16)
    src = tmp_path / "m.safetensors"
    ours.save_file(tensors, src)
    return tensors, src.read_bytes()


def test_load_file_of_a_url_equals_the_local_load(tmp_path):
    from range_server import serve

    tensors, body = _served(tmp_path)
    with serve({"/m.safetensors": body}) as base:
        # Small parts: the 4 MiB of tensors come in several ranged reads.
        got = ours.load_file(f"{base}/m.safetensors",
                             storage_options={"part_size": "5MiB", "max_concurrency": 3})
    for k, v in tensors.items():
        assert torch.equal(got[k], v)


@cuda
def test_cuda_load_of_a_url_goes_through_the_pipeline(tmp_path):
    from range_server import serve

    tensors, body = _served(tmp_path)
    os.environ["TENSORSMITH_PINNED_MIB"] = "2"  # a ring smaller than the file
    try:
        with serve({"/m.safetensors": body}) as base:
            got = ours.load_file(f"{base}/m.safetensors", device="cuda")
    finally:
        del os.environ["TENSORSMITH_PINNED_MIB"]
    for k, v in tensors.items():
        assert got[k].device.type == "cuda"
        assert torch.equal(got[k].cpu(), v)


# get_slice: torch's indexing for framework="pt" (the reference indexes the mapped tensor),
# the reference's strict rules for "np"; both checked against the reference on one file.
SLICES = [
    np.s_[16001:32002], np.s_[5:12], np.s_[32000:40000, 1], [1, 3], np.s_[None], [],
    np.s_[..., None], np.s_[[0, 2], 1:], np.s_[-3:], np.s_[:, [1, 0]], np.s_[3], np.s_[:2, 0],
    np.s_[32001], np.s_[::-1], np.s_[0, 0, 0], np.s_[1.5], np.s_[::0], np.s_[:4, 5:],
]


def _outcome(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return e


@pytest.fixture(scope="module")
def tp_file(tmp_path_factory):
    # The last rank of a tensor-parallel load: 32,001 rows split in halves of 16,001.
    p = tmp_path_factory.mktemp("tp") / "tp.safetensors"
    ref.save_file({"w": torch.arange(32001 * 2, dtype=torch.int32).reshape(32001, 2)}, p)
    return p


@pytest.mark.parametrize("framework", ["pt", "np"])
@pytest.mark.parametrize("index", SLICES, ids=repr)
def test_get_slice_gives_what_the_reference_gives(tp_file, framework, index):
    with tensorsmith.safe_open(tp_file, framework=framework) as f, \
            safetensors.safe_open(str(tp_file), framework=framework) as g:
        got = _outcome(lambda: f.get_slice("w")[index])
        want = _outcome(lambda: g.get_slice("w")[index])
        if framework == "np" and index == np.s_[-3:]:
            want = g.get_tensor("w")[index]  # negative bounds: our extension of NumPy's rules
    if isinstance(want, Exception):
        assert isinstance(got, Exception), got
        assert str(got) == str(want)
        if type(want).__name__ == "SafetensorError":  # the NumPy rules' errors
            assert isinstance(got, tensorsmith.SafetensorError)
        else:  # torch's own error
            assert type(got) is type(want)
        return
    assert not isinstance(got, Exception), got
    assert type(got) is type(want) and got.dtype == want.dtype
    assert tuple(got.shape) == tuple(want.shape)
    assert np.array_equal(np.asarray(got), np.asarray(want))


def test_saving_a_meta_tensor_fails_as_the_reference(tmp_path):
    data = {"test": torch.zeros((10, 10), device=torch.device("meta"))}
    errors = []
    for mod in (ref, ours):
        out = tmp_path / f"{mod.__name__}.safetensors"
        with pytest.raises(RuntimeError) as e:
            mod.save_file(data, out)
        errors.append((type(e.value), str(e.value)))
        assert not out.exists()
        with pytest.raises(RuntimeError) as e:
            mod.save(data)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1] == errors[2] == errors[3]
    assert "Cannot copy out of meta tensor" in errors[0][1]
