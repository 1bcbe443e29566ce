"""`tensorsmith dataset write` against the reference `safetensors` package, NumPy and the
manifest JSON schema (validated by the `jsonschema` package): every option, both modes,
tail and duplicate strategies, conversions, errors that name the row, overwrite and append."""

import glob
import json
import pathlib

import jsonschema
import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy for the reference loader)
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from safetensors.numpy import load_file

SCHEMA = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "crates" / "tensorsmith-dataset" / "schemas"
     / "manifest-jsonschema.json").read_text()
)


def manifest(out):
    m = json.loads((out / "dataset_manifest.json").read_text())
    jsonschema.validate(m, SCHEMA)
    # totals are what is on disk
    assert m["total_bytes"] == sum((out / s["shard_path"]).stat().st_size for s in m["shards"])
    assert m["total_samples"] == sum(s["samples_count"] for s in m["shards"])
    # Row order: one write's shards sort by path (input order); an append's follow the base's.
    paths = [s["shard_path"] for s in m["shards"]]
    assert len(set(paths)) == len(paths)
    # Every listed shard is on disk; others are shards an overwrite retired (kept for readers
    # pinned to an older version until `dataset clean`).
    assert {s["shard_path"] for s in m["shards"]} <= {p.name for p in out.glob("*.safetensors")}
    return m


def only_lock_left(out):
    """A failed first write leaves nothing but the dataset's own folder: the lock (an empty
    file) and the folder its writers' jobs keep their heartbeats in, empty once they end."""
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    if left not in ([], ["_tensorsmith"]):
        return False
    meta = out / "_tensorsmith"
    inside = sorted(p.name for p in meta.iterdir()) if left else []
    jobs_empty = not (meta / "jobs").exists() or not any((meta / "jobs").iterdir())
    return set(inside) <= {"lock", "jobs"} and jobs_empty


def shards(out):
    return [load_file(str(out / s["shard_path"])) for s in manifest(out)["shards"]]


def table(n=10, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = rng.standard_normal((n, 2, 3))
    lab = rng.integers(-(2**62), 2**62, size=(n, 1), dtype=np.int64)
    return {
        "x": x, "y": y, "lab": lab, "ids": [f"s{i}" for i in range(n)],
    }, pa.table({
        "x": pa.array(list(x), type=pa.list_(pa.float32())),
        "y": pa.array([list(map(list, r)) for r in y], type=pa.list_(pa.list_(pa.float64(), 3), 2)),
        "lab": pa.array(list(lab), type=pa.large_list(pa.int64())),
        "id": [f"s{i}" for i in range(n)],
    })


def write(tsm, tmp_path, tbl, *opts, name="in.parquet", out="out", expect=0, row_group_size=3):
    src = tmp_path / name
    pq.write_table(tbl, src, row_group_size=row_group_size)
    p = tsm.run("dataset", "write", src, tmp_path / out, *opts, expect=expect)
    return tmp_path / out, p


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("tail,expect_rows", [("write", 10), ("drop", 8), ("pad", 12)])
def test_batch_mode_values_and_tails(tsm, tmp_path, threads, tail, expect_rows):
    want, tbl = table()
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "4", "--dtype", "F64", "--columns", "x,y,lab",
                   "--tail-strategy", tail, "--threads", threads)
    m = manifest(out)
    assert m["schema"] == {"x": {"dtype": "F64", "shape": [4, 6]}, "y": {"dtype": "F64", "shape": [4, 2, 3]},
                           "lab": {"dtype": "F64", "shape": [4, 1]}}
    got = shards(out)
    assert m["total_samples"] == expect_rows
    x = np.concatenate([s["x"] for s in got])
    n = min(10, expect_rows)
    np.testing.assert_array_equal(x[:n], want["x"][:n].astype(np.float64))
    np.testing.assert_array_equal(np.concatenate([s["y"] for s in got])[:n], want["y"][:n])
    if tail == "pad":
        assert not x[10:].any() and x.shape == (12, 6)
    if tail == "write":
        assert got[-1]["x"].shape == (2, 6)


