"""`tensorsmith.write_dataset` from pyarrow data and the map-style `tensorsmith.Dataset`."""

import json

import ml_dtypes  # noqa: F401
import numpy as np
import pyarrow as pa
import pyarrow.parquet  # noqa: F401
import pytest
from safetensors.numpy import load_file

import tensorsmith


def table(n=9, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = rng.standard_normal((n, 2, 3))
    return x, y, pa.table({
        "id": [f"r{i}" for i in range(n)],
        "x": pa.array(list(x), type=pa.list_(pa.float32())),
        "y": pa.array([[list(a) for a in s] for s in y], type=pa.list_(pa.list_(pa.float64(), 3))),
    })


@pytest.mark.parametrize("shape", ["table", "batches", "reader", "batch"])
def test_write_dataset_from_every_arrow_shape(tmp_path, shape):
    x, y, t = table()
    data = {"table": t, "batches": t.to_batches(max_chunksize=4),
            "reader": pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=2)),
            "batch": t.combine_chunks().to_batches()[0]}[shape]
    # A reader is a one-pass stream: written by one thread (threads > 1 is refused for it).
    m = tensorsmith.write_dataset(data, tmp_path / "d", batch_size=4, dtype="F64", columns=["x", "y"],
                                  threads=1 if shape == "reader" else 2)
    assert m["total_samples"] == 9 and m["schema"]["y"]["shape"] == [4, 2, 3]
    ds = tensorsmith.Dataset(tmp_path / "d")
    assert len(ds) == 9 and ds.mode == "batch"
    for i in (0, 4, 8, -1):
        s = ds[i]
        np.testing.assert_array_equal(s["x"], x[i].astype(np.float64))
        np.testing.assert_array_equal(s["y"], y[i])
    with pytest.raises(IndexError):
        ds[9]
    assert sum(1 for _ in ds) == 9  # the sequence protocol stops at IndexError
    shards = [load_file(str(tmp_path / "d" / s["shard_path"])) for s in m["shards"]]
    np.testing.assert_array_equal(np.concatenate([s["x"] for s in shards]), x.astype(np.float64))


@pytest.mark.parametrize("rounding", ["nearest", "truncate"])
def test_f16_and_bf16_rounding(tmp_path, rounding):
    x, _, t = table(n=8)
    for dtype, np_t in (("F16", np.float16), ("BF16", ml_dtypes.bfloat16)):
        out = tmp_path / f"{dtype}{rounding}"
        tensorsmith.write_dataset(t, out, batch_size=8, dtype=dtype, columns="x", f16_rounding=rounding)
        got = tensorsmith.Dataset(out)
        values = np.stack([got[i]["x"] for i in range(8)])
        assert values.dtype == np.dtype(np_t)
        if rounding == "nearest":
            assert values.view(np.uint16).tolist() == x.astype(np_t).view(np.uint16).tolist()
        elif dtype == "BF16":  # the connector's truncation: the high 16 bits of the f32
            assert values.view(np.uint16).tolist() == (x.view(np.uint32) >> 16).astype(np.uint16).tolist()
        else:  # truncation never rounds away from zero
            assert np.all(np.abs(values.astype(np.float32)) <= np.abs(x))


def test_kv_dataset_by_index_and_key(tmp_path):
    x, y, t = table()
    tensorsmith.write_dataset(t, tmp_path / "kv", name_col="id", dtype="F32", generate_index=True)
    ds = tensorsmith.Dataset(tmp_path / "kv")
    assert ds.mode == "kv" and len(ds) == 18
    assert ds.keys()[:2] == ["r0__x", "r0__y"]
    assert ds[0]["key"] == "r0__x"
    np.testing.assert_array_equal(ds["r3__y"], y[3].astype(np.float32))
    with pytest.raises(tensorsmith.TensorsmithError, match="nope"):
        ds["nope"]


def test_kv_by_key_opens_only_its_shard(tmp_path):
    """With the index, the mode and a key's shard come from it: the other shards are not
    opened (here: not there at all)."""
    x, y, t = table()
    out = tmp_path / "kv"
    m = tensorsmith.write_dataset(t, out, name_col="id", dtype="F32", generate_index=True, threads=3)
    assert len(m["shards"]) == 3
    index = pa.parquet.read_table(out / "_tensor_index.parquet").to_pylist()
    shard = next(e["file_name"] for e in index if e["tensor_key"] == "r4__y")
    for s in m["shards"]:
        if s["shard_path"] != shard:
            (out / s["shard_path"]).unlink()
    ds = tensorsmith.Dataset(out)
    assert ds.mode == "kv" and len(ds) == 18
    np.testing.assert_array_equal(ds["r4__y"], y[4].astype(np.float32))


