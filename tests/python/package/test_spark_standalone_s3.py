"""Spark jobs on a standalone cluster (a master and a worker started from pyspark's jars on
127.0.0.1: executors in their own JVMs and Python workers, as on a real cluster), writing to
and reading from S3 (moto in server mode): the direct path writes the shards a local write
writes, the data source saves and loads, and nothing of either job is left outside the
committed version."""

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

KEY, SECRET = "AKIASTANDALONE", "standaloneSecretDoNotPrint/9"
BUCKET = "clusterds"
N = 64


@pytest.fixture(scope="module")
def s3():
    servers = local_servers.moto()
    url = next(servers)
    c = boto3.client("s3", endpoint_url=url, aws_access_key_id=KEY,
                     aws_secret_access_key=SECRET, region_name="us-east-1")
    c.create_bucket(Bucket=BUCKET)
    yield c, {"key": KEY, "secret": SECRET, "endpoint_url": url, "region": "us-east-1"}
    next(servers, None)


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    cluster = local_servers.spark_standalone(str(tmp_path_factory.mktemp("cluster")))
    master = next(cluster)
    s = (SparkSession.builder.master(master).appName("tensorsmith-standalone-s3")
         .config("spark.ui.enabled", "false").config("spark.executor.memory", "1g")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    tensorsmith.spark.register(s)
    yield s
    s.stop()
    next(cluster, None)


def objects(c, prefix):
    r = c.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"][len(prefix):] for o in r.get("Contents", []))


def test_direct_path_and_data_source_on_a_standalone_cluster(spark, s3, tmp_path):
    c, opts = s3
    rng = np.random.default_rng(5)
    x = rng.standard_normal((N, 6)).astype(np.float32)
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [f"k{i}" for i in range(N)],
                             "x": pa.array(list(x), pa.list_(pa.float32()))}),
                   src, row_group_size=16)
    kw = dict(batch_size=8, dtype="F32", columns=["x"], tasks=2)
    local = tensorsmith.spark.write_dataset(spark, str(src), str(tmp_path / "local"), **kw)
    r = tensorsmith.spark.write_dataset(spark, str(src), f"s3://{BUCKET}/direct",
                                        storage_options=opts, **kw)
    # The tasks ran in the executor's Python workers, not in this process.
    assert r.timeline and all(t["pid"] != os.getpid() for t in r.timeline)
    m = r.manifest
    assert m["total_samples"] == N
    assert [k for k in objects(c, "direct/") if k.startswith("part-")] == sorted(
        s["shard_path"] for s in m["shards"])
    assert not [k for k in objects(c, "direct/") if k.startswith("_tensorsmith/jobs/")]
    for ours, theirs in zip(m["shards"], local.manifest["shards"]):
        got = c.get_object(Bucket=BUCKET, Key="direct/" + ours["shard_path"])["Body"].read()
        assert got == (tmp_path / "local" / theirs["shard_path"]).read_bytes()
    # The data source: save from a DataFrame, load back.
    df = spark.createDataFrame([(f"k{i}", [float(v) for v in x[i]]) for i in range(N)],
                               "id string, x array<float>").repartition(2)
    w = df.write.format("safetensors").mode("overwrite").option("batch_size", 4).option(
        "dtype", "F32").option("columns", "x")
    for k, v in opts.items():
        w = w.option(f"storage.{k}", v)
    w.save(f"s3://{BUCKET}/source")
    body = c.get_object(Bucket=BUCKET, Key="source/dataset_manifest.json")["Body"].read()
    assert json.loads(body)["total_samples"] == N
    rd = spark.read.format("safetensors")
    for k, v in opts.items():
        rd = rd.option(f"storage.{k}", v)
    got = sorted(tuple(r.x) for r in rd.load(f"s3://{BUCKET}/source").collect())
    assert got == sorted(tuple(np.float32(v) for v in row) for row in x)
    assert not [k for k in objects(c, "source/") if k.startswith("_tensorsmith/jobs/")]