def test_integers_never_pass_through_f64(tsm, tmp_path):
    want, tbl = table()
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "5", "--dtype", "I64", "--columns", "lab")
    lab = np.concatenate([s["lab"] for s in shards(out)])
    np.testing.assert_array_equal(lab, want["lab"])  # values above 2^53 exact
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "5", "--dtype", "I32", "--columns", "lab", out="o2", expect=2)
    err = p.stderr.decode()
    assert "column 'lab', row 0" in err and "does not fit in I32" in err, err
    assert not (tmp_path / "o2" / "dataset_manifest.json").exists()


@pytest.mark.parametrize("rounding", ["nearest", "truncate"])
@pytest.mark.parametrize("dtype", ["F16", "BF16"])
def test_half_precision_rounding(tsm, tmp_path, rounding, dtype):
    rng = np.random.default_rng(1)
    v = (rng.standard_normal((8, 64)) * 10).astype(np.float32)
    tbl = pa.table({"v": pa.array(list(v), type=pa.list_(pa.float32()))})
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "8", "--dtype", dtype, "--f16-rounding", rounding)
    got = shards(out)[0]["v"]
    bits = v.view(np.uint32)
    if dtype == "F16":
        if rounding == "nearest":
            want = v.astype(np.float16).view(np.uint16)
        else:
            sign = (bits >> 16) & 0x8000
            exp = ((bits >> 23) & 0xFF).astype(np.int64) - 127 + 15
            mant = (bits >> 13) & 0x3FF
            want = np.where(exp >= 31, sign | 0x7C00, np.where(exp <= 0, sign, sign | (exp << 10) | mant))
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got.view(np.uint16), want.astype(np.uint16))
    else:

        if rounding == "nearest":
            want = v.astype(ml_dtypes.bfloat16).view(np.uint16)
        else:
            want = (bits >> 16).astype(np.uint16)
        np.testing.assert_array_equal(got.view(np.uint16), want)


def test_kv_mode_keys_shards_and_index(tsm, tmp_path):
    want, tbl = table(n=7)
    out, _ = write(tsm, tmp_path, tbl, "--name-col", "id", "--dtype", "F32", "--columns", "x,y",
                   "--kv-separator", "/", "--generate-index")
    m = manifest(out)
    assert m["total_samples"] == 7
    assert m["schema"]["s3/y"] == {"dtype": "F32", "shape": [2, 3]}
    merged = {}
    for s in shards(out):
        merged.update(s)
    assert sorted(merged) == sorted(f"s{i}/{c}" for i in range(7) for c in "xy")
    for i in range(7):
        np.testing.assert_array_equal(merged[f"s{i}/x"], want["x"][i])
        np.testing.assert_array_equal(merged[f"s{i}/y"], want["y"][i].astype(np.float32))
    idx = pq.read_table(out / "_tensor_index.parquet")
    assert idx.schema.field("shape").type == pa.list_(pa.int32())
    rows = {r["tensor_key"]: r for r in idx.to_pylist()}
    assert len(rows) == 14 and rows["s2/y"]["shape"] == [2, 3] and rows["s2/y"]["dtype"] == "F32"
    assert {r["file_name"] for r in rows.values()} == {s["shard_path"] for s in m["shards"]}


def test_kv_shards_roll_over_at_the_target_size(tsm, tmp_path):
    # 40 rows of 4 MiB: 50 MB target -> several shards; keys found in the shard the index names
    n, width = 40, 1 << 20
    tbl = pa.table({"id": [f"k{i}" for i in range(n)],
                    "v": pa.array([np.full(width, i, np.float32) for i in range(n)], type=pa.list_(pa.float32()))})
    out, _ = write(tsm, tmp_path, tbl, "--name-col", "id", "--dtype", "F32", "--target-shard-size-mb", "50",
                   "--generate-index", "--threads", "1", row_group_size=8)
    m = manifest(out)
    assert len(m["shards"]) == 4 and m["total_samples"] == n
    assert all(s["bytes"] <= 54 << 20 for s in m["shards"])
    for r in pq.read_table(out / "_tensor_index.parquet").to_pylist()[::7]:
        t = load_file(str(out / r["file_name"]))[r["tensor_key"]]
        assert t[0] == int(r["tensor_key"][1:].split("__")[0])


