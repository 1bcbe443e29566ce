"""Spark jobs on S3, against moto in server mode on 127.0.0.1 and Spark local[2] (retries:
local[2,2]): `tensorsmith.spark.write_dataset` (the direct path) writes to s3:// the shards a
local write writes, from Parquet on the local disk or on S3 itself, the "safetensors" data source saves to and loads from s3:// with
`storage.*` options, the session's `spark.tensorsmith.storage.*` settings reach the tasks, a
failing job leaves no object, a retried task leaves only the committed shards, and an attempt
still running after the job ended uploads nothing. No error shows the secret."""

import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pyspark = pytest.importorskip("pyspark")
boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

import local_servers  # noqa: E402
import tensorsmith  # noqa: E402
import tensorsmith.spark  # noqa: E402
from tensorsmith import _native  # noqa: E402

KEY, SECRET = "AKIASPARKS3", "sparkS3SecretDoNotPrint/abc"
BUCKET = "sparkds"


@pytest.fixture(scope="module")
def endpoint():
    servers = local_servers.moto()
    url = next(servers)
    yield url
    next(servers, None)


@pytest.fixture(scope="module")
def s3(endpoint):
    c = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                     aws_secret_access_key=SECRET, region_name="us-east-1")
    c.create_bucket(Bucket=BUCKET)
    return c


