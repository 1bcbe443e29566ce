"""The "safetensors" Spark data source in a real local session (local[2], the machine's
Java 17): every write option, both modes, round trips, a failing job that leaves nothing,
overwrite and append, and the connector's one-row-per-file read shape."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import safetensors.numpy

pyspark = pytest.importorskip("pyspark")

import tensorsmith  # noqa: E402
import tensorsmith.spark  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (SparkSession.builder.master("local[2]").appName("tensorsmith-tests")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    tensorsmith.spark.register(s)
    yield s
    s.stop()


N = 20


@pytest.fixture(scope="module")
def df(spark):
    rows = [(f"s{i:02d}", [float(i) + j / 8 for j in range(6)], [[float(i)] * 3, [-float(i)] * 3], [i, -i])
            for i in range(N)]
    return spark.createDataFrame(rows, "id string, x array<float>, y array<array<double>>, n array<long>"
                                 ).repartition(2).cache()


def manifest(path):
    with open(os.path.join(path, "dataset_manifest.json")) as f:
        return json.load(f)


def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def write(df, path, mode="append", **options):
    w = df.write.format("safetensors").mode(mode)
    for k, v in options.items():
        w = w.option(k, v)
    w.save(str(path))


def test_batch_write_round_trips_and_shards_carry_task_ids(df, spark, tmp_path):
    out = tmp_path / "b"
    write(df, out, batch_size=5, dtype="F64", columns="x,y,n", generate_index="true")
    m = manifest(out)
    assert m["total_samples"] == N
    assert m["schema"] == {"x": {"dtype": "F64", "shape": [5, 6]}, "y": {"dtype": "F64", "shape": [5, 2, 3]},
                           "n": {"dtype": "F64", "shape": [5, 2]}}
    names = [s["shard_path"] for s in m["shards"]]
    assert {n.split("-")[1] for n in names} == {"00000", "00001"}  # the Spark partition ids
    assert "_tensor_index.parquet" in listing(out)
    assert not [n for n in listing(out) if n.startswith("_tensorsmith_job")]
    # Shards are plain safetensors the reference reads.
    total = sum(safetensors.numpy.load_file(str(out / n))["x"].shape[0] for n in names)
    assert total == N
    back = spark.read.format("safetensors").load(str(out))
    # Small shards share a read partition (up to 128 MiB of shards each).
    assert back.rdd.getNumPartitions() == 1
    parts = tensorsmith.spark._group([str(out / n) for n in names], limit=2 * os.path.getsize(out / names[0]))
    assert [len(p.paths) for p in parts] == [2, 2]
    # Columns come in the manifest's (sorted) order.
    assert [f.name for f in back.schema.fields] == ["n", "x", "y"]
    got = sorted((r.x, r.y, r.n) for r in back.collect())
    want = sorted(([float(v) for v in r.x], [list(map(float, a)) for a in r.y], [float(v) for v in r.n])
                  for r in df.collect())
    assert got == want
    # The Rust reader and verify agree.
    assert len(tensorsmith.Dataset(out)) == N


def test_kv_mode_round_trip_gives_the_original_dataframe(df, spark, tmp_path):
    out = tmp_path / "kv"
    write(df, out, name_col="id", dtype="F32", columns="x,y", kv_separator="::", generate_index="true")
    m = manifest(out)
    assert len(m["schema"]) == 2 * N and "s03::x" in m["schema"]
    back = spark.read.format("safetensors").option("kv_separator", "::").option("name_col", "id").load(str(out))
    assert back.count() == N
    orig = {r.id: (r.x, [list(map(float, a)) for a in r.y]) for r in df.collect()}
    for r in back.collect():
        assert r.x == pytest.approx(orig[r.id][0]) and r.y == orig[r.id][1]
    ds = tensorsmith.Dataset(out)
    assert ds.mode == "kv" and len(ds) == 2 * N
    np.testing.assert_allclose(ds["s04::x"], orig["s04"][0])


def test_rows_file_gives_the_connector_shape(df, spark, tmp_path):
    out = tmp_path / "f"
    write(df, out, batch_size=10, dtype="F16", columns="x", f16_rounding="truncate")
    files = spark.read.format("safetensors").option("rows", "file").load(str(out))
    assert [f.name for f in files.schema.fields] == ["x"]
    rows = files.collect()
    assert len(rows) == len(manifest(out)["shards"])
    for r in rows:
        assert r.x.dtype == "F16" and r.x.shape == [10, 6] and len(r.x.data) == 10 * 6 * 2


def test_options_tail_shapes_and_shard_size(df, spark, tmp_path):
    # 20 rows in 2 tasks of 10: batch_size 4 leaves a tail of 2 in each task.
    for tail, per_task in (("drop", 8), ("pad", 12), ("write", 10)):
        out = tmp_path / tail
        write(df.coalesce(2), out, batch_size=4, dtype="F32", columns="x", tail_strategy=tail)
        assert manifest(out)["total_samples"] in (2 * per_task, per_task + 10, N)
        if tail == "drop":
            assert manifest(out)["total_samples"] % 4 == 0
    out = tmp_path / "shapes"
    write(df, out, batch_size=5, dtype="F32", columns="x", shapes='{"x": [2, 3]}', target_shard_size_mb=50)
    assert manifest(out)["schema"]["x"]["shape"] == [5, 2, 3]


_DROP_JOB = r"""
import os, sys
from pyspark.sql import SparkSession
import tensorsmith.spark
os.environ["PYSPARK_PYTHON"] = sys.executable
s = (SparkSession.builder.master("local[2]").appName("tensorsmith-drop")
     .config("spark.ui.enabled", "false").getOrCreate())
