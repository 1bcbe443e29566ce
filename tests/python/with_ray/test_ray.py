"""tensorsmith.ray on a real local Ray cluster (ray.init(num_cpus=2)): round trips in both
modes, shards equal to `tensorsmith dataset write` where blocks hold whole batches, a write
task killed mid-write and retried (every row once), a failing write that leaves nothing,
column and key pruning, datasets passed between Spark and Ray, and datasets on S3 (moto in
server mode on 127.0.0.1): tasks upload their shards, the driver commits, a failing write
leaves no object; datasets Spark and Ray wrote there read by tensorsmith.torch's datasets
(in .venv-torch, a subprocess)."""

import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")

import tensorsmith  # noqa: E402
import tensorsmith.ray as tray  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


N = 48


def table(n=N, start=0):
    x = np.arange(start * 6, (start + n) * 6, dtype=np.float32).reshape(n, 6) / 4
    return pa.table({
        "id": [f"s{i:03d}" for i in range(start, start + n)],
        "idx": pa.array([[i] for i in range(start, start + n)], pa.list_(pa.int64())),
        "x": pa.array(list(x), type=pa.list_(pa.float32())),
    })


def shard_bytes(path):
    m = json.loads((path / "dataset_manifest.json").read_text())
    return [(path / s["shard_path"]).read_bytes() for s in m["shards"]], m


def test_batch_write_equals_the_cli_when_blocks_hold_whole_batches(tsm, tmp_path):
    t = table()
    # 4 blocks of 12 rows: 3 batches of 4 each.
    ds = ray.data.from_arrow([t.slice(i, 12) for i in range(0, N, 12)])
    m = tray.write_dataset(ds, tmp_path / "ray", batch_size=4, dtype="F32",
                           columns=["idx", "x"], generate_index=True)
    assert m["total_samples"] == N and len(m["shards"]) == 12
    pq.write_table(t, tmp_path / "in.parquet")
    tsm.run("dataset", "write", tmp_path / "in.parquet", tmp_path / "cli", "--batch-size", "4",
            "--dtype", "F32", "--columns", "idx,x", "--threads", "1")
    got, _ = shard_bytes(tmp_path / "ray")
    want, _ = shard_bytes(tmp_path / "cli")
    assert got == want
    back = tray.read_dataset(tmp_path / "ray").take_all()
    assert [r["idx"] for r in back] == [[i] for i in range(N)]
    assert [r["x"] for r in back] == t.column("x").to_pylist()
    assert not [p for p in os.listdir(tmp_path / "ray") if p.startswith("_tensorsmith_job")]


def test_blocks_cutting_batches_keep_samples_in_order(tmp_path):
    t = table()
    ds = ray.data.from_arrow([t.slice(0, 10), t.slice(10, 25), t.slice(35, 13)])
    m = tray.write_dataset(ds, tmp_path / "d", batch_size=4, dtype="F64", columns="x")
    assert m["total_samples"] == N
    back = tray.read_dataset(tmp_path / "d", columns=["x"]).take_all()
    assert [r["x"] for r in back] == t.column("x").to_pylist()


def test_kv_round_trip_with_keys_and_duplicates_across_tasks(tmp_path):
    t = table()
    dup = table(n=4, start=10).set_column(2, "x", pa.array([[9.0] * 6] * 4,
                                                            pa.list_(pa.float32())))
    ds = ray.data.from_arrow([t.slice(0, 24), t.slice(24), dup])
    m = tray.write_dataset(ds, tmp_path / "kv", name_col="id", dtype="F32",
                           duplicatesStrategy="lastWin", generate_index=True)
    assert m["total_samples"] == N and len(tensorsmith.Dataset(tmp_path / "kv")) == 2 * N
    # A row per name, in shard order (names sorted within a shard).
    rows = sorted(tray.read_dataset(tmp_path / "kv").take_all(), key=lambda r: r["key"])
    assert [r["key"] for r in rows] == [f"s{i:03d}" for i in range(N)]
    assert rows[11]["x"] == [9.0] * 6 and rows[9]["x"] == t.column("x")[9].as_py()
    some = tray.read_dataset(tmp_path / "kv", keys=["s003", "s040"], columns=["x"]).take_all()
    assert sorted((r["key"], sorted(r)) for r in some) == [("s003", ["key", "x"]), ("s040", ["key", "x"])]
    with pytest.raises(tensorsmith.DatasetFailure, match="duplicate tensor key"):
        tray.write_dataset(ds, tmp_path / "fail", name_col="id", dtype="F32")
    left = os.listdir(tmp_path / "fail")
    assert left in ([], ["_tensorsmith"]), left


