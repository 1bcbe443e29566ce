"""TensorDataset and TensorIterableDataset over a dataset on S3 (moto in server mode on
127.0.0.1, written there by the CLI): the values of the local read of the same dataset,
through the node's shard cache (`cache_dir`, `cache_limit`): samples views of the cached
files, each shard fetched once per node (two processes sharing the cache), the limit never
exceeded (measured at every fetch), eviction oldest-first, a restart reusing the cache, a
corrupted cached shard fetched again, a cache smaller than a shard refused by name. The cases
every store shares are _store_cases.py's (test_torch_az_gs.py runs them on Azure and GCS)."""

import multiprocessing as mp
import os

import pytest
import torch

import _store_cases as cases
import local_servers
from _store_cases import N, ids
from tensorsmith._training import shard_cache as _shard_cache
from tensorsmith.errors import CacheFull
from tensorsmith.torch import TensorDataset, TensorIterableDataset

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

KEY, SECRET = "AKIATORCHSTORE", "torchStoreSecret/1"


@pytest.fixture(scope="module")
def store(tmp_path_factory, tsm):
    """The dataset written by the CLI to s3://torchds/ds (with digests) and to a local
    folder: (url, storage options, local path, shard sizes)."""
    servers = local_servers.moto()
    url = next(servers)
    s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    s3.create_bucket(Bucket="torchds")
    root = tmp_path_factory.mktemp("store")
    pq.write_table(cases.table(), root / "in.parquet")
    opts = {"key": KEY, "secret": SECRET, "endpoint_url": url, "region": "us-east-1"}
    flags = ["--batch-size", str(cases.PER_SHARD), "--dtype", "F32", "--digest", "xxh3",
             "--threads", "1", "-q"]
    store_flags = [a for k, v in opts.items() for a in ("--storage-option", f"{k}={v}")]
    tsm.run("dataset", "write", root / "in.parquet", "s3://torchds/ds", *flags, *store_flags)
    tsm.run("dataset", "write", root / "in.parquet", root / "local", *flags)
    sizes = [os.path.getsize(p) for p in sorted((root / "local").glob("*.safetensors"))]
    yield "s3://torchds/ds", opts, root / "local", sizes
    next(servers, None)


def test_a_store_dataset_reads_as_the_local_one(store, tmp_path):
    url, opts, local, sizes = store
    cache = tmp_path / "cache"
    want = cases.reads_as_the_local_one(url, opts, local, sizes, cache)
    # Through DataLoader workers (fork, and spawn from a fresh cache) too.
    for ctx, folder in (("fork", cache), ("spawn", tmp_path / "spawned")):
        it = TensorIterableDataset(url, storage_options=opts, cache_dir=folder, **cases.BLOCK)
        loader = torch.utils.data.DataLoader(it, batch_size=None, num_workers=2,
                                             multiprocessing_context=ctx)
        assert [ids(t) for t in loader] == want
    assert _shard_cache.cache_bytes(tmp_path / "spawned") == sum(sizes)
    assert _shard_cache.cache_bytes(cache) == sum(sizes)


@pytest.mark.parametrize("kind", ["order", "block"])
def test_the_cache_limit_is_never_exceeded_and_the_oldest_shards_go_first(
        store, tmp_path, monkeypatch, kind):
    url, opts, local, sizes = store
    cases.keeps_to_the_cache_limit(url, opts, local, sizes, tmp_path / "c", monkeypatch, kind)


def test_two_processes_on_a_node_fetch_each_shard_once(store, tmp_path):
    url, opts, local, sizes = store
    cases.two_processes_fetch_each_shard_once(url, opts, local, sizes, tmp_path)


def _read_ahead_threads():
    import threading
    return [t for t in threading.enumerate() if t.name == "tensorsmith-read-ahead"]


def test_the_read_ahead_thread_is_gone_when_the_reading_ends(store, tmp_path):
    """Finished or abandoned, a reading leaves no read-ahead thread running: one still inside
    a fetch when the interpreter exits aborts the process (seen in CI as SIGABRT, "terminate
    called without an active exception")."""
    url, opts, local, sizes = store
    ds = TensorIterableDataset(url, storage_options=opts, cache_dir=tmp_path / "c",
                               batch_size=4, read_ahead=3)
    assert sum(1 for _ in ds) == (N + 3) // 4
    assert _read_ahead_threads() == []
    it = iter(TensorIterableDataset(url, storage_options=opts, cache_dir=tmp_path / "d",
                                    batch_size=4, read_ahead=3))
    next(it)
    assert len(_read_ahead_threads()) == 3  # a fetch thread per shard ahead
    it.close()
    assert _read_ahead_threads() == []


def _abandon_in_a_process(url, opts, cache, out):
    global _KEPT
    _KEPT = iter(TensorIterableDataset(url, storage_options=opts, cache_dir=cache,
                                       batch_size=4, read_ahead=6))
    next(_KEPT)  # the thread is fetching the next shards; the process exits now
    with open(out, "w") as f:
        f.write(str(len(_read_ahead_threads())))