s.sparkContext.setLogLevel("ERROR")
tensorsmith.spark.register(s)
rdd = s.sparkContext.parallelize([([float(i)],) for i in range(10)], 3)  # 3, 3 and 4 rows
df = s.createDataFrame(rdd, "x array<float>")
(df.write.format("safetensors").mode("append").option("batch_size", 4).option("dtype", "F32")
 .option("tail_strategy", "drop").save(sys.argv[1]))
s.stop()
"""


def test_tail_strategy_drop_says_how_many_rows_each_task_dropped(tmp_path):
    # The connector's behaviour, kept: each task drops its own partial batch (10 rows in 3
    # partitions of 3, 3 and 4 keep 4), but every task's log says how many it dropped and the
    # driver's commit sums them up, task by task. A job of its own, to read its log.
    import subprocess

    out = tmp_path / "drop"
    p = subprocess.run([sys.executable, "-c", _DROP_JOB, str(out)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert p.returncode == 0, p.stderr[-4000:]
    assert manifest(out)["total_samples"] == 4
    log = p.stderr
    assert "task 0 dropped its last 3 row(s) (tail_strategy=drop" in log, log[-4000:]
    assert "task 1 dropped its last 3 row(s)" in log, log[-4000:]
    assert "task 2 dropped" not in log
    assert ("tail_strategy=drop: 6 row(s) dropped in all (task 0: 3, task 1: 3, task 2: 0)"
            in log), log[-4000:]


def test_unknown_option_fails_before_any_task(df, tmp_path):
    out = tmp_path / "bad"
    with pytest.raises(Exception, match="unknown option"):
        write(df, out, batch_size=5, dtype="F32", batchsize=3)
    assert listing(out) == []


def test_a_failing_task_leaves_no_manifest_and_no_shards(spark, tmp_path):
    # Partition 1 holds a ragged row: its task fails, the job aborts.
    rows = [([1.0, 2.0],)] * 6 + [([1.0],)]
    df = spark.createDataFrame(rows, "x array<double>").coalesce(1).union(
        spark.createDataFrame([([3.0, 4.0],)] * 6, "x array<double>").coalesce(1))
    out = tmp_path / "fail"
    with pytest.raises(Exception):
        write(df.repartition(2), out, batch_size=1, dtype="F64")
    assert "dataset_manifest.json" not in listing(out)
    assert not [n for n in listing(out) if n.endswith(".safetensors") or n.startswith("_tensorsmith_")]
    # At most the dataset's own folder is left: an empty lock file, and the folder jobs keep
    # their heartbeats in, empty once the job has ended.
    assert set(listing(out / "_tensorsmith")) <= {"lock", "jobs"}
    if "jobs" in listing(out / "_tensorsmith"):
        assert listing(out / "_tensorsmith" / "jobs") == []


def test_kv_duplicates_across_tasks(spark, tmp_path):
    rows = [("k", [float(i)]) for i in range(4)]
    df = spark.createDataFrame(rows, "id string, v array<double>").repartition(2)
    with pytest.raises(Exception, match="k__v"):
        write(df, tmp_path / "dup", name_col="id", dtype="F64")
    assert "dataset_manifest.json" not in listing(tmp_path / "dup")
    write(df, tmp_path / "last", name_col="id", dtype="F64", duplicatesStrategy="lastWin")
    m = manifest(tmp_path / "last")
    assert list(m["schema"]) == ["k__v"]
    assert len(tensorsmith.Dataset(tmp_path / "last")) == 1


def test_overwrite_and_append(df, spark, tmp_path):
    out = tmp_path / "oa"
    write(df, out, batch_size=5, dtype="F32", columns="x")
    first = set(listing(out))
    write(df, out, batch_size=5, dtype="F32", columns="x")  # append
    assert manifest(out)["total_samples"] == 2 * N
    assert first < set(listing(out))
    write(df.limit(5), out, mode="overwrite", batch_size=5, dtype="F32", columns="x")
    m = manifest(out)
    assert m["total_samples"] == 5
    # The old shards are retired (kept for readers of the old version), listed no more.
    assert not first & {s["shard_path"] for s in m["shards"]}
    assert first - {"dataset_manifest.json"} < set(listing(out))
    assert spark.read.format("safetensors").load(str(out)).count() == 5
    with pytest.raises(Exception, match="Append|Overwrite"):
        write(df, out, mode="error", batch_size=5, dtype="F32", columns="x")


def test_parquet_spark_writes_passes_the_precheck(df, spark, tsm, tmp_path):
    # Spark's own Parquet writer (parquet-java): its footers and page headers pass the Thrift
    # pre-check of `dataset write`, with columns of other types beside the tensor column.
    from pyspark.sql import functions as F

    src = tmp_path / "spark.parquet"
    more = (df.withColumn("ts", F.timestamp_seconds(F.lit(1_700_000_000)))
            .withColumn("d", F.to_date(F.lit("2024-02-29")))
            .withColumn("dec", F.lit(12.5).cast("decimal(20,3)"))
            .withColumn("m", F.create_map(F.col("id"), F.lit(1)))
            .withColumn("b", F.lit(True)).withColumn("i8", F.lit(3).cast("tinyint")))
    more.coalesce(1).orderBy("id").write.option("compression", "zstd").parquet(str(src))
    (part,) = [p for p in src.iterdir() if p.suffix == ".parquet"]
    tsm.run("dataset", "write", part, tmp_path / "out", "--batch-size", "5", "--columns", "x",
            "--dtype", "F32")
    got = np.concatenate([safetensors.numpy.load_file(str(tmp_path / "out" / s["shard_path"]))["x"]
                          for s in manifest(tmp_path / "out")["shards"]])
    want = np.array([[float(i) + j / 8 for j in range(6)] for i in range(N)], dtype=np.float32)
    np.testing.assert_array_equal(got, want)


class _Conf:
    def __init__(self, values):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


class _FakeSpark:
    def __init__(self, **conf):
        self.conf = _Conf(conf)


def test_workers_that_cannot_import_tensorsmith_fail_early_with_the_fix(monkeypatch):
    from tensorsmith.spark import check_workers

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    # This interpreter has tensorsmith: nothing to say.
    check_workers(_FakeSpark(**{"spark.pyspark.python": sys.executable, "spark.master": "local[2]"}))
    # The venv's base interpreter, run directly, does not see the venv's packages.
    base = os.path.realpath(sys.executable)
    if base != sys.executable:
        with pytest.raises(RuntimeError) as e:
            check_workers(_FakeSpark(**{"spark.pyspark.python": base, "spark.master": "local[2]"}))
        msg = str(e.value)
        assert "cannot import tensorsmith" in msg and "PYSPARK_PYTHON=" + sys.executable in msg
        assert "spark.pyspark.python" in msg
    # A worker interpreter that does not exist on a local master; PYSPARK_PYTHON is read too.
    monkeypatch.setenv("PYSPARK_PYTHON", "/nonexistent/python3")
    with pytest.raises(RuntimeError, match="does not exist here"):
        check_workers(_FakeSpark(**{"spark.master": "local[*]"}))
    # On a cluster, a path the driver does not have is not the driver's to judge.
    check_workers(_FakeSpark(**{"spark.master": "spark://somewhere:7077"}))


def test_register_judges_the_interpreter_the_workers_really_run():
    # `.config("spark.pyspark.python", ...)` on the builder of a running Python puts the path in
    # the conf, but PySpark took the workers' interpreter from $PYSPARK_PYTHON (unset: python3)
    # when the context started. register() used to read the conf, say nothing, and the first
    # job failed deep in Java with ModuleNotFoundError; it must refuse, with the fix.
    code = """
import sys
from pyspark.sql import SparkSession
import tensorsmith.spark
spark = (SparkSession.builder.master("local[1]")
         .config("spark.pyspark.python", sys.executable).getOrCreate())
print("WORKERS", spark.sparkContext.pythonExec)
try:
    tensorsmith.spark.register(spark)
    print("REGISTERED")
except RuntimeError as e:
    print("REFUSED", e)
"""
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    # The `python3` the workers would run is the system's, not this venv's.
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not os.path.realpath(p).startswith(os.path.realpath(sys.prefix)))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert "WORKERS python3" in p.stdout, p.stdout + p.stderr[-3000:]
    assert "REFUSED" in p.stdout and "PYSPARK_PYTHON=" + sys.executable in p.stdout, p.stdout