def test_tensor_columns_from_numpy_batches(tmp_path):
    ds = ray.data.range(40, override_num_blocks=4).map_batches(
        lambda b: {"v": np.stack([np.full((2, 3), i, np.float32) for i in b["id"]])},
        batch_format="numpy")
    m = tray.write_dataset(ds, tmp_path / "t", batch_size=5, dtype="F32")
    assert m["schema"]["v"]["shape"] == [5, 2, 3]
    ts = tensorsmith.Dataset(tmp_path / "t")
    assert [float(ts[i]["v"][1, 2]) for i in range(40)] == [float(i) for i in range(40)]


def _kill_once(marker):
    def udf(b):
        # The second batch of block 2 kills its worker once: the task has written shards
        # by then; Ray retries it.
        if [26] in b["idx"].to_pylist() and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return b
    return udf


def test_a_killed_write_task_is_retried_and_rows_are_written_once(tmp_path):
    t = table()
    marker = str(tmp_path / "killed")
    ds = ray.data.from_arrow([t.slice(i, 16) for i in range(0, N, 16)]).map_batches(
        _kill_once(marker), batch_size=2, batch_format="pyarrow")
    m = tray.write_dataset(ds, tmp_path / "d", batch_size=2, dtype="F32", columns=["idx", "x"],
                           ray_remote_args={"max_retries": 3})
    assert os.path.exists(marker)
    assert m["total_samples"] == N
    back = tensorsmith.Dataset(tmp_path / "d")
    assert [int(back[i]["idx"][0]) for i in range(N)] == list(range(N))
    names = os.listdir(tmp_path / "d")
    assert not [p for p in names if p.startswith("_tensorsmith_job")], names
    assert len([p for p in names if p.endswith(".safetensors")]) == N // 2


def _raise_once(marker):
    def _staged(out):
        # The job's shards so far: each moves from its task's folder in the job's staging
        # folder into dataset folder `out` once written (no version lists it before the
        # commit), so both places are looked at.
        names = [n for n in os.listdir(out) if n.endswith(".safetensors")]
        for root, _, files in os.walk(out):
            if "_tensorsmith_job" in root:
                names += [n for n in files if n.endswith(".safetensors")]
        return names

    def udf(b):
        # The sixth batch of block 2 raises once (a transient error: the worker lives on and
        # runs the retry): the task has written shards by then. The marker records the
        # staged shards then; a second file, those when the retry reaches the same batch.
        if [26] in b["idx"].to_pylist():
            out = os.path.join(os.path.dirname(marker), "d")
            if not os.path.exists(marker):
                with open(marker, "w") as f:
                    f.write("\n".join(_staged(out)))
                raise RuntimeError("transient")
            with open(marker + ".retry", "w") as f:
                f.write("\n".join(_staged(out)))
        return b
    return udf


