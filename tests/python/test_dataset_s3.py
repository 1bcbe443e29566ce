"""Datasets on S3 from Python, against moto in server mode on 127.0.0.1 (started by a
fixture): `write_dataset(table, "s3://…", storage_options=…)` writes what a local write
writes, `Dataset("s3://…")` reads samples and KV keys back (`columns=` those columns only), `dataset_info`/`dataset_verify`/
`dataset_export`/`dataset_clean` take the URL, appends and overwrites make versions, writer
threads racing on one prefix each commit a version of their own or fail with the conflict
error, `hf://` and unknown schemes are refused by name, and no error shows the secret."""

import os
import threading

import numpy as np
import pytest

import local_servers
import tensorsmith

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

KEY, SECRET = "AKIAPYDATASET", "pyDatasetSecretDoNotPrint/xyz"


@pytest.fixture(scope="module")
def endpoint():
    servers = local_servers.moto()
    url = next(servers)
    s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    s3.create_bucket(Bucket="pyds")
    yield url
    next(servers, None)


@pytest.fixture
def opts(endpoint, monkeypatch):
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", "/nonexistent")
    return {"key": KEY, "secret": SECRET, "endpoint_url": endpoint, "region": "us-east-1"}


def _table(n, tag=0):
    return pa.table({
        "x": pa.array([[float(tag * 1000 + i)] * 3 for i in range(n)], pa.list_(pa.float32())),
        "id": pa.array([f"k{tag}-{i}" for i in range(n)]),
    })


def test_write_and_read_back_as_the_local_dataset(tmp_path, opts):
    t = _table(10)
    local = tmp_path / "local"
    kw = dict(batch_size=4, dtype="F32", columns="x", generate_index="true", threads=2)
    m_local = tensorsmith.write_dataset(t, str(local), **kw)
    m_s3 = tensorsmith.write_dataset(t, "s3://pyds/ds1", storage_options=opts, **kw)
    assert m_s3["total_samples"] == m_local["total_samples"] == 10
    assert [s["bytes"] for s in m_s3["shards"]] == [s["bytes"] for s in m_local["shards"]]
    a = tensorsmith.Dataset(str(local))
    b = tensorsmith.Dataset("s3://pyds/ds1", storage_options=opts)
    assert len(b) == len(a) == 10 and b.version == 1
    for i in (0, 5, 9):
        np.testing.assert_array_equal(b[i]["x"], a[i]["x"])
    np.testing.assert_array_equal(b[2:7]["x"], a[2:7]["x"])
    info = tensorsmith.dataset_info("s3://pyds/ds1", storage_options=opts)
    assert info["version"] == 1 and info["manifest"]["total_samples"] == 10
    assert tensorsmith.dataset_verify("s3a://pyds/ds1", storage_options=opts)["ok"]
    out = tmp_path / "e.parquet"
    assert tensorsmith.dataset_export("s3://pyds/ds1", str(out), storage_options=opts) == 10
    assert pq.read_table(out).num_rows == 10
    with pytest.raises(tensorsmith.errors.DatasetExists, match="s3://pyds/ds1"):
        tensorsmith.write_dataset(t, "s3://pyds/ds1", storage_options=opts, **kw)


def test_columns_of_a_dataset_on_s3_read_by_range(tmp_path, opts):
    n = 40
    t = pa.table({c: pa.array([[float(k * 1000 + i)] * 64 for i in range(n)],
                              pa.list_(pa.float32()))
                  for k, c in enumerate(["a", "b", "c"])})
    kw = dict(batch_size=16, dtype="F32", generate_index="true")
    tensorsmith.write_dataset(t, str(tmp_path / "local"), **kw)
    tensorsmith.write_dataset(t, "s3://pyds/cols", storage_options=opts, **kw)
    a = tensorsmith.Dataset(str(tmp_path / "local"), columns=["b"])
    b = tensorsmith.Dataset("s3://pyds/cols", storage_options=opts, columns="b")
    assert list(b[3]) == ["b"]
    for i in (0, 17, 39):
        np.testing.assert_array_equal(b[i]["b"], a[i]["b"])
    np.testing.assert_array_equal(b[10:30]["b"], a[10:30]["b"])  # across shards
    order = [list(x["b"][:, 0]) for x in b.batches(8, shuffle=1)]
    assert sorted(v for batch in order for v in batch) == [1000.0 + i for i in range(n)]
    import pickle
    c = pickle.loads(pickle.dumps(b))
    assert list(c[5]) == ["b"] and c.version == b.version
    every = tensorsmith.Dataset("s3://pyds/cols", storage_options=opts)
    assert sorted(every[5]) == ["a", "b", "c"]
    with pytest.raises(tensorsmith.errors.OptionError, match="'z'"):
        tensorsmith.Dataset("s3://pyds/cols", storage_options=opts, columns=["b", "z"])
    out = tmp_path / "b.parquet"
    assert tensorsmith.dataset_export("s3://pyds/cols", str(out), storage_options=opts,
                                      columns="b") == n
    back = pq.read_table(out)
    assert back.column_names == ["b"]
    assert back.column("b").to_pylist()[7] == [1007.0] * 64