def test_kv_stream_last_win(tmp_path):
    """A one-pass reader in KV mode, a key repeated: streamed, the last row wins."""
    x, _, t = table()
    t2 = pa.concat_tables([t, t.slice(2, 1)]).select(["id", "x"])
    reader = pa.RecordBatchReader.from_batches(t2.schema, t2.to_batches(max_chunksize=2))
    m = tensorsmith.write_dataset(reader, tmp_path / "s", name_col="id", dtype="F32",
                                  duplicatesStrategy="lastWin")
    assert m["total_samples"] == 9
    np.testing.assert_array_equal(tensorsmith.Dataset(tmp_path / "s")["r2__x"], x[2])
    reader = pa.RecordBatchReader.from_batches(t2.schema, t2.to_batches(max_chunksize=2))
    with pytest.raises(tensorsmith.TensorsmithError, match=r"duplicate tensor key 'r2__x' \(rows 2 and 9\)"):
        tensorsmith.write_dataset(reader, tmp_path / "f", name_col="id", dtype="F32")


def test_modes_and_errors(tmp_path):
    _, _, t = table()
    out = tmp_path / "m"
    tensorsmith.write_dataset(t, out, batch_size=3, dtype="F32", columns="x")
    with pytest.raises(FileExistsError):
        tensorsmith.write_dataset(t, out, batch_size=3, dtype="F32", columns="x")
    tensorsmith.write_dataset(t, out, mode="append", batch_size=3, dtype="F32", columns="x")
    assert len(tensorsmith.Dataset(out)) == 18
    m = tensorsmith.write_dataset(t.slice(0, 3), out, mode="overwrite", batch_size=3, dtype="F32", columns="x")
    assert m == json.loads((out / "dataset_manifest.json").read_text()) and m["total_samples"] == 3
    with pytest.raises(tensorsmith.OptionError, match="bogus"):
        tensorsmith.write_dataset(t, tmp_path / "o", batch_size=3, dtype="F32", bogus=1)
    with pytest.raises(tensorsmith.OptionError):
        tensorsmith.write_dataset(t, tmp_path / "o", batch_size=3, mode="sometimes")
    with pytest.raises(tensorsmith.InvalidInput):
        tensorsmith.write_dataset({"x": [1]}, tmp_path / "o", batch_size=3)
    bad = pa.table({"x": pa.array([[1.0], None], type=pa.list_(pa.float64()))})
    with pytest.raises(tensorsmith.DatasetFailure, match="row 1"):
        tensorsmith.write_dataset(bad, tmp_path / "o", batch_size=1, dtype="F64")
    assert not (tmp_path / "o" / "dataset_manifest.json").exists()


def test_dataloader_when_torch_is_installed(tmp_path):
    torch = pytest.importorskip("torch")
    _, _, t = table(n=8)
    tensorsmith.write_dataset(t, tmp_path / "d", batch_size=4, dtype="F32", columns="x")
    loader = torch.utils.data.DataLoader(tensorsmith.Dataset(tmp_path / "d"), batch_size=4)
    assert [b["x"].shape for b in loader] == [(4, 4), (4, 4)]


def _zero_copy(arr):
    """Whether `arr` views a tensorsmith buffer over a shard's map (no copy was made)."""
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, memoryview) and getattr(base.obj, "zero_copy", False) or \
        getattr(base, "zero_copy", False)


def _big(tmp_path, n=40, batch=8):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    t = pa.table({"x": pa.array(list(x), type=pa.list_(pa.float32())),
                  "h": pa.array(list(x[:, :2]), type=pa.list_(pa.float32()))})
    tensorsmith.write_dataset(t, tmp_path / "d", batch_size=batch, dtype="BF16", threads=2)
    return x.astype(ml_dtypes.bfloat16), tensorsmith.Dataset(tmp_path / "d")


def test_samples_are_read_only_views_of_the_shard_maps(tmp_path):
    x, ds = _big(tmp_path)
    for i in (0, 7, 8, 39, -1):
        s = ds[i]["x"]
        assert s.dtype == np.dtype(ml_dtypes.bfloat16) and not s.flags.writeable
        assert _zero_copy(s), i
        assert s.view(np.uint16).tolist() == x[i].view(np.uint16).tolist()
    with pytest.raises(ValueError):
        ds[0]["x"][0] = 1