def test_duplicates_across_the_whole_write(tsm, tmp_path):
    tbl = pa.table({"id": ["a", "b", "a", "c"], "v": pa.array([[1], [2], [3], [4]], type=pa.list_(pa.int32()))})
    _, p = write(tsm, tmp_path, tbl, "--name-col", "id", "--dtype", "I32", "--threads", "2", expect=2,
                 row_group_size=1)
    assert "duplicate tensor key 'a__v' (rows 0 and 2)" in p.stderr.decode()
    assert only_lock_left(tmp_path / "out")
    out, _ = write(tsm, tmp_path, tbl, "--name-col", "id", "--dtype", "I32", "--duplicates-strategy", "lastWin",
                   "--threads", "2", out="lw", row_group_size=1)
    merged = {}
    for s in shards(out):
        assert not set(s) & set(merged)
        merged.update(s)
    assert {k: int(v[0]) for k, v in merged.items()} == {"a__v": 3, "b__v": 2, "c__v": 4}


def test_struct_input_and_dtype_conversion(tsm, tmp_path):
    v = np.arange(12, dtype=np.float32).reshape(3, 4)
    st = pa.array([{"data": r.tobytes(), "shape": [2, 2], "dtype": "F32"} for r in v],
                  type=pa.struct([("data", pa.binary()), ("shape", pa.list_(pa.int32())), ("dtype", pa.string())]))
    tbl = pa.table({"t": st})
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "3")
    np.testing.assert_array_equal(shards(out)[0]["t"], v.reshape(3, 2, 2))
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "3", "--dtype", "F16", out="half")
    np.testing.assert_array_equal(shards(out)[0]["t"], v.reshape(3, 2, 2).astype(np.float16))
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "3", "--dtype", "I32", out="bad", expect=2)
    assert "bytes are never relabelled" in p.stderr.decode()


def test_binary_and_fixed_size_list_input_with_shapes(tsm, tmp_path):
    v = np.arange(24, dtype=np.uint16).reshape(4, 6)
    tbl = pa.table({"b": pa.array([r.tobytes() for r in v], type=pa.binary()),
                    "f": pa.array(list(v), type=pa.list_(pa.uint16(), 6))})
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "2", "--dtype", "U16", "--shapes", '{"b": [2, 3], "f": [3, 2]}')
    got = shards(out)
    np.testing.assert_array_equal(np.concatenate([s["b"] for s in got]), v.reshape(4, 2, 3))
    np.testing.assert_array_equal(np.concatenate([s["f"] for s in got]), v.reshape(4, 3, 2))


def test_rows_of_the_wrong_length_are_named(tsm, tmp_path):
    tbl = pa.table({"v": pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0]], type=pa.list_(pa.float32()))})
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "4", "--dtype", "F32", expect=2)
    err = p.stderr.decode()
    assert "in.parquet: column 'v', row 3: sample shape [1] differs from [2]" in err, err
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "4", "--dtype", "F32", "--shapes", '{"v": [2]}', out="o2",
                 expect=2)
    assert "row 3: has 1 elements, the shapes option [2] needs 2" in p.stderr.decode()
    tbl = pa.table({"v": pa.array([[1.0], None], type=pa.list_(pa.float32()))})
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "2", "--dtype", "F32", out="o3", expect=2)
    assert "row 1: is null" in p.stderr.decode()


