"""Integrity: per-tensor digests recorded under `__metadata__["tensorsmith.digest"]` by
`save_file(digest=...)` and `convert --digest`, checked by `tensorsmith verify`, which names
the tensor and byte range that changed; the reference reads such files unchanged."""

import json

import numpy as np
import pytest
import safetensors.numpy

import tensorsmith

TENSORS = {"emb": np.arange(64, dtype=np.float32).reshape(8, 8), "bias": np.ones(5, np.int64)}


def _flip(path, offset_in_data, out):
    data = bytearray(path.read_bytes())
    n = int.from_bytes(data[:8], "little")
    data[8 + n + offset_in_data] ^= 0x40
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("kind", [True, "sha256", "crc32c"])
def test_save_file_digest_round_trip_and_a_flipped_byte(tsm, tmp_path, kind):
    p = tmp_path / "d.safetensors"
    tensorsmith.save_file(TENSORS, p, metadata={"k": "v"}, digest=kind)
    # Tensor bytes as without a digest; only the header gains the record.
    plain = tensorsmith.save(TENSORS, metadata={"k": "v"})
    n = int.from_bytes(p.read_bytes()[:8], "little")
    assert p.read_bytes()[8 + n:] == plain[8 + int.from_bytes(plain[:8], "little"):]
    ref = safetensors.numpy.load_file(p)
    for k, v in TENSORS.items():
        np.testing.assert_array_equal(ref[k], v)
    meta = tensorsmith.safe_open(p).metadata()
    assert meta["k"] == "v"
    record = json.loads(meta["tensorsmith.digest"])
    assert sorted(record) == ["bias", "emb"]
    out = tsm.run("verify", p).stdout.decode()
    assert "2 digests match" in out

    # "bias" (I64, 40 bytes) comes first in the data; flip a byte of "emb" after it.
    with tensorsmith.safe_open(p) as f:
        assert f.offset_keys() == ["bias", "emb"]
    bad = _flip(p, 40 + 17, tmp_path / "bad.safetensors")
    r = tsm.run("verify", bad, expect=1)
    text = r.stdout.decode()
    assert "tensor 'emb'" in text and "bias" not in text.replace("'bias'", "")
    start = 8 + n + 40
    assert f"bytes {start}..{start + 256}" in text


def test_convert_digest_for_safetensors_output(tsm, tmp_path):
    src = tmp_path / "s.safetensors"
    tensorsmith.save_file(TENSORS, src)
    assert "no digest recorded" in tsm.run("verify", src).stdout.decode()
    out = tmp_path / "o.safetensors"
    tsm.run("convert", src, out, "--digest", "xxh3")
    assert "2 digests match" in tsm.run("verify", out).stdout.decode()
    # A cast rewrites the bytes: the record is made anew, never carried over stale.
    cast = tmp_path / "c.safetensors"
    tsm.run("convert", out, cast, "--dtype", "f16")
    assert "no digest recorded" in tsm.run("verify", cast).stdout.decode()
    tsm.run("convert", out, cast, "--dtype", "f16", "--digest", "sha256")
    assert "2 digests match" in tsm.run("verify", cast).stdout.decode()
    # Python's convert takes the same option.
    py = tmp_path / "p.safetensors"
    tensorsmith.convert(src, py, digest="crc32c")
    assert "2 digests match" in tsm.run("verify", py).stdout.decode()


def test_sharded_checkpoints_verify_per_shard(tsm, tmp_path):
    src = tmp_path / "s.safetensors"
    tensorsmith.save_file({f"t{i}": np.full(300, i, np.float32) for i in range(4)}, src)
    ck = tmp_path / "ck"
    ck.mkdir()
    tsm.run("convert", src, ck / "model.safetensors", "--shard-size", "2KB", "--digest", "xxh3")
    assert "4 digests match" in tsm.run("verify", ck).stdout.decode()
    shard = sorted(ck.glob("*.safetensors"))[-1]
    _flip(shard, 3, shard)
    assert "FAILED" in tsm.run("verify", ck, expect=1).stdout.decode()


def test_digest_option_is_checked():
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.save({"a": np.zeros(1)}, digest="md5")


def test_dataset_shards_record_digests_and_verify_checks_the_folder(tsm, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [list(np.arange(4, dtype=np.float32) + i) for i in range(10)]
    t = pa.table({"x": pa.array(rows, pa.list_(pa.float32()))})
    ds = tmp_path / "ds"
    tensorsmith.write_dataset(t, ds, batch_size=4, dtype="F32", digest=True)
    assert "3 digests match" in tsm.run("verify", ds).stdout.decode()
    # The CLI writer (Parquet pages copied straight) records them too.
    pq.write_table(t, tmp_path / "in.parquet", use_dictionary=False, compression="NONE")
    ds2 = tmp_path / "ds2"
    tsm.run("dataset", "write", tmp_path / "in.parquet", ds2, "--batch-size", "4",
            "--dtype", "F32", "--digest", "sha256")
    assert "3 digests match" in tsm.run("verify", ds2).stdout.decode()
    plain = tmp_path / "plain"
    tensorsmith.write_dataset(t, plain, batch_size=4, dtype="F32")
    assert "no digest recorded" in tsm.run("verify", plain).stdout.decode()
    # The manifest pins every shard's digest record.
    m = json.loads((ds / "dataset_manifest.json").read_text())
    assert all(s["content_digest"].startswith("xxh3:") for s in m["shards"])
    assert "content_digest" not in json.dumps(tensorsmith.Dataset(plain).manifest())
    shard = sorted(ds.glob("*.safetensors"))[1]
    _flip(shard, 5, shard)
    text = tsm.run("verify", ds, expect=1).stdout.decode()
    assert shard.name in text and "tensor 'x'" in text
    # The dataset's own checks run too: a missing shard is named.
    sorted(ds2.glob("*.safetensors"))[0].unlink()
    assert "FAILED" in tsm.run("verify", ds2, expect=1).stdout.decode()
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.write_dataset(t, tmp_path / "x", batch_size=4, dtype="F32", digest="md5")


def test_a_shard_swapped_for_another_valid_one_is_caught(tsm, tmp_path):
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"x": pa.array([[float(i)] * 4 for i in range(8)], pa.list_(pa.float32()))})
    ds = tmp_path / "ds"
    tensorsmith.write_dataset(t, ds, batch_size=4, dtype="F32", digest=True)
    a, b = sorted(ds.glob("*.safetensors"))
    a.write_bytes(b.read_bytes())  # same size and shape, valid digests of its own
    text = tsm.run("dataset", "verify", ds, expect=1).stdout.decode()
    assert a.name in text and "manifest says" in text
    assert a.name in tsm.run("verify", ds, expect=1).stdout.decode()
