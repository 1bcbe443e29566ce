"""Refusals that keep wrong data out, seen from Python: a checkpoint folder whose shards come
from different writes, a tensor whose bytes no longer match the digest `convert --digest`
recorded (and `check_digests=False` reading it anyway), an empty `kv_separator`, and a
dataset write into a folder holding a user's shard-named file."""

import os
import shutil

import numpy as np
import pyarrow as pa
import pytest

import tensorsmith

# Six tensors of 0.75 MB: with --shard-size 2MB, two per shard, three shards.
NAMES = [f"layer{i}.w" for i in range(6)]


def _model(path, fill):
    tensorsmith.save_file({n: np.full(196608, fill + i, np.float32) for i, n in enumerate(NAMES)},
                          path)
    return path


def test_a_folder_with_a_shard_of_another_write_is_refused_naming_it(tsm, tmp_path):
    ck = tmp_path / "ckpt"
    ck.mkdir()
    tsm.convert(_model(tmp_path / "a.safetensors", 0.0), ck / "model.safetensors",
                "--shard-size", "2MB")
    shards = sorted(n for n in os.listdir(ck) if n.endswith(".safetensors"))
    assert len(shards) == 3, shards
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(ck / shards[1], old / shards[1])
    # The same layout written again from other values: every shard replaced.
    tsm.convert(_model(tmp_path / "b.safetensors", 100.0), ck / "model.safetensors",
                "--shard-size", "2MB")
    assert sorted(n for n in os.listdir(ck) if n.endswith(".safetensors")) == shards
    with tensorsmith.safe_open(ck) as f:  # consistent: reads
        assert float(f.get_tensor(NAMES[0])[0]) == 100.0
    # One old shard put back, and no index to tell which tensor lives where.
    shutil.copy(old / shards[1], ck / shards[1])
    os.remove(ck / "model.safetensors.index.json")
    with pytest.raises(Exception, match=shards[1].replace(".", r"\.")):
        with tensorsmith.safe_open(ck) as f:
            f.get_tensor(NAMES[2])


def test_a_flipped_bit_under_a_recorded_digest_names_the_tensor(tsm, tmp_path):
    src = tmp_path / "s.safetensors"
    tensors = {"emb": np.arange(64, dtype=np.float32), "bias": np.ones(5, np.int64)}
    tensorsmith.save_file(tensors, src)
    out = tmp_path / "o.safetensors"
    tsm.run("convert", src, out, "--digest", "xxh3")
    with tensorsmith.safe_open(out) as f:
        order = f.offset_keys()
    data = bytearray(out.read_bytes())
    n = int.from_bytes(data[:8], "little")
    # "emb" after "bias" (40 bytes) or first: flip one bit of its element 3.
    emb_at = 40 if order == ["bias", "emb"] else 0
    data[8 + n + emb_at + 3 * 4] ^= 0x01
    out.write_bytes(bytes(data))
    with tensorsmith.safe_open(out) as f:
        np.testing.assert_array_equal(f.get_tensor("bias"), tensors["bias"])  # intact
        with pytest.raises(Exception, match="emb") as e:
            f.get_tensor("emb")
        assert "digest" in str(e.value).lower() or "xxh3" in str(e.value).lower(), e.value
    with tensorsmith.safe_open(out, check_digests=False) as f:
        got = f.get_tensor("emb")
    want = tensors["emb"].copy()
    want.view(np.uint8)[12] ^= 0x01
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_an_empty_kv_separator_is_refused(tmp_path):
    t = pa.table({"id": ["a", "b"], "x": pa.array([[1.0], [2.0]], pa.list_(pa.float32()))})
    with pytest.raises(ValueError, match="kv_separator"):
        tensorsmith.write_dataset(t, tmp_path / "d", name_col="id", dtype="F32", kv_separator="")
    assert not os.path.exists(tmp_path / "d" / "dataset_manifest.json")


def test_a_users_shard_named_file_is_named_and_never_touched(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    mine = d / "part-0.safetensors"
    tensorsmith.save_file({"mine": np.arange(3, dtype=np.float32)}, mine)
    before = mine.read_bytes()
    t = pa.table({"x": pa.array([[float(i)] * 2 for i in range(8)], pa.list_(pa.float32()))})
    with pytest.raises(Exception, match="part-0.safetensors"):
        tensorsmith.write_dataset(t, d, batch_size=4, dtype="F32", mode="error")
    assert mine.read_bytes() == before
    assert not os.path.exists(d / "dataset_manifest.json")
    # Overwrite writes the dataset beside it, and never touches it, however often.
    for _ in range(2):
        m = tensorsmith.write_dataset(t, d, batch_size=4, dtype="F32", mode="overwrite")
        assert m["total_samples"] == 8
        assert "part-0.safetensors" not in {s["shard_path"] for s in m["shards"]}
        assert mine.read_bytes() == before
    assert len(tensorsmith.Dataset(d)) == 8
    with tensorsmith.safe_open(mine) as f:
        assert f.keys() == ["mine"]
