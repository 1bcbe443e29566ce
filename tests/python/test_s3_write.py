"""Python writing to s3:// URLs with `storage_options=`, against moto in server mode on
127.0.0.1 (started by a fixture): save_file and convert to s3:// give the bytes a local write
gives (multipart above the part size), a failed save leaves no object and no open upload,
hf:// and unknown schemes are refused by name, and errors show no secret."""

import os

import numpy as np
import pytest

import local_servers
import tensorsmith
from tensorsmith.errors import TensorsmithError

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

KEY, SECRET = "AKIAPYWRITETEST", "pythonWriteSecretDoNotPrint/xyz"


@pytest.fixture(scope="module")
def moto_endpoint():
    yield from local_servers.moto()


@pytest.fixture(scope="module")
def s3(moto_endpoint):
    c = boto3.client("s3", endpoint_url=moto_endpoint, aws_access_key_id=KEY,
                     aws_secret_access_key=SECRET, region_name="us-east-1")
    c.create_bucket(Bucket="pywrite")
    return c


@pytest.fixture
def opts(moto_endpoint, monkeypatch):
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", "/nonexistent")
    return {"key": KEY, "secret": SECRET, "endpoint_url": moto_endpoint,
            "part_size": "5MiB", "max_concurrency": 3}


def _get(s3, key):
    return s3.get_object(Bucket="pywrite", Key=key)["Body"].read()


def _uploads(s3):
    return s3.list_multipart_uploads(Bucket="pywrite").get("Uploads", [])


def test_save_file_to_s3_equals_local(s3, opts, tmp_path):
    rng = np.random.default_rng(0)
    tensors = {"big": rng.standard_normal((3 << 20) + 5).astype(np.float32),  # 12 MiB
               "small": np.arange(7, dtype=np.int16)}
    local = tmp_path / "m.safetensors"
    tensorsmith.save_file(tensors, str(local), metadata={"k": "v"})
    tensorsmith.save_file(tensors, "s3://pywrite/m.safetensors", metadata={"k": "v"},
                          storage_options=opts)
    assert _get(s3, "m.safetensors") == local.read_bytes()
    assert s3.head_object(Bucket="pywrite", Key="m.safetensors")["ETag"].endswith('-3"')
    got = tensorsmith.load_file("s3a://pywrite/m.safetensors", storage_options=opts)
    np.testing.assert_array_equal(got["big"], tensors["big"])
    # Small: one PutObject.
    tensorsmith.save_file({"a": np.ones(3)}, "s3://pywrite/small.safetensors",
                          storage_options=opts)
    tensorsmith.save_file({"a": np.ones(3)}, str(tmp_path / "small.safetensors"))
    assert _get(s3, "small.safetensors") == (tmp_path / "small.safetensors").read_bytes()
    assert not _uploads(s3)


@pytest.mark.parametrize("ext,kw", [("safetensors", {}), ("gguf", {}),
                                    ("zt", {"zt_version": "2", "digest": "xxh3"})])
def test_convert_to_s3_equals_local(s3, opts, tmp_path, ext, kw):
    src = tmp_path / "in.safetensors"
    tensorsmith.save_file({f"t{i}": np.full(1 << 20, i, dtype=np.float32) for i in range(3)},
                          str(src))
    local = tmp_path / f"out.{ext}"
    tensorsmith.convert(str(src), str(local), **kw)
    url = f"s3://pywrite/conv/out.{ext}"
    assert tensorsmith.convert(str(src), url, storage_options=opts, **kw) == [url]
    assert _get(s3, f"conv/out.{ext}") == local.read_bytes()
    assert not _uploads(s3)


def test_refusals_and_errors(s3, opts, tmp_path):
    t = {"a": np.ones(3)}
    with pytest.raises(TensorsmithError, match="hf:// is read only"):
        tensorsmith.save_file(t, "hf://org/repo/m.safetensors", storage_options=opts)
    with pytest.raises(TensorsmithError, match='unsupported URL scheme "ftp"'):
        tensorsmith.save_file(t, "ftp://b/m.safetensors", storage_options=opts)
    with pytest.raises(TensorsmithError, match="no such bucket 'nobucket'") as e:
        tensorsmith.save_file(t, "s3://nobucket/m.safetensors", storage_options=opts)
    assert "s3://nobucket/m.safetensors" in str(e.value) and SECRET not in str(e.value)
    src = tmp_path / "in.safetensors"
    tensorsmith.save_file(t, str(src))
    with pytest.raises(TensorsmithError, match="sharded checkpoint"):
        tensorsmith.convert(str(src), "s3://pywrite/sh/m.safetensors", shard_size=1000,
                            storage_options=opts)
    assert "Contents" not in s3.list_objects_v2(Bucket="pywrite", Prefix="sh/")


class _Vanishing(dict):
    """Files that a server stops serving after `left` requests (then 404)."""

    def __init__(self, files, left):
        super().__init__(files)
        self.left = left

    def get(self, key, default=None):
        self.left -= 1
        return super().get(key, default) if self.left >= 0 else default


def test_a_convert_that_fails_mid_way_leaves_no_object_and_no_upload(s3, opts, tmp_path):
    from range_server import serve

    src = tmp_path / "in.safetensors"
    tensorsmith.save_file({f"t{i}": np.full(1 << 20, i, dtype=np.float32) for i in range(6)},
                          str(src))
    # The input (24 MiB) read over HTTP from a server that stops answering after 5 requests:
    # by then more than one 5 MiB part of the output is uploaded.
    with serve(_Vanishing({"/in.safetensors": src.read_bytes()}, 5)) as base:
        with pytest.raises(TensorsmithError, match="in.safetensors"):
            tensorsmith.convert(f"{base}/in.safetensors", "s3://pywrite/failed.safetensors",
                                storage_options=opts)
    assert "Contents" not in s3.list_objects_v2(Bucket="pywrite", Prefix="failed")
    assert not _uploads(s3)
