"""What TensorDataset and TensorIterableDataset do with a dataset on an object store, whatever
the store: the cases test_torch_store.py (S3 on moto) and test_torch_az_gs.py (Azure on
Azurite, GCS on fake-gcs-server) run against their own servers. Each case takes the dataset's
URL and storage options, the same dataset written to a local folder, and its shard sizes: the
dataset is `table()` in shards of PER_SHARD samples (7: 6 of 16 and a tail of 4)."""

import ast
import multiprocessing as mp

import numpy as np
import pyarrow as pa
import torch

import tensorsmith
from tensorsmith._training import shard_cache as _shard_cache
from tensorsmith.torch import TensorDataset, TensorIterableDataset

N, PER_SHARD, WIDTH = 100, 16, 32
# The block shuffle reads through: a window of 20 samples, batches of 8.
BLOCK = dict(shuffle=3, batch_size=8, shuffle_kind="block", shuffle_block_size=20)


def table():
    """Sample i: `idx` [i], `x` WIDTH float32 values of its own."""
    x = np.arange(N * WIDTH, dtype=np.float32).reshape(N, WIDTH)
    return pa.table({"idx": pa.array([[i] for i in range(N)], pa.list_(pa.int64())),
                     "x": pa.array(list(x), pa.list_(pa.float32(), WIDTH))})


def ids(item):
    return [int(v) for v in item["idx"].reshape(-1)]


def reads_as_the_local_one(url, opts, local, sizes, cache):
    """Samples, slices and the block-shuffled batches of the dataset at `url` (shards cached
    in `cache`) equal the local read's; returns the batches' ids, in order."""
    a = TensorDataset(local)
    b = TensorDataset(url, storage_options=opts, cache_dir=cache)
    assert len(b) == len(a) == N and b.version == a.version
    for i in (0, 15, 16, 57, N - 1):
        assert torch.equal(b[i]["x"], a[i]["x"]) and ids(b[i]) == [i]
    assert torch.equal(b[10:40]["x"], a[10:40]["x"])
    # Samples of a cached shard are views of its map, as locally.
    assert b[17]["x"].untyped_storage().data_ptr() == b[18]["x"].untyped_storage().data_ptr()
    want = [(ids(t), t["x"]) for t in TensorIterableDataset(local, **BLOCK)]
    got = [(ids(t), t["x"]) for t in TensorIterableDataset(url, storage_options=opts,
                                                            cache_dir=cache, **BLOCK)]
    assert [i for i, _ in got] == [i for i, _ in want]
    assert all(torch.equal(p, q) for (_, p), (_, q) in zip(got, want))
    assert sorted(i for item, _ in got for i in item) == list(range(N))
    assert _shard_cache.cache_bytes(cache) == sum(sizes)  # every shard once, the local bytes
    return [i for i, _ in want]


def measured(monkeypatch, limit_seen):
    """Records the cache's bytes on disk after every allocation and every fetch."""
    alloc, fetch = _shard_cache.ShardCache._allocate, _shard_cache.ShardCache._fetch

    def allocate(self, *a, **k):
        part = alloc(self, *a, **k)
        limit_seen.append(_shard_cache.cache_bytes(self.folder))
        return part

    def fetched(self, *a, **k):
        fetch(self, *a, **k)
        limit_seen.append(_shard_cache.cache_bytes(self.folder))

    monkeypatch.setattr(_shard_cache.ShardCache, "_allocate", allocate)
    monkeypatch.setattr(_shard_cache.ShardCache, "_fetch", fetched)


