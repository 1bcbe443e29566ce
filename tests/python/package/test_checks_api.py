"""`tensorsmith.validate`, `verify` and the dataset commands from Python, with the CLI's
semantics: a broken file or dataset is a result naming what is wrong (the CLI's exit 1), an
unreadable one raises (exit 2); and the same answers as the CLI gives."""

import os
import time
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tensorsmith


def cli(*args):
    return subprocess.run([os.environ["TENSORSMITH_BIN"], *map(str, args)], capture_output=True)


def test_validate_and_verify(tmp_path):
    good = tmp_path / "m.zt"
    tensorsmith.save_file({"w": np.arange(8, dtype=np.float32)}, tmp_path / "m.safetensors")
    tensorsmith.convert(tmp_path / "m.safetensors", good, digest="xxh3")
    assert tensorsmith.validate(good) == {"valid": True, "tensors": 1, "error": None}
    assert tensorsmith.verify(good) == {"ok": True, "checked": 1, "undigested": 0, "failures": []}
    # One value changed in place: the structure is still valid, the digest fails.
    data = bytearray(good.read_bytes())
    at = bytes(data).index(np.arange(8, dtype=np.float32).tobytes())
    data[at + 4] ^= 0xFF
    bad = tmp_path / "bad.zt"
    bad.write_bytes(bytes(data))
    assert tensorsmith.validate(bad)["valid"]
    v = tensorsmith.verify(bad)
    assert not v["ok"] and len(v["failures"]) == 1 and "'w'" in v["failures"][0], v
    assert cli("verify", bad).returncode == 1
    # Not a tensor file: invalid, with the reason; a missing file raises.
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"hello, not tensors at all\n")
    r = tensorsmith.validate(junk)
    assert r["valid"] is False and "not a tensor file" in r["error"], r
    assert cli("validate", junk).returncode == 1
    with pytest.raises(FileNotFoundError):
        tensorsmith.validate(tmp_path / "missing.safetensors")
    with pytest.raises(FileNotFoundError):
        tensorsmith.verify(tmp_path / "missing.safetensors")


def test_dataset_commands(tmp_path):
    t = pa.table({"id": ["a", "b", "c"],
                  "v": pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], type=pa.list_(pa.float32()))})
    ds = tmp_path / "ds"
    tensorsmith.write_dataset(t, ds, name_col="id", dtype="F32", generate_index=True)
    info = tensorsmith.dataset_info(ds)
    assert info["version"] == 1 and info["manifest"]["total_samples"] == 3
    assert [v["version"] for v in info["versions"]] == [1] and info["retired_shards"] == []
    r = tensorsmith.dataset_verify(ds)
    assert r["ok"] and r["tensors"] == 3 and r["problems"] == [], r
    # An overwrite retires the first shards; clean with no retention removes them.
    tensorsmith.write_dataset(t, ds, name_col="id", dtype="F32", mode="overwrite")
    assert len(tensorsmith.dataset_info(ds)["retired_shards"]) >= 1
    # With a retention, version 1 is kept, and the report says from when a clean takes it.
    kept = tensorsmith.dataset_clean(ds, older_than="1h")
    assert kept["versions"] == [] and kept["kept"][0]["what"].startswith("version 1 "), kept
    assert kept["kept"][0]["from_ms"] > time.time() * 1000 + 3500_000, kept
    removed = tensorsmith.dataset_clean(ds, older_than="0")
    assert removed["versions"] == [1] and removed["shards"], removed
    assert tensorsmith.dataset_info(ds)["retired_shards"] == []
    # Export by name or full key, as the CLI's --key.
    out = tmp_path / "some.parquet"
    assert tensorsmith.dataset_export(ds, out, keys=["b", "c__v"]) == 2
    assert pq.read_table(out).column("tensor_key").to_pylist() == ["b__v", "c__v"]
    assert tensorsmith.dataset_export(ds, out) == 3
    # A shard gone: a problem named, not an exception.
    shard = next(ds.glob("part-*.safetensors"))
    shard.unlink()
    r = tensorsmith.dataset_verify(ds)
    assert not r["ok"] and any(shard.name in p for p in r["problems"]), r
    assert cli("dataset", "verify", ds).returncode == 1
    with pytest.raises(FileNotFoundError):
        tensorsmith.dataset_info(tmp_path / "nope")
    with pytest.raises(ValueError):
        tensorsmith.dataset_clean(ds, older_than="soon")