def test_slices_are_views_within_a_shard_and_gathered_across(tmp_path):
    x, ds = _big(tmp_path)
    inside = ds[8:16]["x"]  # shard 1 exactly
    assert inside.shape == (8, 5) and _zero_copy(inside)
    across = ds[5:21]
    assert across["x"].shape == (16, 5) and across["h"].shape == (16, 2)
    assert not _zero_copy(across["x"])  # gathered: a new buffer
    assert across["x"].view(np.uint16).tolist() == x[5:21].view(np.uint16).tolist()
    assert ds[3:3]["x"].shape == (0, 5)
    assert ds[30:100]["x"].shape == (10, 5)
    stepped = ds[1:20:3]["x"]
    assert stepped.view(np.uint16).tolist() == x[1:20:3].view(np.uint16).tolist()


@pytest.mark.parametrize("shuffle", [None, 7])
@pytest.mark.parametrize("size", [1, 8, 12, 40, 64])
def test_batches_in_order_and_shuffled(tmp_path, shuffle, size):
    x, ds = _big(tmp_path)
    got = list(ds.batches(size, shuffle=shuffle))
    order = np.arange(40) if shuffle is None else np.random.default_rng(shuffle).permutation(40)
    assert [len(b["x"]) for b in got] == [min(size, 40 - a) for a in range(0, 40, size)]
    flat = np.concatenate([b["x"] for b in got])
    assert flat.view(np.uint16).tolist() == x[order].view(np.uint16).tolist()
    if shuffle is None and size == 8:
        assert all(_zero_copy(b["x"]) for b in got)  # every batch is one shard
    dropped = list(ds.batches(size, shuffle=shuffle, drop_last=True))
    assert len(dropped) == 40 // size
    with pytest.raises(tensorsmith.OptionError):
        next(ds.batches(0))


def test_index_lists_and_refused_indices(tmp_path):
    x, _, t = table()
    tensorsmith.write_dataset(t, tmp_path / "d", batch_size=3, dtype="F32", columns="x")
    ds = tensorsmith.Dataset(tmp_path / "d")
    for index in ([1, 5], (1, 5), np.array([1, 5])):
        np.testing.assert_array_equal(ds[index]["x"], x[[1, 5]].astype(np.float32))
    assert ds[[]]["x"].shape == (0,) + ds[0]["x"].shape
    for bad in (2.7, True, np.bool_(True), [1.5], "x"):
        with pytest.raises(TypeError):
            ds[bad]
    with pytest.raises(TypeError, match="integers, slices or lists of integers"):
        ds[2.7]


def test_duplicates_strategy_in_snake_case(tmp_path):
    x, _, t = table()
    t2 = pa.concat_tables([t, t.slice(2, 1)]).select(["id", "x"])
    tensorsmith.write_dataset(t2, tmp_path / "s", name_col="id", dtype="F32",
                              duplicates_strategy="lastWin")
    np.testing.assert_array_equal(tensorsmith.Dataset(tmp_path / "s")["r2__x"], x[2])
    with pytest.raises(tensorsmith.OptionError, match="given twice"):
        tensorsmith.write_dataset(t2, tmp_path / "t", name_col="id", dtype="F32",
                                  duplicates_strategy="lastWin", duplicatesStrategy="fail")


@pytest.mark.parametrize("threads", [1, 3])
def test_an_append_comes_after_the_rows_it_appends_to(tmp_path, threads):
    """Rows keep their places: an append's rows follow the dataset's, whatever the uuids its
    shards draw (its task ids repeat the base's, so sorting every shard by path interleaved
    them at random), also after a second append."""
    out = tmp_path / "d"
    rows = lambda a, b: pa.table({"x": pa.array([[float(i)] for i in range(a, b)],
                                                type=pa.list_(pa.float32()))})
    for k, (a, b) in enumerate([(0, 10), (10, 17), (17, 30)]):
        tensorsmith.write_dataset(rows(a, b), out, mode="append" if k else "error", batch_size=4,
                                  threads=threads, dtype="F32", columns="x")
    ds = tensorsmith.Dataset(out)
    got = [float(np.asarray(ds[i]["x"])[0]) for i in range(len(ds))]
    assert got == [float(i) for i in range(30)]
    shards = json.loads((out / "dataset_manifest.json").read_text())["shards"]
    assert [s["samples_count"] for s in shards] == [4, 4, 2, 4, 3, 4, 4, 4, 1]