def test_engine_batches_of_a_shard_on_s3_read_rows_by_range(tmp_path, opts, monkeypatch):
    """The Spark and Ray readers' batches (`_shard_arrow.batch_rows`) of a shard on S3: a
    batch of rows at a time, each chosen column's rows by one ranged read, equal to the
    local shard's batches."""
    from tensorsmith import _shard_arrow

    t = pa.table({c: pa.array([[float(k * 1000 + i)] * 8 for i in range(30)],
                              pa.list_(pa.float32()))
                  for k, c in enumerate(["a", "b", "c"])})
    kw = dict(batch_size=30, dtype="F32")
    m = tensorsmith.write_dataset(t, str(tmp_path / "local"), **kw)
    tensorsmith.write_dataset(t, "s3://pyds/engine", storage_options=opts, **kw)
    remote = tensorsmith.dataset_info("s3://pyds/engine", storage_options=opts)
    monkeypatch.setattr(_shard_arrow, "CHUNK_ROWS", 7)
    schema = pa.schema([pa.field("c", pa.list_(pa.float32()), False)])
    targets = {"F32": np.float32}
    local = tmp_path / "local" / m["shards"][0]["shard_path"]
    url = "s3://pyds/engine/" + remote["manifest"]["shards"][0]["shard_path"]
    with tensorsmith.safe_open(str(local), framework="np") as f:
        want = list(_shard_arrow.batch_rows(f, schema, targets))
    with tensorsmith.safe_open(url, framework="np", storage_options=opts) as f:
        assert _shard_arrow._ranged(f)
        got = list(_shard_arrow.batch_rows(f, schema, targets))
    assert [b.num_rows for b in got] == [7, 7, 7, 7, 2]
    assert got == want


def test_kv_keys_append_overwrite_and_clean(opts):
    kw = dict(name_col="id", dtype="F32", generate_index="true")
    tensorsmith.write_dataset(_table(4, 1), "s3://pyds/kv", storage_options=opts, **kw)
    tensorsmith.write_dataset(_table(3, 2), "s3://pyds/kv", storage_options=opts,
                              mode="append", **kw)
    ds = tensorsmith.Dataset("s3://pyds/kv", storage_options=opts)
    assert ds.mode == "kv" and len(ds) == 7 and ds.version == 2
    np.testing.assert_array_equal(ds["k2-1__x"], np.full(3, 2001, np.float32))
    tensorsmith.write_dataset(_table(2, 3), "s3://pyds/kv", storage_options=opts,
                              mode="overwrite", retain=3600, **kw)
    info = tensorsmith.dataset_info("s3://pyds/kv", storage_options=opts)
    v2_shards = info["versions"][1]["shards"]
    assert info["version"] == 3 and len(info["retired_shards"]) == v2_shards >= 2
    # A reader of version 2 reads it to the end, from its retired shards.
    np.testing.assert_array_equal(ds["k1-3__x"], np.full(3, 1003, np.float32))
    r = tensorsmith.dataset_clean("s3://pyds/kv", older_than="0", storage_options=opts)
    assert r["versions"] == [1, 2] and len(r["shards"]) == v2_shards
    assert len(tensorsmith.Dataset("s3://pyds/kv", storage_options=opts)) == 2