@pytest.mark.parametrize("threads", ["1", "2"])
def test_rows_are_named_within_their_file(tsm, tmp_path, threads):
    """An error in the second input file names its row in that file, then its row in the
    whole input (row 13 of the input was shown beside a 10-row file): on the reader's path
    (a null) and on the page-copy path (a value too big for the dtype)."""
    f32 = pa.list_(pa.float32())
    pq.write_table(pa.table({"x": pa.array([[1.0, 2.0]] * 10, f32)}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": pa.array([[1.0, 2.0]] * 3 + [None] + [[1.0, 2.0]] * 6, f32)}),
                   tmp_path / "b.parquet")
    p = tsm.run("dataset", "write", tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "o",
                "--batch-size", "2", "--threads", threads, "--dtype", "F32", expect=2)
    assert "b.parquet: column 'x', row 3: is null (row 13 of the whole input)" in p.stderr.decode()
    i64 = pa.list_(pa.int64())
    pq.write_table(pa.table({"x": pa.array([[1, 2]] * 10, i64)}), tmp_path / "c.parquet")
    pq.write_table(pa.table({"x": pa.array([[1, 2]] * 5 + [[1, 2**40]] + [[1, 2]] * 4, i64)}),
                   tmp_path / "d.parquet")
    p = tsm.run("dataset", "write", tmp_path / "c.parquet", tmp_path / "d.parquet", tmp_path / "o2",
                "--batch-size", "2", "--threads", threads, "--dtype", "I32", expect=2)
    err = p.stderr.decode()
    assert "d.parquet: column 'x', row 5: element 1 = 1099511627776 does not fit in I32 " \
           "(row 15 of the whole input)" in err, err


def test_list_item_names_and_nullability_do_not_split_a_column(tsm, tmp_path):
    """`list<item: float>` (pyarrow before 13), `list<element: float>` and our own export's
    `list<item: float not null>` are one column type: written together, values in order."""
    f32 = pa.list_(pa.float32())
    pq.write_table(pa.table({"x": pa.array([[1.0, 2.0]] * 3, f32)}), tmp_path / "new.parquet")
    pq.write_table(pa.table({"x": pa.array([[3.0, 4.0]] * 3, f32)}), tmp_path / "old.parquet",
                   use_compliant_nested_type=False)
    strict = pa.list_(pa.field("item", pa.float32(), nullable=False))
    pq.write_table(pa.table({"x": pa.array([[5.0, 6.0]] * 3, strict)}), tmp_path / "strict.parquet")
    kinds = {str(pq.read_schema(tmp_path / f"{n}.parquet").field("x").type)
             for n in ("new", "old", "strict")}
    assert len(kinds) == 3, kinds
    out = tmp_path / "o"
    tsm.run("dataset", "write", *(tmp_path / f"{n}.parquet" for n in ("old", "new", "strict")), out,
            "--batch-size", "2", "--dtype", "F32")
    got = [v for s in shards(out) for v in s["x"].tolist()]
    assert got == [[3.0, 4.0]] * 3 + [[1.0, 2.0]] * 3 + [[5.0, 6.0]] * 3


def test_options_are_validated(tsm, tmp_path):
    _, tbl = table()
    for opts, msg in [
        ((), "one of batch_size"),
        (("--batch-size", "2", "--name-col", "id"), "mutually exclusive"),
        (("--batch-size", "2"), "a dtype is required, as in the connector (--dtype F"),
        (("--batch-size", "2", "--dtype", "I32", "--columns", "x"), "would drop fractions"),
        (("--batch-size", "2", "--dtype", "F32", "--columns", "nope"), "no such column"),
        (("--batch-size", "2", "--dtype", "F32", "--columns", "id"), "not a tensor column"),
        (("--name-col", "id", "--dtype", "F32", "--target-shard-size-mb", "10"), "between 50 and 1000"),
        (("--batch-size", "2", "--dtype", "F32", "-o", "tail_strategy=later"), "drop, pad or write"),
    ]:
        _, p = write(tsm, tmp_path, tbl, *opts, expect=2)
        assert msg in p.stderr.decode(), (opts, p.stderr.decode())
        assert not (tmp_path / "out" / "dataset_manifest.json").exists()


def test_empty_input_is_an_error_not_an_invalid_manifest(tsm, tmp_path):
    tbl = pa.table({"v": pa.array([], type=pa.list_(pa.float32()))})
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "2", "--dtype", "F32", expect=2)
    assert "no rows" in p.stderr.decode()
    tbl = pa.table({"v": pa.array([[1.0]], type=pa.list_(pa.float32()))})
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "2", "--dtype", "F32", "--tail-strategy", "drop", expect=2)
    assert "dropped" in p.stderr.decode()
    assert not (tmp_path / "out" / "dataset_manifest.json").exists()