@pytest.mark.parametrize("kv", [False, True])
def test_a_write_task_that_raised_is_retried_clean_and_rows_are_written_once(tmp_path, kv):
    t = table()
    marker = str(tmp_path / "raised")
    opts = dict(name_col="id") if kv else dict(batch_size=2, columns=["idx", "x"])
    # Ray Data retries a task's user exceptions when asked: the fused map and write again,
    # in the same worker process. Output blocks of a batch each (a tiny target block size),
    # so the write has taken block 2's first batches when its sixth raises.
    ctx = ray.data.DataContext.get_current()
    keep = ctx.retried_map_errors, ctx.max_map_retries, ctx.target_max_block_size
    ctx.retried_map_errors, ctx.max_map_retries, ctx.target_max_block_size = True, 2, 64
    try:
        ds = ray.data.from_arrow([t.slice(i, 16) for i in range(0, N, 16)]).map_batches(
            _raise_once(marker), batch_size=2, batch_format="pyarrow")
        m = tray.write_dataset(ds, tmp_path / "d", dtype="F32", **opts)
    finally:
        ctx.retried_map_errors, ctx.max_map_retries, ctx.target_max_block_size = keep
    before = [n for n in open(marker).read().split() if n.startswith("part-00001-")]
    retry = [n for n in open(marker + ".retry").read().split() if n.startswith("part-00001-")]
    if not kv:  # batch mode: the failed attempt had written task 1's first shards
        assert before, open(marker).read()
    # The retry started clean: none of the failed attempt's shards left beside its own.
    assert not set(before) & set(retry), (before, retry)
    assert len({n.split("-", 3)[3] for n in retry}) <= 1, retry  # one attempt's uuid
    assert m["total_samples"] == N
    back = tensorsmith.Dataset(tmp_path / "d")
    if kv:
        assert sorted(back.keys()) == sorted(f"s{i:03d}__{c}" for i in range(N)
                                             for c in ("idx", "x"))
    else:
        assert [int(back[i]["idx"][0]) for i in range(N)] == list(range(N))
    names = os.listdir(tmp_path / "d")
    assert not [p for p in names if p.startswith("_tensorsmith_job")], names
    listed = {s["shard_path"] for s in m["shards"]}
    assert {p for p in names if p.endswith(".safetensors")} == listed


def _raise_always():
    def udf(b):
        if [26] in b["idx"].to_pylist():
            raise RuntimeError("bad block")
        return b
    return udf


def test_a_write_task_raises_its_inputs_exception_not_an_arrow_stream_error(tmp_path):
    # A block that fails upstream of the write, after the task has written shards: the task
    # fails with that exception (what Ray's retry policies look at), not a DatasetCorrupt
    # about the Arrow stream; nothing is left.
    t = table()
    ctx = ray.data.DataContext.get_current()
    keep = ctx.target_max_block_size
    ctx.target_max_block_size = 64
    try:
        ds = ray.data.from_arrow([t.slice(i, 16) for i in range(0, N, 16)]).map_batches(
            _raise_always(), batch_size=2, batch_format="pyarrow")
        with pytest.raises(Exception, match="bad block") as e:
            tray.write_dataset(ds, tmp_path / "d", batch_size=2, dtype="F32", columns="x")
    finally:
        ctx.target_max_block_size = keep
    text = str(e.value)
    assert "DatasetCorrupt" not in text and "C Data interface" not in text, text
    left = os.listdir(tmp_path / "d")
    assert left in ([], ["_tensorsmith"]), left


def _failing():
    # A closure: Ray's workers cannot import this test module, so it travels by value.
    def udf(b):
        if [30] in b["idx"].to_pylist():
            raise RuntimeError("bad row")
        return b
    return udf


