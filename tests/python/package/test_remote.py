"""`safe_open(url)`: files served over HTTP on 127.0.0.1 (with Range support, as real
servers and hubs have) read exactly as the same files on disk, for safetensors, every zTensor
version and GGUF; only the header travels until a tensor is asked for."""

import pathlib

import numpy as np
import pytest

import tensorsmith
from range_server import RangeHandler, serve

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
FILES = [
    DATA / "safetensors" / "mixed_meta3.safetensors",
    DATA / "ztensor" / "v0.1" / "zstd_float32.zt",
    DATA / "ztensor" / "v0.1" / "big_endian.zt",
    DATA / "ztensor" / "v1.1" / "digest_sha256_zstd.zt",
    DATA / "ztensor" / "v2" / "all_dtypes.zt",
    DATA / "gguf" / "every_type.gguf",
]


@pytest.fixture(scope="module")
def server():
    with serve({f"/{p.name}": p.read_bytes() for p in FILES}) as url:
        yield url


def _read_all(target):
    with tensorsmith.safe_open(target, framework="np") as f:
        meta = f.metadata()
        fmt = f.format
        tensors = {k: (f.get_dtype(k), f.get_shape(k), f.get_tensor(k)) for k in f.keys()}
    return fmt, meta, tensors


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_url_reads_as_the_file(server, path):
    here = _read_all(path)
    there = _read_all(f"{server}/{path.name}")
    assert there[:2] == here[:2]
    assert there[2].keys() == here[2].keys()
    for k, (dtype, shape, arr) in here[2].items():
        d, s, a = there[2][k]
        assert (d, s) == (dtype, shape), k
        assert a.dtype == arr.dtype and a.shape == arr.shape, k
        assert np.asarray(a).tobytes() == np.asarray(arr).tobytes(), k


def test_only_the_header_travels_until_a_tensor_is_read(server):
    big = np.arange(1 << 20, dtype=np.float32)  # 4 MiB
    data = tensorsmith.save({"big": big, "small": np.ones(4, np.float32)})
    RangeHandler.files["/big.safetensors"] = data
    RangeHandler.sent.pop("/big.safetensors", None)
    with tensorsmith.safe_open(f"{server}/big.safetensors", framework="np") as f:
        assert sorted(f.keys()) == ["big", "small"]
        assert RangeHandler.sent["/big.safetensors"] < 300 << 10
        assert np.array_equal(f.get_tensor("big"), big)
    assert RangeHandler.sent["/big.safetensors"] >= big.nbytes


def test_a_missing_url_raises_naming_it(server):
    url = f"{server}/nope.safetensors"
    with pytest.raises(tensorsmith.TensorsmithError) as e:
        tensorsmith.safe_open(url, framework="np")
    assert url in str(e.value) and "404" in str(e.value)