def test_overwrite_and_append(tsm, tmp_path):
    _, tbl = table()
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "5", "--dtype", "F32", "--columns", "x", "--generate-index")
    first = {s["shard_path"] for s in manifest(out)["shards"]}
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "5", "--dtype", "F32", "--columns", "x", expect=2)
    assert "already holds a dataset" in p.stderr.decode()
    write(tsm, tmp_path, tbl, "--batch-size", "5", "--dtype", "F32", "--columns", "x", "--mode", "append",
          "--generate-index")
    m = manifest(out)
    assert m["total_samples"] == 20 and first < {s["shard_path"] for s in m["shards"]}
    assert {s["shard_path"] for s in m["shards"][:len(first)]} == first  # the appended rows last
    assert len(pq.read_table(out / "_tensor_index.parquet")) == 4
    _, p = write(tsm, tmp_path, tbl, "--batch-size", "5", "--dtype", "F64", "--columns", "x", "--mode", "append",
                 expect=2)
    assert "append needs the same dtype" in p.stderr.decode()
    write(tsm, tmp_path, tbl, "--batch-size", "10", "--dtype", "F32", "--columns", "x", "--mode", "overwrite")
    m = manifest(out)
    assert len(m["shards"]) == 1 and m["total_samples"] == 10
    # The replaced shards are retired, not deleted; a clean with no retention removes them.
    tsm.run("dataset", "clean", out, "--older-than", "0")
    assert sorted(p.name for p in out.glob("*.safetensors")) == [m["shards"][0]["shard_path"]]
    assert not (out / "_tensor_index.parquet").exists()
    assert not glob.glob(str(out / "_tensorsmith_staging-*"))


def test_export_round_trips_and_verify_reports(tsm, tmp_path):
    want, tbl = table(n=9)
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "4", "--dtype", "F32", "--columns", "x,y")
    assert tsm.run("dataset", "verify", out).stdout.decode().startswith("ok:")
    tsm.run("dataset", "export", out, tmp_path / "back.parquet")
    back = pq.read_table(tmp_path / "back.parquet")
    assert back.num_rows == 9
    assert back.schema.field("y").type == pa.list_(pa.field("item", pa.list_(pa.field("item", pa.float32(), False), 3), False))
    np.testing.assert_array_equal(np.array(back["x"].to_pylist(), np.float32), want["x"])
    np.testing.assert_array_equal(np.array(back["y"].to_pylist()), want["y"].astype(np.float32))
    # the export written again gives the same tensors
    again = tsm.run("dataset", "write", tmp_path / "back.parquet", tmp_path / "again", "--batch-size", "4",
                    "--dtype", "F32")
    a = shards(out)
    b = shards(tmp_path / "again")
    for sa, sb in zip(a, b):
        assert sa.keys() == sb.keys()
        for k in sa:
            np.testing.assert_array_equal(sa[k], sb[k])
    # damage: a truncated shard, a stray shard, a wrong count
    m = manifest(out)
    first = out / m["shards"][0]["shard_path"]
    first.write_bytes(first.read_bytes()[:-4])
    (out / "part-09999-0000-x.safetensors").write_bytes(b"")
    p = tsm.run("dataset", "verify", out, expect=1)
    lines = p.stdout.decode()
    assert f"{first.name}: {first.stat().st_size} bytes, the manifest says" in lines, lines
    assert "not a valid safetensors file" in lines
    assert "part-09999-0000-x.safetensors: a file named like a shard that no version" in lines


def test_kv_export(tsm, tmp_path):
    want, tbl = table(n=5)
    out, _ = write(tsm, tmp_path, tbl, "--name-col", "id", "--dtype", "I64", "--columns", "lab",
                   "--generate-index")
    assert tsm.run("dataset", "verify", out).stdout.decode().startswith("ok:")
    tsm.run("dataset", "export", out, tmp_path / "kv.parquet")
    rows = pq.read_table(tmp_path / "kv.parquet").to_pylist()
    assert [r["tensor_key"] for r in rows] == [f"s{i}__lab" for i in range(5)]
    for i, r in enumerate(rows):
        assert r["tensor"]["dtype"] == "I64" and r["tensor"]["shape"] == [1]
        assert np.frombuffer(r["tensor"]["data"], np.int64)[0] == want["lab"][i][0]