def test_a_process_exiting_mid_read_ahead_exits_cleanly(store, tmp_path):
    url, opts, local, sizes = store
    ctx = mp.get_context("spawn")
    for r in range(3):
        p = ctx.Process(target=_abandon_in_a_process,
                        args=(url, opts, str(tmp_path / f"c{r}"), str(tmp_path / f"r{r}")))
        p.start()
        p.join(120)
        # Exit code 0, not SIGABRT. (How many fetch threads were still running when it exited
        # is a race with the fetches: shown on failure, not asserted.)
        assert p.exitcode == 0, (tmp_path / f"r{r}").read_text()


def damage_and_read_again(url, opts, cache, local, at, value):
    """Sample 20 read through the cache, its shard's cached byte `at` set to `value`, then
    read again by a new reader, which must fetch that shard again: (the key, the path)."""
    first = TensorDataset(url, storage_options=opts, cache_dir=cache)
    assert ids(first[20]) == [20]
    key = first._s.keys[1]
    path = cache / (key + ".safetensors")
    data = bytearray(path.read_bytes())
    data[at] = value(data[at])
    path.write_bytes(bytes(data))
    del first  # its shards closed (a process that held them would be gone too)
    again = TensorDataset(url, storage_options=opts, cache_dir=cache)
    assert torch.equal(again[20]["x"], TensorDataset(local)[20]["x"])
    assert [k for k, _ in again._s.cache.fetched] == [key]
    return key, path


def test_a_corrupted_cached_shard_is_fetched_again(store, tmp_path):
    url, opts, local, sizes = store
    cache = tmp_path / "cache"
    # The last tensor's values.
    key, path = damage_and_read_again(url, opts, cache, local, -3, lambda b: b ^ 0xFF)
    # A truncated one too (its size is not the manifest's).
    with open(path, "r+b") as f:
        f.truncate(100)
    third = TensorDataset(url, storage_options=opts, cache_dir=cache)
    assert ids(third[25]) == [25] and len(third._s.cache.fetched) == 1


def test_without_digests_a_cached_shard_with_a_damaged_header_is_fetched_again(
        store, tmp_path, tsm):
    """A dataset written without a digest: a cached shard whose header no longer reads (same
    size) is fetched again, where it failed every run until removed by hand."""
    url, opts, local, sizes = store
    src = tmp_path / "in.parquet"
    pq.write_table(cases.table(), src)
    bare = "s3://torchds/nodigest"
    store_flags = [a for k, v in opts.items() for a in ("--storage-option", f"{k}={v}")]
    tsm.run("dataset", "write", src, bare, "--batch-size", str(cases.PER_SHARD),
            "--dtype", "F32", "--threads", "1", "-q", *store_flags)
    # The header's opening brace: not a JSON object any more.
    damage_and_read_again(bare, opts, tmp_path / "cache", local, 8, lambda _: ord("["))


