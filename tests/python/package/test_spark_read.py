"""The Spark reader's Arrow batches (tensorsmith.spark_read), built from a shard's memory:
KV rows of any shape with missing tensors as nulls, batches bounded in bytes and rows, batch
mode chunks; and the `columns` read option in a real session."""

import os
import sys

import numpy as np
import pyarrow as pa
import pytest
import safetensors.numpy

pytest.importorskip("pyspark")

import tensorsmith  # noqa: E402
import tensorsmith.spark  # noqa: E402
from tensorsmith import _shard_arrow, spark_read  # noqa: E402


def kv_shard(tmp_path):
    t = {
        "b__x": np.arange(6, dtype=np.float32).reshape(2, 3),
        "a__x": np.full((1, 2), 7, dtype=np.float32),
        "a__y": np.array([1, 2, 3], dtype=np.int16),
        "c__y": np.array([], dtype=np.int16),
        "d__x": np.zeros((0, 4), dtype=np.float32),
        "e__y": np.array([5], dtype=np.int16),
    }
    p = tmp_path / "s.safetensors"
    safetensors.numpy.save_file(t, str(p))
    return p, t


SCHEMA = pa.schema([pa.field("key", pa.string(), False),
                    pa.field("x", pa.list_(pa.field("item", pa.list_(pa.field("item", pa.float32(), False)), False))),
                    pa.field("y", pa.list_(pa.field("item", pa.int16(), False)))])


def rows_of(batches):
    return [r for b in batches for r in pa.Table.from_batches([b]).to_pylist()]


def test_kv_rows_of_any_shape_with_missing_tensors_null(tmp_path):
    p, t = kv_shard(tmp_path)
    with tensorsmith.safe_open(str(p), framework="np") as f:
        got = rows_of(spark_read.kv_rows(f, SCHEMA, "__", "key"))
    want = []
    for name in "abcde":
        x, y = t.get(f"{name}__x"), t.get(f"{name}__y")
        want.append({"key": name, "x": None if x is None else x.tolist(),
                     "y": None if y is None else y.tolist()})
    assert got == want


@pytest.mark.parametrize("chunk_bytes,chunk_rows,sizes", [
    (1, 4096, [1, 1, 3]),  # a batch ends at the row that reaches the bytes (c, d: no bytes)
    (1 << 20, 2, [2, 2, 1]), (1 << 20, 4096, [5])])
def test_kv_batches_are_bounded_and_give_the_same_rows(tmp_path, monkeypatch, chunk_bytes, chunk_rows,
                                                       sizes):
    p, _ = kv_shard(tmp_path)
    with tensorsmith.safe_open(str(p), framework="np") as f:
        whole = rows_of(spark_read.kv_rows(f, SCHEMA, "__", "key"))
        monkeypatch.setattr(_shard_arrow, "CHUNK_BYTES", chunk_bytes)
        monkeypatch.setattr(_shard_arrow, "CHUNK_ROWS", chunk_rows)
        batches = list(spark_read.kv_rows(f, SCHEMA, "__", "key"))
        # Only the asked-for columns are built: y alone.
        pruned = rows_of(spark_read.kv_rows(f, pa.schema([SCHEMA.field("key"), SCHEMA.field("y")]), "__", "key"))
    assert rows_of(batches) == whole
    assert [b.num_rows for b in batches] == sizes
    assert pruned == [{"key": r["key"], "y": r["y"]} for r in whole]


def test_batch_rows_are_chunked_by_bytes(tmp_path, monkeypatch):
    x = np.arange(40 * 6, dtype=np.float32).reshape(40, 2, 3)
    p = tmp_path / "b.safetensors"
    safetensors.numpy.save_file({"x": x}, str(p))
    schema = pa.schema([pa.field("x", pa.list_(pa.list_(pa.float32())))])
    monkeypatch.setattr(_shard_arrow, "CHUNK_BYTES", 24 * 7)  # 7 rows of 24 bytes
    with tensorsmith.safe_open(str(p), framework="np") as f:
        batches = list(spark_read.batch_rows(f, schema))
    assert [b.num_rows for b in batches] == [7] * 5 + [5]
    assert [r["x"] for r in rows_of(batches)] == x.tolist()


