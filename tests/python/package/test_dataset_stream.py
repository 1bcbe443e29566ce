"""`tensorsmith.write_dataset` from one-pass streams: pulled batch by batch, never collected.
The shards and manifest equal those of the collected path (a Table, one thread) but for the
UUID in the shard names; threads > 1 is refused; memory stays bounded."""

import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import tensorsmith

UUID = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def table(n=50, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = rng.standard_normal((n, 2, 3))
    ids = [f"r{i % 37}" for i in range(n)]  # repeated keys for the KV duplicate rules
    return pa.table({
        "id": ids,
        "x": pa.array(list(x), type=pa.list_(pa.float32())),
        "y": pa.array([[list(a) for a in s] for s in y], type=pa.list_(pa.list_(pa.float64(), 3))),
    })


def reader(t, chunk):
    return pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=chunk))


def contents(out, manifest):
    """The dataset's files as {name without UUID: bytes}, and the manifest with its shard
    names stripped of their UUID (so two writes of the same rows compare equal)."""
    files = {UUID.sub("", s["shard_path"]): (out / s["shard_path"]).read_bytes()
             for s in manifest["shards"]}
    text = UUID.sub("", json.dumps(manifest, sort_keys=True))
    return files, text


CASES = {
    "batch": dict(batch_size=8, dtype="F32", columns=["x", "y"]),
    "batch_drop": dict(batch_size=8, dtype="BF16", columns="x", tail_strategy="drop"),
    "batch_pad": dict(batch_size=8, dtype="F16", columns=["x", "y"], tail_strategy="pad",
                      digest="xxh3"),
    "kv_last_win": dict(name_col="id", dtype="F32", duplicatesStrategy="lastWin",
                        generate_index=True),
    "kv_unique": dict(name_col="id", dtype="F64", columns="y", generate_index=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_stream_equals_collected(tmp_path, case, chunk):
    t = table(n=37 if case == "kv_unique" else 50)
    opts = CASES[case]
    a = tensorsmith.write_dataset(t, tmp_path / "a", threads=1, **opts)
    b = tensorsmith.write_dataset(reader(t, chunk), tmp_path / "b", threads=1, **opts)
    assert contents(tmp_path / "a", a) == contents(tmp_path / "b", b)
    if opts.get("generate_index"):
        ia = pa.parquet.read_table(tmp_path / "a" / "_tensor_index.parquet").to_pylist()
        ib = pa.parquet.read_table(tmp_path / "b" / "_tensor_index.parquet").to_pylist()
        strip = [{k: UUID.sub("", v) if isinstance(v, str) else v for k, v in e.items()}
                 for e in ia]
        assert strip == [{k: UUID.sub("", v) if isinstance(v, str) else v for k, v in e.items()}
                         for e in ib]


def test_kv_stream_over_several_shards_equals_collected(tmp_path):
    """1 MiB tensors, 50 MiB shards, keys repeated across shards (lastWin re-packs)."""
    n, width = 130, 1 << 18
    vals = np.arange(n, dtype=np.float32).repeat(width)
    t = pa.table({"id": [f"k{i % 97}" for i in range(n)],
                  "v": pa.FixedSizeListArray.from_arrays(pa.array(vals), width)})
    opts = dict(name_col="id", dtype="F32", target_shard_size_mb=50,
                duplicatesStrategy="lastWin")
    a = tensorsmith.write_dataset(t, tmp_path / "a", threads=1, **opts)
    b = tensorsmith.write_dataset(reader(t, 7), tmp_path / "b", **opts)
    assert len(a["shards"]) >= 2
    assert contents(tmp_path / "a", a) == contents(tmp_path / "b", b)


def test_generator_of_batches_streams(tmp_path):
    t = table()
    gen = (b for b in t.to_batches(max_chunksize=3))
    m = tensorsmith.write_dataset(gen, tmp_path / "g", batch_size=8, dtype="F32", columns="x")
    a = tensorsmith.write_dataset(t, tmp_path / "a", threads=1, batch_size=8, dtype="F32",
                                  columns="x")
    assert contents(tmp_path / "g", m) == contents(tmp_path / "a", a)
    with pytest.raises(tensorsmith.InvalidInput, match="no record batches"):
        tensorsmith.write_dataset(iter([]), tmp_path / "e", batch_size=8, dtype="F32")
    with pytest.raises(ValueError, match="iterator of RecordBatches"):
        tensorsmith.write_dataset(iter([1, 2]), tmp_path / "e", batch_size=8, dtype="F32")
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("opts", [dict(batch_size=8, dtype="F32", columns="x"),
                                  dict(name_col="id", dtype="F32", duplicatesStrategy="lastWin")])
def test_stream_with_threads_is_refused_by_name(tmp_path, opts):
    with pytest.raises(tensorsmith.OptionError, match="a stream is written by one thread"):
        tensorsmith.write_dataset(reader(table(), 4), tmp_path / "t", threads=2, **opts)
    assert not (tmp_path / "t").exists()
    # threads=0 (one per core for data in memory) is one thread for a stream.
    m = tensorsmith.write_dataset(reader(table(), 4), tmp_path / "t", threads=0, **opts)
    assert m["total_samples"] > 0


@pytest.mark.parametrize("opts", [dict(batch_size=4, dtype="F32", columns="x"),
                                  dict(name_col="id", dtype="F32",
                                       duplicatesStrategy="lastWin")])
@pytest.mark.parametrize("how", ["generator", "reader"])
def test_stream_failing_midway_leaves_nothing(tmp_path, opts, how):
    """A generator's own exception comes back as it is; a reader's, named in the error."""
    t = table()

    def gen():
        yield from t.to_batches(max_chunksize=10)[:3]
        raise RuntimeError("producer broke")

    def data():
        return gen() if how == "generator" else pa.RecordBatchReader.from_batches(t.schema, gen())

    err = RuntimeError if how == "generator" else tensorsmith.TensorsmithError
    out = tmp_path / "f"
    with pytest.raises(err, match="producer broke"):
        tensorsmith.write_dataset(data(), out, **opts)
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert left in ([], ["_tensorsmith"]), left
    # An earlier version stays as it was.
    tensorsmith.write_dataset(t, out, **opts)
    before = (out / "dataset_manifest.json").read_text()
    with pytest.raises(err, match="producer broke"):
        tensorsmith.write_dataset(data(), out, mode="overwrite", **opts)
    assert (out / "dataset_manifest.json").read_text() == before
    assert not [p for p in out.iterdir() if p.name.startswith("_tensorsmith_")]


PEAK = textwrap.dedent("""
    import resource, sys, numpy as np, pyarrow as pa, tensorsmith
    mode, out = sys.argv[1], sys.argv[2]
    rows, width = 256, 4096  # 256 rows of 16 KiB per batch: 4 MiB
    schema = pa.schema([("id", pa.string()), ("x", pa.list_(pa.float32(), width))])
    def batches():
        for b in range(128):  # 512 MiB in all, made one batch at a time
            flat = np.full(rows * width, b, np.float32)
            yield pa.record_batch([pa.array([f"k{b}_{i}" for i in range(rows)]),
                                   pa.FixedSizeListArray.from_arrays(flat, width)], schema=schema)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    opts = dict(name_col="id") if mode == "kv" else dict(batch_size=512, columns="x")
    m = tensorsmith.write_dataset(pa.RecordBatchReader.from_batches(schema, batches()), out,
                                  dtype="F32", target_shard_size_mb=50, **opts)
    assert m["total_samples"] == 128 * 256, m["total_samples"]
    print(before // 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
""")


@pytest.mark.parametrize("mode", ["batch", "kv"])
def test_stream_memory_is_bounded(tmp_path, mode):
    """512 MiB pulled through 50 MiB shards (batch: 512 rows of 16 KiB, 8 MiB): the process
    grows by a few shards, not by the stream (collected, it grew by over 512 MiB)."""
    p = subprocess.run([sys.executable, "-c", PEAK, mode, str(tmp_path / "m")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    before, peak = map(int, p.stdout.split())
    assert peak - before < 250, (before, peak)