def test_threads_racing_on_one_prefix_lose_no_version(opts):
    kw = dict(batch_size=2, dtype="F32", columns="x")
    tensorsmith.write_dataset(_table(2), "s3://pyds/race", storage_options=opts, **kw)
    results = []

    def write(tag):
        try:
            tensorsmith.write_dataset(_table(2, tag), "s3://pyds/race", mode="append",
                                      storage_options=opts, threads=1, **kw)
            results.append(True)
        except tensorsmith.TensorsmithError as e:
            assert "other writers committed" in str(e)
            results.append(False)

    ts = [threading.Thread(target=write, args=(i,)) for i in range(1, 5)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ok = sum(results)
    assert ok >= 1 and len(results) == 4
    ds = tensorsmith.Dataset("s3://pyds/race", storage_options=opts)
    assert ds.version == 1 + ok and len(ds) == 2 + 2 * ok


def test_other_schemes_are_refused_and_secrets_never_shown(tmp_path, opts, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t = _table(4)
    with pytest.raises(tensorsmith.TensorsmithError, match="read only"):
        tensorsmith.write_dataset(t, "hf://org/repo/ds", batch_size=2, dtype="F32",
                                  columns="x")
    with pytest.raises(tensorsmith.TensorsmithError,
                       match="https:// is not supported for datasets"):
        tensorsmith.write_dataset(t, "https://host/ds", batch_size=2, dtype="F32",
                                  columns="x")
    with pytest.raises(tensorsmith.TensorsmithError, match='unsupported URL scheme "ftp"'):
        tensorsmith.write_dataset(t, "ftp://b/ds", batch_size=2, dtype="F32", columns="x")
    assert os.listdir(tmp_path) == []
    bad = dict(opts, secret="wrongSecretDoNotPrint")
    with pytest.raises(tensorsmith.TensorsmithError) as e:
        tensorsmith.write_dataset(t, "s3://no-such-bucket-here/ds", storage_options=bad,
                                  batch_size=2, dtype="F32", columns="x")
    assert "s3://no-such-bucket-here" in str(e.value)
    assert "wrongSecretDoNotPrint" not in str(e.value) and SECRET not in str(e.value)
    with pytest.raises(tensorsmith.errors.OptionError, match="colour"):
        tensorsmith.Dataset("s3://pyds/ds1", storage_options={"colour": "red"})


def _shards(folder):
    """A local dataset's shards (names without their uuids) and bytes, in name order."""
    out = []
    for n in sorted(os.listdir(folder)):
        if n.startswith("part-"):
            out.append(("-".join(n.split("-")[:3]), (folder / n).read_bytes()))
    return out


def test_parquet_input_on_s3_writes_the_local_dataset(tmp_path, opts, endpoint):
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    src = tmp_path / "src"
    src.mkdir()
    rng = np.random.default_rng(0)
    tables = []
    for i, name in enumerate(["a.parquet", "b.parquet"]):
        v = rng.standard_normal((50, 8), dtype=np.float32)
        t = pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), 8),
                      "id": [f"r{i}-{j}" for j in range(50)]})
        tables.append(t)
        pq.write_table(t, src / name, row_group_size=20)
        s3.upload_file(str(src / name), "pyds", f"input/{name}")
    s3.put_object(Bucket="pyds", Key="input/_SUCCESS", Body=b"")
    for kw in (dict(batch_size=16, dtype="F32", columns="x"),
               dict(name_col="id", dtype="F16", columns="x")):
        # The reference: the same rows handed over in memory.
        local = tmp_path / f"local-{len(kw)}-{kw['dtype']}"
        tensorsmith.write_dataset(pa.concat_tables(tables), str(local), threads=2, **kw)
        files = tmp_path / f"files-{len(kw)}-{kw['dtype']}"
        tensorsmith.write_dataset([src / "a.parquet", str(src / "b.parquet")], str(files),
                                  threads=2, **kw)
        assert _shards(files) == _shards(local)
        for data in (["s3://pyds/input/a.parquet", "s3a://pyds/input/b.parquet"],
                     "s3://pyds/input/"):
            got = tmp_path / f"got-{len(kw)}-{kw['dtype']}-{type(data).__name__}"
            m = tensorsmith.write_dataset(data, str(got), storage_options=opts, threads=2,
                                          **kw)
            assert m["total_samples"] == 100
            assert _shards(got) == _shards(local)
    # The input's URL and the rule, no secret.
    with pytest.raises(FileNotFoundError, match="s3://pyds/input/nope.parquet") as e:
        tensorsmith.write_dataset("s3://pyds/input/nope.parquet", str(tmp_path / "x"),
                                  storage_options=opts, batch_size=4)
    assert SECRET not in str(e.value)
