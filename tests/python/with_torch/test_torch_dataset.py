"""tensorsmith.torch.TensorDataset and TensorIterableDataset with real PyTorch: zero-copy
samples, KV names, real DataLoaders with two workers under fork and spawn (and pin_memory),
the split between ranks and workers, shuffling per seed and epoch, a real two-rank gloo
process group, version pinning."""

import os

import numpy as np
import pyarrow as pa
import pytest
import torch
from torch.utils.data import DataLoader

import tensorsmith
from tensorsmith.torch import TensorDataset, TensorIterableDataset

N = 103  # samples: 4 shards of 32 and a tail of 7


def write_batch(out, n=N, batch_size=32, dtype="F32", mode="error"):
    x = np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3) / 8
    t = pa.table({
        "idx": pa.array([[i] for i in range(n)], pa.list_(pa.int64())),
        "x": pa.array(list(x.reshape(n, 6)), type=pa.list_(pa.float32(), 6)),
    })
    tensorsmith.write_dataset(t, out, batch_size=batch_size, dtype=dtype, mode=mode,
                              shapes='{"x": [2, 3]}', threads=1)
    return x


def write_kv(out):
    names = [f"n{i:03d}" for i in range(40)]
    rows = {"id": names,
            "a": pa.array([[float(i)] * (1 + i % 3) for i in range(40)], pa.list_(pa.float32())),
            "b": pa.array([[i, -i] for i in range(40)], pa.list_(pa.int64()))}
    tensorsmith.write_dataset(pa.table(rows), out, name_col="id", dtype="F32", threads=2)
    return names


@pytest.fixture(scope="module")
def batch_ds(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "batch"
    return out, write_batch(out)


def test_samples_are_copy_on_write_views_of_the_shards(batch_ds):
    out, x = batch_ds
    ds = TensorDataset(out)
    assert len(ds) == N and ds.mode == "batch" and ds.version >= 1
    s = ds[5]
    assert set(s) == {"idx", "x"} and s["x"].dtype == torch.float32
    assert torch.equal(s["x"], torch.from_numpy(x[5])) and int(s["idx"]) == 5
    assert torch.equal(ds[-1]["x"], torch.from_numpy(x[-1]))
    # Two samples of one shard share one storage: the shard's map, not copies.
    assert s["x"].untyped_storage().data_ptr() == ds[6]["x"].untyped_storage().data_ptr()
    before = (out / tensorsmith.Dataset(out).manifest()["shards"][0]["shard_path"]).read_bytes()
    s["x"][0, 0] = 1e9  # copy-on-write: the file is untouched
    assert (out / tensorsmith.Dataset(out).manifest()["shards"][0]["shard_path"]).read_bytes() \
        == before
    with pytest.raises(IndexError):
        ds[N]


def test_slices_are_batches(batch_ds):
    out, x = batch_ds
    ds = TensorDataset(out, columns=["x"])
    within = ds[3:10]
    assert list(within) == ["x"] and within["x"].shape == (7, 2, 3)
    assert within["x"].untyped_storage().data_ptr() == ds[3]["x"].untyped_storage().data_ptr()
    across = ds[30:70]
    assert torch.equal(across["x"], torch.from_numpy(x[30:70]))
    assert torch.equal(ds[0:N:10]["x"], torch.from_numpy(x[0:N:10]))
    with pytest.raises(ValueError, match="columns"):
        TensorDataset(out, columns=["nope"])


@pytest.mark.parametrize("dtype,want", [("BF16", torch.bfloat16), ("F16", torch.float16)])
def test_half_dtypes_come_out_as_torch_dtypes(tmp_path, dtype, want):
    x = write_batch(tmp_path / "d", n=10, batch_size=4, dtype=dtype)
    ds = TensorDataset(tmp_path / "d")
    assert ds[3]["x"].dtype == want
    assert torch.equal(ds[3]["x"], torch.from_numpy(x[3]).to(want))


def test_kv_samples_by_name(tmp_path):
    names = write_kv(tmp_path / "kv")
    ds = TensorDataset(tmp_path / "kv")
    assert ds.mode == "kv" and len(ds) == 40 and ds.names() == names
    s = ds[4]
    assert set(s) == {"a", "b"} and s["a"].tolist() == [4.0, 4.0] and s["b"].tolist() == [4, -4]
    assert torch.equal(ds.sample("n017")["a"], torch.full((3,), 17.0))
    assert list(TensorDataset(tmp_path / "kv", columns="b")[7]) == ["b"]
    with pytest.raises(KeyError, match="n999"):
        ds.sample("n999")


def seen(batches, col="idx"):
    return sorted(int(i) for b in batches for i in b[col].reshape(-1))


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_map_style_with_two_workers(batch_ds, ctx):
    out, x = batch_ds
    ds = TensorDataset(out)
    dl = DataLoader(ds, batch_size=16, num_workers=2, multiprocessing_context=ctx,
                    pin_memory=True)
    batches = list(dl)
    assert seen(batches) == list(range(N))
    for b in batches:
        assert torch.equal(b["x"], torch.from_numpy(x[b["idx"].reshape(-1).long().numpy()]))
    # Samples handed one by one (no collate): copied out of the shard in the worker.
    one = list(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=ctx))
    assert seen(one) == list(range(N))


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
@pytest.mark.parametrize("shuffle", [None, 7])
def test_iterable_split_between_workers(tmp_path, ctx, shuffle):
    # One shard, two workers: split by samples, not by shards.
    x = write_batch(tmp_path / "one", n=50, batch_size=64)
    ds = TensorIterableDataset(tmp_path / "one", shuffle=shuffle, batch_size=8)
    dl = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=ctx,
                    pin_memory=True)
    batches = list(dl)
    assert seen(batches) == list(range(50))
    for b in batches:
        assert torch.equal(b["x"], torch.from_numpy(x[b["idx"].reshape(-1).long().numpy()]))
    runs = [[int(i) for i in b["idx"]] for b in batches]
    # Unshuffled, each worker reads a range in order (the loader interleaves the workers).
    consecutive = all(r == list(range(r[0], r[0] + len(r))) for r in runs)
    assert consecutive == (shuffle is None)