@pytest.mark.parametrize("compression", ["NONE", "SNAPPY", "ZSTD", "GZIP", "LZ4", "BROTLI"])
@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
def test_parquet_writer_variants_pass_the_precheck(tsm, tmp_path, compression, page_version):
    # Every page header pyarrow writes (dictionary pages, v1 and v2 data pages, statistics,
    # page index, many small pages) passes the Thrift pre-check; the values arrive intact.
    want, tbl = table(n=300, seed=3)
    src = tmp_path / "in.parquet"
    pq.write_table(tbl, src, row_group_size=70, compression=compression, data_page_size=256,
                   data_page_version=page_version, write_page_index=True,
                   write_statistics=True, use_dictionary=["id"])
    tsm.run("dataset", "write", src, tmp_path / "out", "--batch-size", "50", "--columns", "x,y",
            "--dtype", "F32", "--threads", "2")
    got = shards(tmp_path / "out")
    np.testing.assert_array_equal(np.concatenate([s["x"] for s in got]), want["x"])
    np.testing.assert_array_equal(np.concatenate([s["y"] for s in got]), want["y"].astype(np.float32))


@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
@pytest.mark.parametrize("dtype,np_type,pa_type", [
    ("F32", np.float32, pa.float32()), ("F64", np.float64, pa.float64()),
    ("I32", np.int32, pa.int32()), ("I64", np.int64, pa.int64()),
    ("U32", np.uint32, pa.uint32()), ("U64", np.uint64, pa.uint64()),
    ("F16", np.float16, pa.float16()),
])
def test_plain_uncompressed_pages_are_copied_as_they_are(tsm, tmp_path, page_version, dtype, np_type, pa_type):
    # pyarrow's PLAIN, uncompressed pages of a list column are the shards' bytes: the write
    # copies them file to file (it says how many shards it copied) and the reference loader
    # reads the values pyarrow wrote. Pages of 300 bytes split rows between pages (v1), row
    # groups of 70 rows split shards between groups; the output is the reader path's, byte
    # for byte.
    rng = np.random.default_rng(7)
    n, width = 300, 13
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        want = rng.integers(info.min, info.max, size=(n, width), dtype=np_type, endpoint=True)
    else:
        want = rng.standard_normal((n, width)).astype(np_type)
    flat = pa.array(want.reshape(-1), type=pa_type)
    col = pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32)), flat)
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"v": col}), src, row_group_size=70, compression="NONE",
                   use_dictionary=False, data_page_size=300, data_page_version=page_version,
                   write_statistics=True)
    outs = []
    for extra in [[], ["--parquet-reader-only"]]:
        out = tmp_path / f"out{len(outs)}"
        p = tsm.run("dataset", "write", src, out, "--batch-size", "32", "--dtype", dtype,
                    "--tail-strategy", "pad", "--threads", "2", *extra)
        outs.append(out)
        copied = int(p.stderr.decode().split(" shards (")[1].split(" ")[0])
        assert copied == (0 if extra else 10), p.stderr
    got = shards(outs[0])
    v = np.concatenate([s["v"] for s in got])
    assert v.dtype == np_type and v.shape == (320, width)
    np.testing.assert_array_equal(v[:n], want)
    assert not v[n:].any()
    a, b = (sorted(o.glob("*.safetensors")) for o in outs)
    assert [x.name[:15] for x in a] == [x.name[:15] for x in b]
    assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a, b))


def counts(stderr):
    """(copied, decoded, reader) shard counts from the write's summary line."""
    part = stderr.decode().split(" shards (")[1].split(")")[0]
    return tuple(int(x.strip().split(" ")[0]) for x in part.split(","))