def test_the_columns_read_option_reads_only_those_columns(tmp_path):
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("tensorsmith-read-tests")
             .config("spark.ui.enabled", "false").getOrCreate())
    tensorsmith.spark.register(spark)
    t = pa.table({"id": [f"r{i}" for i in range(9)],
                  "x": pa.array([[float(i)] * 3 for i in range(9)], pa.list_(pa.float32())),
                  "y": pa.array([[i, -i] for i in range(9)], pa.list_(pa.int64()))})
    tensorsmith.write_dataset(t, tmp_path / "b", batch_size=4, dtype="F32", columns="x,y")
    tensorsmith.write_dataset(t, tmp_path / "k", name_col="id", dtype="F64")
    df = spark.read.format("safetensors").option("columns", "y").load(str(tmp_path / "b"))
    assert df.columns == ["y"]
    assert sorted(r.y for r in df.collect()) == sorted([float(i), float(-i)] for i in range(9))
    kv = spark.read.format("safetensors").option("columns", "x").load(str(tmp_path / "k"))
    assert kv.columns == ["key", "x"]
    assert sorted((r.key, r.x) for r in kv.collect()) == [(f"r{i}", [float(i)] * 3) for i in range(9)]
    # A schema given by the caller prunes the same way.
    s = spark.read.format("safetensors").schema("x array<float>").load(str(tmp_path / "b"))
    assert s.count() == 9 and s.columns == ["x"]
    with pytest.raises(Exception, match="nope"):
        spark.read.format("safetensors").option("columns", "nope").load(str(tmp_path / "b")).columns


def test_name_col_naming_a_tensor_column_is_a_clear_error(tmp_path):
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("tensorsmith-read-tests")
             .config("spark.ui.enabled", "false").getOrCreate())
    tensorsmith.spark.register(spark)
    t = pa.table({"id": [f"r{i}" for i in range(5)],
                  "x": pa.array([[float(i)] * 3 for i in range(5)], pa.list_(pa.float32()))})
    tensorsmith.write_dataset(t, tmp_path / "k", name_col="id", dtype="F32")
    # "x" is the dataset's tensor column: the option and the column are named (not pyarrow's
    # "Unsupported cast from string to list" from inside a task).
    with pytest.raises(Exception, match=r"name_col: 'x' is a tensor column") as e:
        spark.read.format("safetensors").option("name_col", "x").load(str(tmp_path / "k")).collect()
    assert "Unsupported cast" not in str(e.value)
    ok = spark.read.format("safetensors").option("name_col", "id").load(str(tmp_path / "k"))
    assert sorted(r.id for r in ok.collect()) == [f"r{i}" for i in range(5)]


@pytest.mark.parametrize("index", [True, False])
def test_kv_reads_of_some_keys_read_only_their_shards(tmp_path, index):
    """The `keys` option and a pushed-down filter on the name column: the rows of those names,
    and only the shards holding them are opened (the others are removed to prove it)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("tensorsmith-read-tests")
             .config("spark.ui.enabled", "false").getOrCreate())
    tensorsmith.spark.register(spark)
    n = 3
    t = pa.table({"id": [f"r{i}" for i in range(6)],
                  "x": pa.array([np.full(n, i, np.float32) for i in range(6)], pa.list_(pa.float32()))})
    d = tmp_path / "k"
    # Three writes, three shards (two names each).
    for i in range(0, 6, 2):
        tensorsmith.write_dataset(t.slice(i, 2), d, mode="append", threads=1, name_col="id",
                                  dtype="F32", generate_index=index)
    m = tensorsmith.spark._Manifest(str(d))
    assert len(m.m["shards"]) == 3
    holding = {}
    for s in m.shards():
        with tensorsmith.safe_open(s, framework="np") as f:
            for k in f.keys():
                holding[k.split("__")[0]] = s
    for s in m.shards():
        if s not in (holding["r1"], holding["r4"]):
            os.remove(s)

    def rows(df):
        return sorted((r.key, r.x[0], len(r.x)) for r in df.collect())

    want = [("r1", 1.0, n), ("r4", 4.0, n)]

    def load():  # a fresh reader each time: option() changes the reader it is called on
        return spark.read.format("safetensors")

    if index:
        assert rows(load().option("keys", "r1, r4").load(str(d))) == want
        # A full tensor key selects its name's row, as `dataset export --key` takes both.
        assert rows(load().option("keys", "r1__x,r4").load(str(d))) == want
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        try:
            def pushed():
                return load().option("filter_pushdown", "true")

            assert rows(pushed().load(str(d)).filter(col("key").isin("r1", "r4"))) == want
            assert rows(pushed().load(str(d)).filter(col("key") == "r4")) == want[1:]
            assert rows(pushed().load(str(d)).filter(col("key") == "nope")) == []
            # Not pushed down: every shard is read, and two are gone.
            with pytest.raises(Exception):
                load().load(str(d)).filter(col("key") == "r4").collect()
        finally:
            spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    else:
        # Without the index the headers say where the keys are: every shard is needed.
        with pytest.raises(Exception):
            load().option("keys", "r1,r4").load(str(d)).collect()
    tensorsmith.write_dataset(t, tmp_path / "b", batch_size=2, dtype="F32", columns="x")
    with pytest.raises(Exception, match="only a KV dataset"):
        spark.read.format("safetensors").option("keys", "r1").load(str(tmp_path / "b")).collect()