@pytest.fixture(scope="module")
def opts(endpoint, s3):
    return {"key": KEY, "secret": SECRET, "endpoint_url": endpoint, "region": "us-east-1"}


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    # Each task may run twice: a failed first attempt is retried. A session another test
    # module left running has a master without retries: stopped first.
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    s = (SparkSession.builder.master("local[2,2]").appName("tensorsmith-s3-tests")
         .config("spark.ui.enabled", "false").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    tensorsmith.spark.register(s)
    yield s
    s.stop()


N = 90


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """pyarrow's defaults (snappy, dictionaries), several row groups."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((N, 4)).astype(np.float32)
    t = pa.table({
        "id": [f"k{i:03d}" for i in range(N)],
        "x": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 4).cast(
            pa.list_(pa.float32())),
    })
    p = tmp_path_factory.mktemp("in") / "in.parquet"
    pq.write_table(t, p, row_group_size=20)
    return p


def objects(s3, prefix):
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        out += [o["Key"][len(prefix):] for o in page.get("Contents", [])]
    return sorted(out)


def shard_objects(s3, prefix):
    return [k for k in objects(s3, prefix) if k.startswith("part-")]


def manifest_of(s3, prefix):
    body = s3.get_object(Bucket=BUCKET, Key=prefix + "dataset_manifest.json")["Body"].read()
    return json.loads(body)


def test_the_direct_path_writes_the_local_shards_to_s3(spark, src, s3, opts, tmp_path):
    kw = dict(batch_size=8, dtype="F32", columns=["x"], tasks=3)
    local = tensorsmith.spark.write_dataset(spark, str(src), str(tmp_path / "local"), **kw)
    remote = tensorsmith.spark.write_dataset(spark, str(src), f"s3://{BUCKET}/direct",
                                             storage_options=opts, **kw)
    assert remote.manifest["total_samples"] == local.manifest["total_samples"] == N
    m = manifest_of(s3, "direct/")
    names = [s["shard_path"] for s in m["shards"]]
    assert shard_objects(s3, "direct/") == sorted(names)
    for ours, theirs in zip(m["shards"], local.manifest["shards"]):
        got = s3.get_object(Bucket=BUCKET, Key="direct/" + ours["shard_path"])["Body"].read()
        assert got == (tmp_path / "local" / theirs["shard_path"]).read_bytes()
    assert not [k for k in objects(s3, "direct/") if k.startswith("_tensorsmith/jobs/")]
    # mode "error" sees the dataset on S3; "append" adds a version.
    with pytest.raises(FileExistsError):
        tensorsmith.spark.write_dataset(spark, str(src), f"s3://{BUCKET}/direct",
                                        storage_options=opts, **kw)
    more = tensorsmith.spark.write_dataset(spark, str(src), f"s3://{BUCKET}/direct",
                                           mode="append", storage_options=opts, **kw)
    assert more.manifest["total_samples"] == 2 * N
    ds = tensorsmith.Dataset(f"s3://{BUCKET}/direct", storage_options=opts)
    assert len(ds) == 2 * N


def test_the_direct_path_reads_parquet_on_s3(spark, src, s3, opts, tmp_path):
    # The input split in two objects under a prefix, beside a _SUCCESS marker.
    t = pq.read_table(src)
    for i, part in enumerate([t.slice(0, 50), t.slice(50)]):
        p = tmp_path / f"part-{i}.parquet"
        pq.write_table(part, p, row_group_size=20)
        s3.upload_file(str(p), BUCKET, f"in/part-{i}.parquet")
    s3.put_object(Bucket=BUCKET, Key="in/_SUCCESS", Body=b"")
    kw = dict(batch_size=8, dtype="F32", columns=["x"], tasks=3)
    local = tensorsmith.spark.write_dataset(
        spark, [str(tmp_path / "part-0.parquet"), str(tmp_path / "part-1.parquet")],
        str(tmp_path / "local"), **kw)
    r = tensorsmith.spark.write_dataset(spark, f"s3://{BUCKET}/in/", f"s3://{BUCKET}/s3in",
                                        storage_options=opts, **kw)
    assert len(r.timeline) == 3
    m = r.manifest
    assert m["total_samples"] == local.manifest["total_samples"] == N
    for ours, theirs in zip(m["shards"], local.manifest["shards"]):
        got = s3.get_object(Bucket=BUCKET, Key="s3in/" + ours["shard_path"])["Body"].read()
        assert got == (tmp_path / "local" / theirs["shard_path"]).read_bytes()
    # An input object that is not there is named, without the secret.
    with pytest.raises(tensorsmith.errors.TensorsmithError, match="s3://sparkds/in/nothing") as e:
        tensorsmith.spark.write_dataset(spark, f"s3://{BUCKET}/in/nothing.parquet",
                                        f"s3://{BUCKET}/none", storage_options=opts, **kw)
    assert SECRET not in str(e.value)


def test_the_session_settings_reach_the_tasks(spark, src, s3, opts):
    for k, v in opts.items():
        spark.conf.set(f"spark.tensorsmith.storage.{k}", v)
    try:
        r = tensorsmith.spark.write_dataset(spark, str(src), f"s3://{BUCKET}/conf",
                                            batch_size=10, dtype="F32", columns=["x"])
        # The data source takes them when registered; a `storage.KEY` option wins.
        tensorsmith.spark.register(spark, check=False)
        df = spark.read.parquet(str(src)).repartition(2)
        df.write.format("safetensors").mode("overwrite").option("batch_size", 9).option(
            "dtype", "F32").option("columns", "x").save(f"s3://{BUCKET}/conf-source")
        back = spark.read.format("safetensors").load(f"s3://{BUCKET}/conf-source")
        assert back.count() == N
        with pytest.raises(Exception, match="127.0.0.1:9") as e:
            spark.read.format("safetensors").option(
                "storage.endpoint_url", "http://127.0.0.1:9").option(
                "storage.max_attempts", "1").load(f"s3://{BUCKET}/conf-source").count()
        assert SECRET not in str(e.value)
    finally:
        for k in opts:
            spark.conf.unset(f"spark.tensorsmith.storage.{k}")
        tensorsmith.spark.register(spark, check=False)
    assert r.manifest["total_samples"] == N
    assert len(shard_objects(s3, "conf/")) == len(r.manifest["shards"]) == N // 10


def _storage_options(w, opts):
    for k, v in opts.items():
        w = w.option(f"storage.{k}", v)
    return w


def test_the_data_source_saves_and_loads_on_s3(spark, src, s3, opts):
    df = spark.read.parquet(str(src)).repartition(3)
    w = df.write.format("safetensors").mode("overwrite").option("batch_size", 5).option(
        "dtype", "F32").option("columns", "x")
    _storage_options(w, opts).save(f"s3://{BUCKET}/source")
    m = manifest_of(s3, "source/")
    assert m["total_samples"] == N
    assert shard_objects(s3, "source/") == sorted(s["shard_path"] for s in m["shards"])
    back = _storage_options(spark.read.format("safetensors"), opts).load(f"s3://{BUCKET}/source")
    got = sorted(tuple(r.x) for r in back.collect())
    want = sorted(tuple(np.float32(v) for v in row) for row in
                  pq.read_table(src).column("x").to_pylist())
    assert got == want
    # KV mode, read back a row per name.
    w = df.write.format("safetensors").mode("overwrite").option("name_col", "id").option(
        "dtype", "F32")
    _storage_options(w, opts).save(f"s3://{BUCKET}/kv")
    kv = _storage_options(spark.read.format("safetensors"), opts).load(f"s3://{BUCKET}/kv")
    assert sorted(r.key for r in kv.collect()) == [f"k{i:03d}" for i in range(N)]


def test_a_failing_job_leaves_no_object(spark, src, s3, opts):
    from pyspark.sql.functions import udf

    @udf("string")
    def bad(i):
        if i == "k077":
            raise ValueError("bad row k077")
        return i

    df = spark.read.parquet(str(src)).withColumn("id", bad("id")).repartition(2)
    w = df.write.format("safetensors").mode("overwrite").option("batch_size", 2).option(
        "dtype", "F32").option("columns", "x")
    with pytest.raises(Exception, match="bad row k077") as e:
        _storage_options(w, opts).save(f"s3://{BUCKET}/failed")
    assert SECRET not in str(e.value)
    assert objects(s3, "failed/") == []


def test_a_retried_task_leaves_only_the_committed_shards(spark, src, s3, opts, tmp_path):
    from pyspark import TaskContext
    from pyspark.sql.functions import udf

    # Partition 1's first attempt fails after some of its shards went up.
    @udf("string")
    def flaky(i):
        ctx = TaskContext.get()
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and i.endswith("9"):
            raise ValueError("first attempt fails")
        return i

    df = spark.read.parquet(str(src)).repartition(2).withColumn("id", flaky("id"))
    w = df.write.format("safetensors").mode("overwrite").option("batch_size", 2).option(
        "dtype", "F32").option("columns", "x")
    _storage_options(w, opts).save(f"s3://{BUCKET}/retried")
    m = manifest_of(s3, "retried/")
    assert m["total_samples"] == N
    assert shard_objects(s3, "retried/") == sorted(s["shard_path"] for s in m["shards"])
    assert not [k for k in objects(s3, "retried/") if k.startswith("_tensorsmith/jobs/")]


def test_attempts_of_a_job_on_s3_are_swept_and_a_late_one_is_refused(s3, opts):
    url = f"s3://{BUCKET}/attempts"
    pairs = sorted(opts.items())
    o = {"batch_size": "4", "dtype": "F32", "columns": "x"}
    t = pa.table({"x": pa.array([[float(i)] * 2 for i in range(8)], pa.list_(pa.float32()))})

    def task(job, n):
        return _native.write_job_task(t, url, job, n, o, pairs)

    beat = _native.JobHeartbeat(url, "job-a", pairs)
    first, lost, second = task("job-a", 0), task("job-a", 1), task("job-a", 1)
    assert len(shard_objects(s3, "attempts/")) == 6
    beat.stop()
    m = json.loads(_native.commit_job_reports(url, "job-a", [second, first], o, "append", pairs))
    assert m["total_samples"] == 16
    assert shard_objects(s3, "attempts/") == sorted(s["shard_path"] for s in m["shards"])
    assert json.loads(lost)["shards"][0]["shard_path"] not in shard_objects(s3, "attempts/")
    with pytest.raises(tensorsmith.errors.DatasetFailure, match="job job-a is not running") as e:
        task("job-a", 2)
    assert SECRET not in str(e.value)
    assert len(shard_objects(s3, "attempts/")) == 4
    # An aborted job: nothing of it stays, the committed version does.
    _native.JobHeartbeat(url, "job-b", pairs).stop()
    task("job-b", 0)
    _native.abort_job_shards(url, "job-b", pairs)
    assert shard_objects(s3, "attempts/") == sorted(s["shard_path"] for s in m["shards"])
    assert not [k for k in objects(s3, "attempts/") if k.startswith("_tensorsmith/jobs/")]