@pytest.mark.parametrize("compression", ["snappy", "zstd", "gzip", "lz4"])
@pytest.mark.parametrize("encoding", ["plain", "dict", "fallback"])
@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
@pytest.mark.parametrize("dtype,np_type,pa_type,cast", [
    ("F32", np.float32, pa.float32(), None), ("BF16", np.float32, pa.float32(), ml_dtypes.bfloat16),
    ("F16", np.float32, pa.float32(), np.float16), ("F64", np.float64, pa.float64(), None),
    ("I64", np.int32, pa.int32(), np.int64), ("U64", np.uint64, pa.uint64(), None),
])
def test_compressed_and_dictionary_pages_are_decoded_into_shards(tsm, tmp_path, compression, encoding,
                                                                 page_version, dtype, np_type, pa_type, cast):
    # pyarrow's pages as users write them (every codec, dictionary-encoded, dictionary then
    # PLAIN after pyarrow's fallback, v1 and v2, with page checksums) are decoded straight
    # into the shards (the summary says how many), casts applied on the way; the reference
    # loader reads the values pyarrow wrote (cast as NumPy / ml_dtypes round to nearest);
    # the shards are the reader path's, byte for byte.
    rng = np.random.default_rng(11)
    n, width = 300, 13
    pool = (rng.standard_normal(40) * 100).astype(np_type) if not np.issubdtype(np_type, np.integer) \
        else rng.integers(0, np.iinfo(np_type).max, size=40, dtype=np_type, endpoint=True)
    want = pool[rng.integers(0, 40, size=(n, width))]
    flat = pa.array(want.reshape(-1), type=pa_type)
    col = pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32)), flat)
    kw = {"plain": dict(use_dictionary=False), "dict": dict(use_dictionary=True),
          "fallback": dict(use_dictionary=True, dictionary_pagesize_limit=64)}[encoding]
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"v": col}), src, row_group_size=70, compression=compression,
                   data_page_size=300, data_page_version=page_version, write_page_checksum=True, **kw)
    outs = []
    for extra in [[], ["--parquet-reader-only"]]:
        out = tmp_path / f"out{len(outs)}"
        p = tsm.run("dataset", "write", src, out, "--batch-size", "32", "--dtype", dtype,
                    "--tail-strategy", "pad", "--threads", "2", *extra)
        outs.append(out)
        assert counts(p.stderr) == ((0, 0, 10) if extra else (0, 10, 0)), p.stderr
    v = np.concatenate([s["v"] for s in shards(outs[0])])
    assert v.shape == (320, width)
    np.testing.assert_array_equal(v[:n], want if cast is None else want.astype(cast))
    assert not v[n:].astype(np.float64).any()
    a, b = (sorted(o.glob("*.safetensors")) for o in outs)
    assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a, b))


def test_a_corrupt_page_is_an_error_naming_file_column_and_page(tsm, tmp_path):
    # pyarrow's page checksums: a flipped byte in a snappy page is refused on both paths,
    # naming the page; no dataset appears.
    rng = np.random.default_rng(2)
    want = rng.standard_normal((100, 8)).astype(np.float32)
    col = pa.array(list(want), type=pa.list_(pa.float32()))
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"v": col}), src, compression="snappy", write_page_checksum=True,
                   use_dictionary=False)
    meta = pq.ParquetFile(src).metadata.row_group(0).column(0)
    data = bytearray(src.read_bytes())
    last = meta.data_page_offset + meta.total_compressed_size - 1
    data[last] ^= 0x40
    src.write_bytes(bytes(data))
    for extra in [[], ["--parquet-reader-only"]]:
        out = tmp_path / f"out{len(extra)}"
        p = tsm.run("dataset", "write", src, out, "--batch-size", "10", "--dtype", "F32", *extra, expect=2)
        err = p.stderr.decode()
        assert "in.parquet" in err and "column 'v'" in err and "page at byte" in err, err
        assert "CRC does not match" in err, err
        assert not (out / "dataset_manifest.json").exists()
        assert not list(out.glob("*.safetensors")) if out.exists() else True


def test_nested_variable_length_lists_are_tensors_when_regular(tsm, tmp_path):
    # Spark writes array<array<double>> as list<list<double>>: each sample's inner lists
    # give its dims when they have one length; ragged ones are refused naming the row.
    rng = np.random.default_rng(5)
    y = rng.standard_normal((7, 2, 3))
    tbl = pa.table({"y": pa.array([[list(r) for r in s] for s in y], type=pa.list_(pa.list_(pa.float64())))})
    out, _ = write(tsm, tmp_path, tbl, "--batch-size", "3", "--dtype", "F64")
    assert manifest(out)["schema"] == {"y": {"dtype": "F64", "shape": [3, 2, 3]}}
    np.testing.assert_array_equal(np.concatenate([s["y"] for s in shards(out)]), y)
    ragged = pa.table({"y": pa.array([[[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0]]],
                                     type=pa.list_(pa.list_(pa.float64())))})
    _, p = write(tsm, tmp_path, ragged, "--batch-size", "1", "--dtype", "F64", out="r", name="r.parquet",
                 expect=2)
    err = p.stderr.decode()
    assert "row 1" in err and "inner lists of 2 and 1 elements" in err, err


