"""Datasets written by many processes at once, and readers that keep their version (issue 26):
Python writer processes racing in each mode, a `Dataset` pinned across overwrites by other
processes, older versions by number, pickling for DataLoader workers, cleaned versions."""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tensorsmith
from tensorsmith.errors import DatasetExists, DatasetFailure

ROWS = 8
WRITERS = 4
ROUNDS = int(os.environ.get("TS_RACE_ROUNDS", "3"))


def table(tag: int) -> pa.Table:
    return pa.table({
        "id": [f"k{tag}-{r}" for r in range(ROWS)],
        "x": pa.array([np.full(4, tag * 100 + r, np.float32) for r in range(ROWS)],
                      pa.list_(pa.float32())),
    })


WRITER = textwrap.dedent("""
    import sys, pyarrow.parquet as pq, tensorsmith
    from tensorsmith.errors import TensorsmithError
    src, out, mode, kind = sys.argv[1:5]
    opts = dict(batch_size=4, columns="x") if kind == "batch" else dict(name_col="id")
    try:
        tensorsmith.write_dataset(pq.read_table(src), out, mode=mode, threads=2, dtype="F32",
                                  generate_index=True, **opts)
    except TensorsmithError as e:
        print(type(e).__name__, e, file=sys.stderr)
        sys.exit(1)
""")


def race(tmp_path, out, mode, kind, tags):
    procs = []
    for t in tags:
        src = tmp_path / f"in{t}.parquet"
        pq.write_table(table(t), src)
        procs.append(subprocess.Popen([sys.executable, "-c", WRITER, str(src), str(out), mode, kind],
                                      stderr=subprocess.PIPE, text=True))
    return [(p.wait(), p.stderr.read()) for p in procs]


def tags_of(out, kind):
    ds = tensorsmith.Dataset(out)
    if kind == "batch":
        values = [int(ds[i]["x"][0]) for i in range(len(ds))]
    else:
        values = [int(ds[k][0]) for k in ds.keys()]
    by = {}
    for v in values:
        by.setdefault(v // 100, []).append(v % 100)
    for tag, rows in by.items():
        assert sorted(rows) == list(range(ROWS)), f"writer {tag}: rows {sorted(rows)}"
    return sorted(by)


def first(tmp_path, out, kind):
    [(rc, err)] = race(tmp_path, out, "error", kind, [99])
    assert rc == 0, err


@pytest.mark.parametrize("kind", ["batch", "kv"])
def test_python_writers_append_at_once_and_every_row_lands_once(tmp_path, kind):
    for r in range(ROUNDS):
        out = tmp_path / f"ds{r}"
        first(tmp_path, out, kind)
        results = race(tmp_path, out, "append", kind, range(1, WRITERS + 1))
        assert all(rc == 0 for rc, _ in results), results
        assert tags_of(out, kind) == [1, 2, 3, 4, 99]
        assert tensorsmith.Dataset(out).version == WRITERS + 1


@pytest.mark.parametrize("kind", ["batch", "kv"])
def test_python_writers_creating_one_dataset_one_wins(tmp_path, kind):
    for r in range(ROUNDS):
        out = tmp_path / f"ds{r}"
        results = race(tmp_path, out, "error", kind, range(1, WRITERS + 1))
        ok = [i for i, (rc, _) in enumerate(results) if rc == 0]
        assert len(ok) == 1, results
        assert all("DatasetExists" in err for rc, err in results if rc != 0), results
        assert tags_of(out, kind) == [ok[0] + 1]


def test_python_overwrites_leave_one_whole(tmp_path):
    for r in range(ROUNDS):
        out = tmp_path / f"ds{r}"
        first(tmp_path, out, "batch")
        results = race(tmp_path, out, "overwrite", "batch", range(1, WRITERS + 1))
        assert all(rc == 0 for rc, _ in results), results
        assert len(tags_of(out, "batch")) == 1


def test_a_dataset_reads_its_version_across_overwrites(tmp_path):
    out = tmp_path / "ds"
    first(tmp_path, out, "batch")
    ds = tensorsmith.Dataset(out)
    assert ds.version == 1
    for _ in range(3):
        [(rc, err)] = race(tmp_path, out, "overwrite", "batch", [7])
        assert rc == 0, err
    # Every sample of version 1, although three overwrites replaced its shards.
    assert [int(ds[i]["x"][0]) for i in range(len(ds))] == [9900 + r for r in range(ROWS)]
    assert tensorsmith.Dataset(out).version == 4
    old = tensorsmith.Dataset(out, version=2)
    assert int(old[0]["x"][0]) == 700
    # Pickled for a DataLoader worker: the same version, not the current one.
    again = pickle.loads(pickle.dumps(ds))
    assert again.version == 1 and int(again[3]["x"][0]) == 9903


def test_a_cleaned_version_says_so(tmp_path):
    out = tmp_path / "ds"
    first(tmp_path, out, "batch")
    ds = tensorsmith.Dataset(out)
    [(rc, err)] = race(tmp_path, out, "overwrite", "batch", [7])
    assert rc == 0, err
    bin_ = os.environ.get("TENSORSMITH_BIN")
    if not bin_:
        pytest.skip("TENSORSMITH_BIN not set")
    subprocess.run([bin_, "dataset", "clean", str(out), "--older-than", "0"], check=True,
                   capture_output=True)
    with pytest.raises(DatasetFailure, match=r"version 1 of .* was removed by `dataset clean` at"):
        tensorsmith.Dataset(out, version=1)
    with pytest.raises(DatasetFailure, match="version 1 of"):
        ds[0]
    with pytest.raises(DatasetExists):
        tensorsmith.write_dataset(table(3), out, batch_size=4, dtype="F32", columns="x")


def test_retain_zero_cleans_after_the_commit(tmp_path):
    out = tmp_path / "ds"
    tensorsmith.write_dataset(table(1), out, batch_size=4, dtype="F32", columns="x")
    old = tensorsmith.Dataset(out)
    tensorsmith.write_dataset(table(2), out, mode="overwrite", retain=0, lock_timeout=30,
                              batch_size=4, dtype="F32", columns="x")
    shards = {s["shard_path"] for s in tensorsmith.Dataset(out).manifest()["shards"]}
    assert {n for n in os.listdir(out) if n.endswith(".safetensors")} == shards
    # Shard 0 was mapped at open (to tell the mode); the second one is gone.
    with pytest.raises(DatasetFailure, match="version 1 of"):
        old[ROWS - 1]
