"""`tensorsmith.spark.write_dataset`, the direct path for Parquet input (local[2]): Spark only
schedules, each task runs the Rust Parquet -> shard writer on its rows, and the dataset is
byte for byte the one `tensorsmith dataset write` writes; what is not a plain Parquet scan
falls back to the data source with a warning; a failing task leaves nothing."""

import json
import os
import sys
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pyspark = pytest.importorskip("pyspark")

import tensorsmith  # noqa: E402
import tensorsmith.spark  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (SparkSession.builder.master("local[2]").appName("tensorsmith-direct-tests")
         .config("spark.ui.enabled", "false").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    tensorsmith.spark.register(s)
    yield s
    s.stop()


N = 103


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """pyarrow's defaults (snappy, dictionaries), several row groups; an id column beside."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, 5)).astype(np.float32)
    t = pa.table({
        "id": [f"k{i:03d}" for i in range(N)],
        "x": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 5).cast(pa.list_(pa.float32())),
        "y": pa.array([[float(i % 3), 1.0] for i in range(N)], pa.list_(pa.float64())),
    })
    p = tmp_path_factory.mktemp("in") / "in.parquet"
    pq.write_table(t, p, row_group_size=17)
    return p


def shards(path):
    m = json.loads((path / "dataset_manifest.json").read_text())
    return m, [(path / s["shard_path"]).read_bytes() for s in m["shards"]]


def same_as_cli(direct, cli):
    (md, bd), (mc, bc) = shards(direct), shards(cli)
    assert bd == bc
    strip = lambda m: {**m, "shards": [{**s, "shard_path": None} for s in m["shards"]]}  # noqa: E731
    assert strip(md) == strip(mc)


def test_paths_give_the_cli_dataset_byte_for_byte(spark, src, tsm, tmp_path):
    r = tensorsmith.spark.write_dataset(spark, [str(src)], tmp_path / "d", batch_size=10,
                                        dtype="F16", columns="x,y", tasks=3)
    assert [t["task"] for t in r.timeline] == [0, 1, 2]
    assert r.timeline[0]["rows"] == [0, 30] and r.timeline[-1]["rows"][1] == N
    assert r.manifest["total_samples"] == N
    assert {s["shard_path"].split("-")[1] for s in r.manifest["shards"]} == {"00000", "00001", "00002"}
    assert not [n for n in os.listdir(tmp_path / "d") if n.startswith("_tensorsmith_job")]
    tsm.run("dataset", "write", src, tmp_path / "c", "--batch-size", "10", "--dtype", "F16",
            "--columns", "x,y")
    same_as_cli(tmp_path / "d", tmp_path / "c")


def test_a_selection_of_a_parquet_scan_is_direct_and_kv_mode_too(spark, src, tsm, tmp_path):
    df = spark.read.parquet(str(src)).select("id", "x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = tensorsmith.spark.write_dataset(spark, df, tmp_path / "d", name_col="id",
                                            dtype="F32", generate_index=True)
    assert r is not None and len(r.manifest["schema"]) == N
    tsm.run("dataset", "write", src, tmp_path / "c", "--name-col", "id", "--columns", "x",
            "--dtype", "F32", "--generate-index")
    same_as_cli(tmp_path / "d", tmp_path / "c")
    ds = tensorsmith.Dataset(tmp_path / "d")
    np.testing.assert_array_equal(ds["k005__x"], pq.read_table(src)["x"][5].as_py())
    # Batch mode on the whole scan, then overwrite and append.
    out = tmp_path / "b"
    whole = spark.read.parquet(str(src))
    with pytest.raises(tensorsmith.errors.TensorsmithError, match="dtype"):  # on the driver
        tensorsmith.spark.write_dataset(spark, whole.select("y"), out, batch_size=50)
    assert not os.path.exists(out / "dataset_manifest.json")
    tensorsmith.spark.write_dataset(spark, whole.select("y"), out, batch_size=50, dtype="F32")
    with pytest.raises(tensorsmith.errors.DatasetExists):
        tensorsmith.spark.write_dataset(spark, whole.select("y"), out, batch_size=50, dtype="F32")
    tensorsmith.spark.write_dataset(spark, whole.select("y"), out, mode="append", batch_size=50,
                                    dtype="F32")
    assert len(tensorsmith.Dataset(out)) == 2 * N
    tensorsmith.spark.write_dataset(spark, whole.select("y"), out, mode="overwrite", batch_size=50,
                                    dtype="F32")
    assert len(tensorsmith.Dataset(out)) == N
    # The overwritten shards are retired (kept for readers of older versions), listed no more.
    assert len(tensorsmith.Dataset(out).manifest()["shards"]) == 3
    assert len([n for n in os.listdir(out) if n.endswith(".safetensors")]) == 3 + 6


def test_other_plans_and_schemes_fall_back_with_the_reason(spark, src, tmp_path):
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(src)).filter(F.col("id") != "k000").select("x")
    with pytest.warns(UserWarning, match="not the direct path.*Filter"):
        assert tensorsmith.spark.write_dataset(spark, df, tmp_path / "f", batch_size=10,
                                                  dtype="F32") is None
    assert len(tensorsmith.Dataset(tmp_path / "f")) == N - 1
    computed = spark.read.parquet(str(src)).select((F.col("y")).alias("z"))
    with pytest.warns(UserWarning, match="not the direct path"):
        tensorsmith.spark.write_dataset(spark, computed, tmp_path / "g", batch_size=10, dtype="F32")
    # s3a:// and the other object-store schemes are read directly (test_spark_s3.py); a
    # scheme tensorsmith does not read falls back, saying which.
    with pytest.warns(UserWarning, match="hdfs://"), pytest.raises(Exception):
        tensorsmith.spark.write_dataset(spark, "hdfs://nowhere/in.parquet", tmp_path / "s",
                                        batch_size=10)


def test_a_failing_task_leaves_no_dataset_and_no_shards(spark, tmp_path):
    # Task 1's rows hold a sample of another length: it fails; the job is aborted.
    rows = [[1.0, 2.0]] * 30 + [[1.0]] + [[1.0, 2.0]] * 9
    src = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"x": pa.array(rows, pa.list_(pa.float32()))}), src, row_group_size=8)
    out = tmp_path / "o"
    with pytest.raises(Exception, match="row 30"):
        tensorsmith.spark.write_dataset(spark, src, out, batch_size=4, tasks=2, dtype="F32")
    # At most the dataset's own folder is left: an empty lock file, and the folder jobs keep
    # their heartbeats in, empty once the job has ended.
    assert os.listdir(out) in ([], ["_tensorsmith"])
    meta = out / "_tensorsmith"
    assert not meta.is_dir() or set(os.listdir(meta)) <= {"lock", "jobs"}
    assert not (meta / "jobs").is_dir() or os.listdir(meta / "jobs") == []


def test_a_hive_partitioned_folder_is_refused_by_name(spark, tmp_path):
    # key=value subfolders: the partition column lives in folder names, not in the files;
    # the direct path refuses the folder as `tensorsmith dataset write` does (not "no input
    # files", which the folder's top level alone would say).
    t = pa.table({"part": ["a"] * 4 + ["b"] * 4,
                  "x": pa.array([[float(i), 1.0] for i in range(8)], pa.list_(pa.float32()))})
    hive = tmp_path / "hive"
    pq.write_to_dataset(t, hive, partition_cols=["part"])
    assert sorted(os.listdir(hive)) == ["part=a", "part=b"]
    with pytest.raises(tensorsmith.errors.TensorsmithError, match="Hive-partitioned.*part=") as e:
        tensorsmith.spark.write_dataset(spark, str(hive), tmp_path / "o", batch_size=2,
                                        dtype="F32")
    assert "no input files" not in str(e.value)
    assert not os.path.exists(tmp_path / "o" / "dataset_manifest.json")
    # A plain folder of Parquet files is still listed (by name, `_` and `.` names skipped).
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(t.slice(0, 4).drop(["part"]), plain / "a.parquet")
    pq.write_table(t.slice(4).drop(["part"]), plain / "b.parquet")
    (plain / "_SUCCESS").write_text("")
    r = tensorsmith.spark.write_dataset(spark, str(plain), tmp_path / "p", batch_size=2,
                                        dtype="F32")
    assert r.manifest["total_samples"] == 8


def test_tail_strategy_drop_returns_the_rows_each_task_dropped(spark, src, tmp_path):
    # Ranges start on batch boundaries: only the last task has a partial batch (103 rows,
    # batches of 10: 3 rows), dropped and counted.
    r = tensorsmith.spark.write_dataset(spark, [str(src)], tmp_path / "d", batch_size=10,
                                        dtype="F32", columns="x", tasks=3, tail_strategy="drop")
    assert r.manifest["total_samples"] == 100
    assert r.dropped == {0: 0, 1: 0, 2: 3}
    assert [t["dropped"] for t in r.timeline] == [0, 0, 3]
    plain = tensorsmith.spark.write_dataset(spark, [str(src)], tmp_path / "w", batch_size=10,
                                            dtype="F32", columns="x", tasks=3)
    assert plain.manifest["total_samples"] == N and plain.dropped == {}