def test_iterable_samples_one_by_one_and_collated_by_the_loader(batch_ds):
    out, _ = batch_ds
    ds = TensorIterableDataset(out)
    assert seen(DataLoader(ds, batch_size=10, num_workers=2)) == list(range(N))
    assert seen(list(ds)) == list(range(N))


def test_shuffle_is_a_permutation_per_seed_and_epoch(batch_ds):
    out, _ = batch_ds
    ds = TensorIterableDataset(out, shuffle=3, batch_size=10)

    def order():
        return [int(i) for b in ds for i in b["idx"]]

    e0 = order()
    assert sorted(e0) == list(range(N)) and e0 != list(range(N))
    assert order() == e0
    ds.set_epoch(1)
    e1 = order()
    assert sorted(e1) == list(range(N)) and e1 != e0
    assert [int(i) for b in TensorIterableDataset(out, shuffle=4, batch_size=10)
            for i in b["idx"]] != e0


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_ranks_and_workers_share_the_samples(batch_ds, world, drop_last):
    out, _ = batch_ds
    ds = TensorIterableDataset(out, shuffle=1, drop_last=drop_last)
    ds.set_epoch(2)
    per_rank = [[int(i) for w in range(3) for i in ds.indices(r, world, w, 3)]
                for r in range(world)]
    sizes = {len(p) for p in per_rank}
    assert len(sizes) == 1
    every = [i for p in per_rank for i in p]
    if drop_last:
        assert len(every) == N // world * world and len(set(every)) == len(every)
    else:
        assert len(every) == -(-N // world) * world and set(every) == set(range(N))
        assert len(every) - len(set(every)) == len(every) - N  # only the padding repeats


def _rank_main(rank, world, init, out, result):
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank,
                                         world_size=world)
    try:
        ds = TensorIterableDataset(out, shuffle=5, batch_size=7)
        ds.set_epoch(1)
        got = [int(i) for b in DataLoader(ds, batch_size=None, num_workers=2)
               for i in b["idx"]]
        n = torch.tensor([len(got)])
        torch.distributed.all_reduce(n, op=torch.distributed.ReduceOp.MAX)
        np.save(f"{result}.{rank}.npy", np.array(got + [int(n)]))
    finally:
        torch.distributed.destroy_process_group()