def test_a_failed_write_leaves_nothing(tmp_path):
    t = table()
    ds = ray.data.from_arrow([t.slice(i, 16) for i in range(0, N, 16)]).map_batches(
        _failing(), batch_size=2, batch_format="pyarrow")
    with pytest.raises(Exception, match="bad row"):
        tray.write_dataset(ds, tmp_path / "d", batch_size=2, dtype="F32", columns="x")
    left = os.listdir(tmp_path / "d")
    assert left in ([], ["_tensorsmith"]), left
    tray.write_dataset(ray.data.from_arrow(t), tmp_path / "d", batch_size=2, dtype="F32",
                       columns="x")
    with pytest.raises(FileExistsError):
        tray.write_dataset(ray.data.from_arrow(t), tmp_path / "d", batch_size=2, dtype="F32",
                           columns="x")
    with pytest.raises(tensorsmith.errors.TensorsmithError, match='unsupported URL scheme "ftp"'):
        tray.write_dataset(ray.data.from_arrow(t), "ftp://host/d", batch_size=2)
    with pytest.raises(ValueError, match="bogus"):
        tray.write_dataset(ray.data.from_arrow(t), tmp_path / "o", batch_size=2, bogus=1)


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    import tensorsmith.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (SparkSession.builder.master("local[2]").appName("tensorsmith-ray-tests")
         .config("spark.ui.enabled", "false").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    tensorsmith.spark.register(s)
    yield s
    s.stop()


@pytest.mark.parametrize("kv", [False, True])
def test_spark_to_ray_and_back(spark, tmp_path, kv):
    t = table()
    opts = dict(name_col="id") if kv else dict(batch_size=4, columns="idx,x")
    df = spark.createDataFrame(t.to_pandas()).repartition(2)
    w = df.write.format("safetensors").mode("overwrite").option("dtype", "F32")
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(str(tmp_path / "spark"))
    back = tray.read_dataset(tmp_path / "spark")
    rows = back.take_all()
    def key(r):
        return r["key"] if kv else r["idx"][0]

    got = sorted((key(r), list(r["x"])) for r in rows)
    want = sorted(zip(t.column("id").to_pylist() if kv else range(N), t.column("x").to_pylist()))
    assert got == want
    # And Ray's dataset written back, read by Spark.
    if kv:
        back = back.rename_columns({"key": "id"})
    tray.write_dataset(back, tmp_path / "ray", dtype="F32",
                       **(dict(name_col="id") if kv else dict(batch_size=4)))
    again = spark.read.format("safetensors").load(str(tmp_path / "ray")).collect()
    got = sorted((key(r), list(r["x"])) for r in again)
    assert got == want


def test_datasets_on_s3(tmp_path):
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("moto.server")
    import local_servers

    key, secret = "AKIARAYS3", "raySecretDoNotPrint/1"
    servers = local_servers.moto()
    url = next(servers)
    try:
        s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=key,
                          aws_secret_access_key=secret, region_name="us-east-1")
        s3.create_bucket(Bucket="rayds")
        opts = {"key": key, "secret": secret, "endpoint_url": url, "region": "us-east-1"}

        def objects(prefix):
            r = s3.list_objects_v2(Bucket="rayds", Prefix=prefix)
            return sorted(o["Key"][len(prefix):] for o in r.get("Contents", []))

        t = table()
        ds = ray.data.from_arrow([t.slice(i, 12) for i in range(0, N, 12)])
        m = tray.write_dataset(ds, "s3://rayds/ds", batch_size=4, dtype="F32",
                               columns=["idx", "x"], storage_options=opts)
        local = tray.write_dataset(ds, tmp_path / "local", batch_size=4, dtype="F32",
                                   columns=["idx", "x"])
        assert m["total_samples"] == N
        names = sorted(s["shard_path"] for s in m["shards"])
        assert [k for k in objects("ds/") if k.startswith("part-")] == names
        assert not [k for k in objects("ds/") if k.startswith("_tensorsmith/jobs/")]
        got = [s3.get_object(Bucket="rayds", Key="ds/" + s["shard_path"])["Body"].read()
               for s in m["shards"]]
        assert got == shard_bytes(tmp_path / "local")[0]
        assert len(local["shards"]) == len(m["shards"])
        back = tray.read_dataset("s3://rayds/ds", storage_options=opts).take_all()
        assert [r["idx"] for r in back] == [[i] for i in range(N)]
        with pytest.raises(FileExistsError):
            tray.write_dataset(ds, "s3://rayds/ds", batch_size=4, dtype="F32",
                               columns=["idx", "x"], storage_options=opts)
        bad = ray.data.from_arrow([t.slice(i, 16) for i in range(0, N, 16)]).map_batches(
            _failing(), batch_size=2, batch_format="pyarrow")
        with pytest.raises(Exception, match="bad row") as e:
            tray.write_dataset(bad, "s3://rayds/failed", batch_size=2, dtype="F32",
                               columns="x", storage_options=opts)
        assert secret not in str(e.value)
        assert objects("failed/") == []
    finally:
        next(servers, None)