def every_type_table(n=40):
    # A column of each Arrow type pyarrow maps to its own Parquet logical or converted type
    # (ints of each width and sign, decimals, dates, times and timestamps in each unit, UUIDs,
    # float16, JSON-less strings, maps, structs, dictionaries), beside the tensor column.
    import datetime
    import decimal
    import uuid

    rng = np.random.default_rng(9)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    cols = {"x": pa.array(list(x), type=pa.list_(pa.float32()))}
    for t in [pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]:
        cols[f"i_{t}"] = pa.array(rng.integers(0, 100, n), type=t)
    cols["f16"] = pa.array(rng.standard_normal(n).astype(np.float16), type=pa.float16())
    cols["dec"] = pa.array([decimal.Decimal(f"{i}.25") for i in range(n)], type=pa.decimal128(12, 2))
    cols["dec_big"] = pa.array([decimal.Decimal(i) for i in range(n)], type=pa.decimal128(30, 0))
    cols["date"] = pa.array([datetime.date(2020, 1, 1 + i % 28) for i in range(n)], type=pa.date32())
    for unit in ["ms", "us", "ns"]:
        cols[f"ts_{unit}"] = pa.array([i * 1000 for i in range(n)], type=pa.timestamp(unit, tz="UTC"))
        cols[f"ts_local_{unit}"] = pa.array([i * 1000 for i in range(n)], type=pa.timestamp(unit))
    cols["t_ms"] = pa.array(list(range(n)), type=pa.time32("ms"))
    cols["t_us"] = pa.array(list(range(n)), type=pa.time64("us"))
    cols["t_ns"] = pa.array([i * 1000 for i in range(n)], type=pa.time64("ns"))
    cols["uuid"] = pa.array([uuid.UUID(int=i).bytes for i in range(n)], type=pa.uuid())
    cols["s"] = pa.array([f"s{i}" for i in range(n)])
    cols["ls"] = pa.array([f"s{i}" for i in range(n)], type=pa.large_string())
    cols["bin"] = pa.array([bytes([i]) * i for i in range(n)])
    cols["b"] = pa.array([i % 3 == 0 for i in range(n)])
    cols["null"] = pa.nulls(n)
    cols["dict"] = pa.array([f"k{i % 4}" for i in range(n)]).dictionary_encode()
    cols["map"] = pa.array([[("a", i)] for i in range(n)], type=pa.map_(pa.string(), pa.int64()))
    cols["st"] = pa.array([{"p": i, "q": [float(i)]} for i in range(n)])
    tbl = pa.table(cols).replace_schema_metadata({"origin": "tensorsmith tests"})
    return x, tbl


@pytest.mark.parametrize("version,stats", [("1.0", False), ("2.4", True), ("2.6", True)])
def test_every_logical_type_pyarrow_writes_passes_the_precheck(tsm, tmp_path, version, stats):
    # The pre-check holds every footer field it knows to the type parquet.thrift gives it;
    # files pyarrow writes with any logical type, key-value metadata, sorting columns and
    # statistics pass it, and the tensor column beside them arrives intact.
    x, tbl = every_type_table()
    src = tmp_path / "in.parquet"
    pq.write_table(tbl, src, version=version, write_statistics=stats, row_group_size=15,
                   sorting_columns=[pq.SortingColumn(1)], store_schema=stats,
                   write_page_index=stats, data_page_size=512)
    tsm.run("dataset", "write", src, tmp_path / "out", "--batch-size", "8", "--columns", "x",
            "--dtype", "F32")
    got = shards(tmp_path / "out")
    np.testing.assert_array_equal(np.concatenate([s["x"] for s in got]), x)