def test_two_ranks_under_torch_distributed(batch_ds, tmp_path):
    out, _ = batch_ds
    init = f"file://{tmp_path}/pg"
    torch.multiprocessing.spawn(_rank_main, args=(2, init, str(out), str(tmp_path / "r")),
                                nprocs=2, join=True)
    got = [np.load(tmp_path / f"r.{r}.npy").tolist() for r in range(2)]
    a, b = (g[:-1] for g in got)
    assert len(a) == len(b) == 52 and got[0][-1] == 52
    assert set(a) | set(b) == set(range(N)) and len(a) + len(b) - N == 1


def test_workers_read_the_version_opened(tmp_path):
    out = tmp_path / "v"
    write_batch(out, n=40)
    ds = TensorDataset(out)
    it = TensorIterableDataset(out, batch_size=8)
    write_batch(out, n=10, mode="overwrite")
    assert TensorDataset(out).version == ds.version + 1
    for d, bs in ((ds, 8), (it, None)):
        got = list(DataLoader(d, batch_size=bs, num_workers=2, multiprocessing_context="spawn"))
        assert seen(got) == list(range(40))


def test_bad_options_are_value_errors(batch_ds):
    out, _ = batch_ds
    with pytest.raises(ValueError, match="shuffle"):
        TensorIterableDataset(out, shuffle=True)
    with pytest.raises(ValueError, match="batch_size"):
        TensorIterableDataset(out, batch_size=0)
    with pytest.raises(FileNotFoundError):
        TensorDataset(os.path.join(out, "missing"))


def test_index_lists_are_batches_and_other_indices_are_refused(batch_ds):
    out, x = batch_ds
    ds = TensorDataset(out)
    for index in ([1, 50], (1, 50), torch.tensor([1, 50]), np.array([1, 50])):
        got = ds[index]
        assert torch.equal(got["x"], torch.from_numpy(x[[1, 50]])), index
        assert got["idx"].reshape(-1).tolist() == [1, 50]
    for bad in (2.7, True, np.float64(1.0), [1.5, 2], [True, False], torch.tensor(1.0)):
        with pytest.raises(TypeError, match="integers, slices or lists of integers"):
            ds[bad]
    assert int(ds[np.int64(3)]["idx"]) == 3 and int(ds[torch.tensor(3)]["idx"]) == 3


def test_empty_batches_keep_each_columns_dtype_and_shape(batch_ds):
    out, _ = batch_ds
    ds, want = TensorDataset(out), tensorsmith.Dataset(out)[3:3]
    assert {c: a.shape for c, a in want.items()} == {"idx": (0, 1), "x": (0, 2, 3)}
    for empty in (ds[3:3], ds[10:3], ds[5:5:2], ds[[]]):
        assert {c: (str(t.dtype), tuple(t.shape)) for c, t in empty.items()} == {
            c: (f"torch.{a.dtype}", a.shape) for c, a in want.items()}


@pytest.mark.parametrize("n,batch_size,workers", [(12, 4, 2), (13, 4, 2), (50, 8, 3), (3, 4, 2)])
def test_iterable_len_is_the_number_of_batches_the_loader_yields(tmp_path, n, batch_size,
                                                                  workers):
    write_batch(tmp_path / "d", n=n, batch_size=64)
    ds = TensorIterableDataset(tmp_path / "d", batch_size=batch_size)
    dl = DataLoader(ds, batch_size=None, num_workers=workers)
    batches = list(dl)
    assert len(dl) == len(batches) == -(-n // batch_size)
    assert seen(batches) == list(range(n))
    assert sorted(len(b["idx"]) for b in batches)[1:] == [batch_size] * (len(batches) - 1)