def test_read_name_col_naming_a_tensor_column_is_refused(tmp_path):
    t = table(n=4)
    tensorsmith.write_dataset(t, tmp_path / "kv", name_col="id", dtype="F32")
    with pytest.raises(tensorsmith.OptionError, match=r"name_col: 'x' is a tensor column"):
        tray.read_dataset(tmp_path / "kv", name_col="x").take_all()
    rows = tray.read_dataset(tmp_path / "kv", name_col="name").take_all()
    assert sorted(r["name"] for r in rows) == [f"s{i:03d}" for i in range(4)]


TORCH_READ = r"""
import json, sys
from tensorsmith.torch import TensorDataset, TensorIterableDataset
url, opts, cache, kv = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
ds = TensorDataset(url, storage_options=opts, cache_dir=cache)
if kv:
    out = {n: ds.sample(n)["x"].tolist() for n in sorted(ds._s.names)}
else:
    out = {int(ds[i]["idx"][0]): ds[i]["x"].tolist() for i in range(len(ds))}
    it = TensorIterableDataset(url, storage_options=opts, cache_dir=cache + "-it", shuffle=3,
                               shuffle_kind="block", shuffle_block_size=8, batch_size=5)
    seen = [int(i) for b in it for i in b["idx"].reshape(-1)]
    assert sorted(seen) == sorted(out), seen
print(json.dumps(out))
"""


def test_engines_datasets_on_s3_read_by_the_torch_datasets(spark, tmp_path):
    """Datasets Spark (the data source, local[2]) and Ray (the datasink) wrote to S3 (moto on
    127.0.0.1) read by tensorsmith.torch's TensorDataset and TensorIterableDataset (the shard
    cache, the block shuffle) in the PyTorch venv: every sample's values, every sample once."""
    pytest.importorskip("boto3")
    pytest.importorskip("moto.server")
    import subprocess

    import boto3

    import local_servers

    torch_python = os.path.join(os.path.dirname(__file__), "..", "..", "..", ".venv-torch",
                                "bin", "python")
    if not os.path.exists(torch_python):
        pytest.skip("no .venv-torch (scripts/test makes it before this suite)")
    key, secret = "AKIAENGINES", "enginesSecret/1"
    servers = local_servers.moto()
    url = next(servers)
    try:
        boto3.client("s3", endpoint_url=url, aws_access_key_id=key, aws_secret_access_key=secret,
                     region_name="us-east-1").create_bucket(Bucket="engines")
        opts = {"key": key, "secret": secret, "endpoint_url": url, "region": "us-east-1"}
        t = table()
        want = {i: [float(v) for v in row] for i, row in zip(range(N), t.column("x").to_pylist())}
        tray.write_dataset(ray.data.from_arrow([t.slice(i, 12) for i in range(0, N, 12)]),
                           "s3://engines/ray", batch_size=4, dtype="F32",
                           columns=["idx", "x"], storage_options=opts)
        df = spark.createDataFrame(t.to_pandas()).repartition(3)

        def writer(**options):
            w = df.write.format("safetensors").mode("overwrite").option("dtype", "F32")
            for k, v in [*options.items(), *(("storage." + k, v) for k, v in opts.items())]:
                w = w.option(k, v)
            return w

        writer(batch_size=5, columns="idx,x").save("s3://engines/spark")
        writer(name_col="id", columns="x").save("s3://engines/spark-kv")
        env = dict(os.environ, PYTHONPATH=os.path.dirname(tensorsmith.__file__) + "/..")
        for name, kv in (("ray", False), ("spark", False), ("spark-kv", True)):
            r = subprocess.run([torch_python, "-c", TORCH_READ, f"s3://engines/{name}",
                                json.dumps(opts), str(tmp_path / f"cache-{name}"),
                                "1" if kv else "0"],
                               capture_output=True, text=True, env=env, timeout=300)
            assert r.returncode == 0, r.stderr[-3000:]
            got = json.loads(r.stdout)
            if kv:
                assert got == {f"s{i:03d}": want[i] for i in range(N)}, name
            else:
                assert {int(k): v for k, v in got.items()} == want, name
    finally:
        next(servers, None)