def keeps_to_the_cache_limit(url, opts, local, sizes, cache, monkeypatch, kind):
    """Read in order or block-shuffled with room for two shards and a half: the cache's bytes
    never above the limit (measured at every fetch), every shard fetched once, the shards
    used longest ago evicted first."""
    limit = max(sizes) * 5 // 2
    seen = []
    measured(monkeypatch, seen)
    kw = (dict(shuffle=7, shuffle_kind="block", shuffle_block_size=8) if kind == "block"
          else {})
    ds = TensorIterableDataset(url, storage_options=opts, cache_dir=cache, cache_limit=limit,
                               batch_size=4, read_ahead=1, **kw)
    want = [ids(t) for t in TensorIterableDataset(local, batch_size=4, **kw)]
    assert [ids(t) for t in ds] == want
    c = ds._s.cache
    assert seen and max(seen) <= limit
    assert len(c.fetched) == len(sizes)  # every shard once: read in shard order
    assert sorted(ds._s.keys.index(k) for k, _ in c.fetched) == list(range(len(sizes)))
    used = list(dict.fromkeys(i // PER_SHARD for item in want for i in item))  # first use
    evicted = [ds._s.keys.index(k) for k, _ in c.evicted]
    assert evicted == used[:len(evicted)]  # the shards used longest ago first
    assert len(evicted) >= len(sizes) - 3  # 2.5 shards (the last is small) stay
    if kind == "order":
        assert used == list(range(len(sizes)))


def epoch_in_a_process(url, opts, cache, rank, world, out):
    """Rank `rank` of `world` reads its share of a block-shuffled epoch; writes its ids and
    the keys of the shards it fetched to `out`."""
    ds = TensorIterableDataset(url, storage_options=opts, cache_dir=cache, shuffle=5,
                               shuffle_kind="block", shuffle_block_size=24, batch_size=4,
                               rank=rank, world_size=world)
    got = [ids(t) for t in ds]
    with open(out, "w") as f:
        f.write(repr((got, [k for k, _ in ds._s.cache.fetched])))


def two_processes_fetch_each_shard_once(url, opts, local, sizes, tmp_path):
    """Two ranks in processes of their own sharing one cache folder: each shard fetched
    once, by one of them, each rank's share the local read's; a restart (a new process)
    fetches nothing and reads every sample."""
    ctx = mp.get_context("spawn")
    cache = str(tmp_path / "cache")
    procs = [ctx.Process(target=epoch_in_a_process,
                         args=(url, opts, cache, r, 2, str(tmp_path / f"r{r}")))
             for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    results = [ast.literal_eval((tmp_path / f"r{r}").read_text()) for r in range(2)]
    fetched = [k for _, keys in results for k in keys]
    assert len(fetched) == len(set(fetched)) == len(sizes)  # each shard once, by one of them
    read = sorted(i for got, _ in results for item in got for i in item)
    assert read == list(range(N))
    for r in range(2):
        alone = TensorIterableDataset(local, shuffle=5, shuffle_kind="block",
                                      shuffle_block_size=24, batch_size=4, rank=r,
                                      world_size=2)
        assert results[r][0] == [ids(t) for t in alone]
    # A restart (new processes) reuses the cache: nothing fetched, the same samples.
    epoch_in_a_process(url, opts, cache, 0, 1, str(tmp_path / "again"))
    got, keys = ast.literal_eval((tmp_path / "again").read_text())
    assert keys == [] and sorted(i for item in got for i in item) == list(range(N))


def a_kv_dataset(url, opts, cache):
    """A KV dataset written to `url` reads by name and iterates, through the cache."""
    names = [f"n{i:02d}" for i in range(12)]
    t = pa.table({"id": names, "b": pa.array([[i, -i] for i in range(12)], pa.list_(pa.int64()))})
    tensorsmith.write_dataset(t, url, storage_options=opts, name_col="id", dtype="F32",
                              threads=1)
    ds = TensorDataset(url, storage_options=opts, cache_dir=cache)
    assert ds.mode == "kv" and ds.names() == names
    assert ds.sample("n07")["b"].tolist() == [7.0, -7.0]
    it = TensorIterableDataset(url, storage_options=opts, cache_dir=cache, shuffle=1,
                               shuffle_kind="block", shuffle_block_size=4)
    assert sorted(int(s["b"][0]) for s in it) == list(range(12))
