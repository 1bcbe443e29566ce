"""Temporary AWS credentials from the container endpoint (ECS, EKS Pod Identity) used by the
package in-process, against stand-ins that accept only keys they issued within their lifetime
(tests/python/aws_standins.py): an open file keeps reading after its first keys expired,
because every request signs with keys refreshed before expiry."""

import sys
import time
import pathlib

import boto3
import numpy as np
import pytest

import tensorsmith

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from aws_standins import Standins  # noqa: E402
from local_servers import moto  # noqa: E402


@pytest.fixture(scope="module")
def moto_endpoint():
    yield from moto()


def test_an_open_file_reads_on_after_its_first_keys_expired(moto_endpoint, tmp_path,
                                                            monkeypatch):
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, aws_access_key_id="x",
                      aws_secret_access_key="y", region_name="us-east-1")
    s3.create_bucket(Bucket="models")
    tensors = {f"t{i}": np.full(1 << 20, i, np.float32) for i in range(3)}  # 4 MiB each
    s3.put_object(Bucket="models", Key="m.safetensors", Body=tensorsmith.save(tensors))
    with Standins(moto_endpoint, log=str(tmp_path / "log.jsonl"), lifetime=4,
                  container_token="task-token") as s:
        for k in [k for k in list(__import__("os").environ) if k.startswith("AWS_")]:
            monkeypatch.delenv(k)
        for k, v in s.envs(str(tmp_path))["container"].items():
            monkeypatch.setenv(k, v)
        with tensorsmith.safe_open("s3://models/m.safetensors", framework="np") as f:
            assert np.array_equal(f.get_tensor("t0"), tensors["t0"])
            time.sleep(4.5)  # the first keys have expired
            assert np.array_equal(f.get_tensor("t1"), tensors["t1"])
            assert np.array_equal(f.get_tensor("t2"), tensors["t2"])
        issued = [e["key"] for e in s.issuer.issues("container")]
        used = {k for k, v in s.s3.stats().items() if v["requests"]}
        assert len(issued) >= 2, issued
        assert len(used) >= 2 and used <= set(issued), (used, issued)
        assert not s.issuer.events("s3_refused")