def test_a_shard_of_another_length_on_the_store_is_an_error(store, tmp_path):
    """A shard is fetched by one GET, its length checked against the manifest's: a shard
    replaced on the store by other bytes is refused by name, and nothing of it is cached."""
    url, opts, local, sizes = store
    s3 = boto3.client("s3", endpoint_url=opts["endpoint_url"], aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    for o in s3.list_objects_v2(Bucket="torchds", Prefix="ds/")["Contents"]:
        s3.copy_object(Bucket="torchds", Key="short/" + o["Key"][3:],
                       CopySource={"Bucket": "torchds", "Key": o["Key"]})
    ds = TensorDataset("s3://torchds/short", storage_options=opts, cache_dir=tmp_path / "c")
    first = sorted(k["Key"] for k in s3.list_objects_v2(Bucket="torchds",
                                                         Prefix="short/part-")["Contents"])[0]
    s3.put_object(Bucket="torchds", Key=first, Body=b"\0" * 100)
    with pytest.raises(Exception, match=r"has 100 bytes where \d+ were expected") as e:
        ds[0]
    assert first.rsplit("/", 1)[-1] in str(e.value)
    assert _shard_cache.cache_bytes(tmp_path / "c") == 0


def test_a_body_cut_short_is_resumed_and_too_many_cuts_are_an_error(store, tmp_path):
    """GETs whose connection drops mid-body (a proxy cutting them): a shard header's read at
    open is asked for again, a shard's fetch into the cache goes on from where it stopped (a
    ranged GET pinned to the ETag); the values are the local read's. A body cut on every
    attempt is an error naming the shard and the cuts after `max_attempts`, nothing cached."""
    url, opts, local, sizes = store
    ref = TensorDataset(local)
    for phase in ("open", "fetch"):
        proxy = local_servers.CuttingProxy(opts["endpoint_url"], cuts=0, after=1200,
                                           ranged=True)
        proxy.cuts = 3 if phase == "open" else 0
        ds = TensorDataset(url, storage_options=dict(opts, endpoint_url=proxy.endpoint),
                           cache_dir=tmp_path / phase)
        assert proxy.cut == proxy.cuts
        proxy.cuts += 3 if phase == "fetch" else 0
        assert all(torch.equal(ds[i]["x"], ref[i]["x"]) for i in range(N))
        assert proxy.cut == 3, phase
    # Cut 100 bytes into the body or sooner: too little progress per attempt to finish.
    proxy = local_servers.CuttingProxy(opts["endpoint_url"], cuts=0, after=600, ranged=True)
    ds = TensorDataset(url, storage_options=dict(opts, endpoint_url=proxy.endpoint,
                                                 max_attempts="2"), cache_dir=tmp_path / "d")
    proxy.cuts = 10**6
    with pytest.raises(Exception, match=r"part-\S+: .*cut short 2 times"):
        ds[0]
    assert _shard_cache.cache_bytes(tmp_path / "d") == 0


def test_the_users_own_files_in_cache_dir_are_never_counted_or_evicted(store, tmp_path):
    """A cache_dir that holds the user's files (a model, a file named like a fetch under way)
    under a limit that makes the cache evict: those files stay, byte for byte, and do not
    count against the limit."""
    url, opts, local, sizes = store
    cache = tmp_path / "c"
    cache.mkdir()
    mine = {"model.safetensors": os.urandom(3000), "notes.part": b"draft",
            "0123456789abcdef0123456789abcdeX.safetensors": b"not a key"}
    for name, data in mine.items():
        (cache / name).write_bytes(data)
    limit = 2 * max(sizes)
    ds = TensorIterableDataset(url, storage_options=opts, cache_dir=cache, cache_limit=limit,
                               batch_size=4)
    assert sum(1 for _ in ds) == (N + 3) // 4
    assert ds._s.cache.evicted  # the limit made it evict
    for name, data in mine.items():
        assert (cache / name).read_bytes() == data, name
    assert _shard_cache.cache_bytes(cache) <= limit


def test_a_cache_smaller_than_a_shard_is_refused(store, tmp_path):
    url, opts, local, sizes = store
    ds = TensorIterableDataset(url, storage_options=opts, cache_dir=tmp_path / "c",
                               cache_limit=min(sizes) - 1)
    with pytest.raises(CacheFull, match="smaller than shard"):
        next(iter(ds))
    assert _shard_cache.cache_bytes(tmp_path / "c") == 0
    with pytest.raises(Exception, match="cache_limit"):
        TensorDataset(url, storage_options=opts, cache_dir=tmp_path / "c", cache_limit=-5)


def test_space_held_by_open_shards_and_a_full_disk_are_clear_errors(store, tmp_path,
                                                                   monkeypatch):
    url, opts, local, sizes = store
    cache = tmp_path / "c"
    limit = max(sizes) * 3 // 2  # one shard and a half
    a = TensorDataset(url, storage_options=opts, cache_dir=cache, cache_limit=limit)
    b = TensorDataset(url, storage_options=opts, cache_dir=cache, cache_limit=limit)
    assert ids(a[0]) == [0]  # a holds shard 0 open
    b._s.cache.wait_s = 0.5
    with pytest.raises(CacheFull, match="hold open"):
        b[20]  # shard 1 needs the space shard 0 holds: an error after wait_s, no hang
    assert ids(a[20]) == [20]  # a lets go of its own shard 0 to make room
    assert _shard_cache.cache_bytes(cache) <= limit

    def full(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    c = TensorDataset(url, storage_options=opts, cache_dir=tmp_path / "d")
    with pytest.raises(CacheFull, match="no room on the disk"):
        c[0]
    assert list((tmp_path / "d").glob("*.part")) == []


def test_a_kv_dataset_on_the_store(store, tmp_path):
    url, opts, local, sizes = store
    cases.a_kv_dataset("s3://torchds/kv", opts, tmp_path / "c")


def test_the_version_opened_is_the_one_read(store, tmp_path):
    import tensorsmith
    url, opts, local, sizes = store

    def table(tag):
        return pa.table({"idx": pa.array([[tag * 100 + i] for i in range(20)],
                                         pa.list_(pa.int64()))})

    tensorsmith.write_dataset(table(1), "s3://torchds/pin", storage_options=opts,
                              batch_size=8, dtype="F32")
    old = TensorIterableDataset("s3://torchds/pin", storage_options=opts,
                                cache_dir=tmp_path / "c", batch_size=8)
    tensorsmith.write_dataset(table(2), "s3://torchds/pin", storage_options=opts,
                              batch_size=8, dtype="F32", mode="overwrite")
    assert [i for t in old for i in ids(t)] == [100 + i for i in range(20)]  # fetched now
    new = TensorIterableDataset("s3://torchds/pin", storage_options=opts,
                                cache_dir=tmp_path / "c", batch_size=8)
    assert new.version == old.version + 1
    assert [i for t in new for i in ids(t)] == [200 + i for i in range(20)]
    pinned = TensorDataset("s3://torchds/pin", storage_options=opts, cache_dir=tmp_path / "c",
                           version=old.version)
    assert ids(pinned[3]) == [103]
