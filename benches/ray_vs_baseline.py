#!/usr/bin/env python3
"""Ray Data on a local cluster of 2 CPUs: `tensorsmith.ray.write_dataset` side by side with a
map_batches + safetensors.numpy.save_file + fsync script writing the same rows, as many rows
per file as our shards; reading back (a sum of one element per row) side by side with
ray.data.read_parquet of the same rows. One run, interleaved, best of RB_RUNS, ratios
(baseline time / ours: >= 1 is as fast). Build the package in release mode into the Ray venv:

    VIRTUAL_ENV=$PWD/.venv-ray .venv/bin/maturin develop --release -q -m crates/tensorsmith-py/Cargo.toml
    .venv-ray/bin/python benches/ray_vs_baseline.py

Data: RB_GIB (default 1) of array<float> rows of 4096 floats (16 KiB), materialized in Ray's
object store first (blocks of 4096 rows); shards of 4096 rows (64 MiB). Page cache warm.
    write  ours      tensorsmith.ray.write_dataset(ds, out, batch_size=4096, dtype="F32")
           baseline  ds.map_batches(save_file + fsync, batch_size=4096, batch_format="pyarrow")
    read   ours      tensorsmith.ray.read_dataset(out)
           baseline  ray.data.read_parquet(the same rows written by pyarrow)
           both      iter_batches(pyarrow) on the driver, sum of x[0] of every row
Environment: RB_GIB, RB_RUNS (default 2), DS_BENCH_DIR (scratch, default /tmp/ds30-bench).
"""

import os
import pathlib
import shutil
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray
from safetensors.numpy import save_file

import tensorsmith.ray as tray

GIB = float(os.environ.get("RB_GIB", "1"))
RUNS = int(os.environ.get("RB_RUNS", "2"))
DIR = pathlib.Path(os.environ.get("DS_BENCH_DIR", "/tmp/ds30-bench")) / "ray"
WIDTH = 4096
ROWS_PER_FILE = 4096


def table(start, n):
    vals = np.random.default_rng(start).standard_normal(n * WIDTH, dtype=np.float32)
    offsets = np.arange(0, (n + 1) * WIDTH, WIDTH, dtype=np.int32)
    return pa.table({"x": pa.ListArray.from_arrays(pa.array(offsets), pa.array(vals))})


def baseline_write(out):
    os.makedirs(out, exist_ok=True)

    def save(b):
        col = b.column("x").combine_chunks()
        arr = col.flatten().to_numpy().reshape(len(col), WIDTH)
        path = os.path.join(out, f"part-{uuid.uuid4()}.safetensors")
        save_file({"x": arr}, path)
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        return pa.table({"n": [len(col)]})

    return save


def read_sum(ds):
    total = 0.0
    for b in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        total += pc.sum(pc.list_element(b.column("x"), 0)).as_py()
    return total


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def main():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    rows = int(GIB * (1 << 30)) // (WIDTH * 4)
    tables = [table(a, min(4096, rows - a)) for a in range(0, rows, 4096)]
    ds = ray.data.from_arrow(tables).materialize()
    shutil.rmtree(DIR, ignore_errors=True)
    DIR.mkdir(parents=True)
    pq.write_table(pa.concat_tables(tables), DIR / "rows.parquet", row_group_size=4096)
    del tables
    best = {k: float("inf") for k in ("write ours", "write baseline", "read ours",
                                       "read baseline")}
    sums = {}
    for _ in range(RUNS):
        out = DIR / "ours"
        shutil.rmtree(out, ignore_errors=True)
        t, _ = timed(lambda: tray.write_dataset(ds, out, batch_size=ROWS_PER_FILE, dtype="F32"))
        best["write ours"] = min(best["write ours"], t)
        base = DIR / "base"
        shutil.rmtree(base, ignore_errors=True)
        t, files = timed(lambda: ds.map_batches(
            baseline_write(str(base)), batch_size=ROWS_PER_FILE,
            batch_format="pyarrow").sum("n"))
        assert files == rows
        best["write baseline"] = min(best["write baseline"], t)
        t, sums["read ours"] = timed(lambda: read_sum(tray.read_dataset(out)))
        best["read ours"] = min(best["read ours"], t)
        t, sums["read baseline"] = timed(
            lambda: read_sum(ray.data.read_parquet(str(DIR / "rows.parquet"))))
        best["read baseline"] = min(best["read baseline"], t)
    assert np.isclose(sums["read ours"], sums["read baseline"], rtol=1e-5), sums
    gib = rows * WIDTH * 4 / (1 << 30)
    print(f"{rows} rows of 16 KiB ({gib:.2f} GiB), 2 CPUs, best of {RUNS}")
    for op in ("write", "read"):
        o, b = best[f"{op} ours"], best[f"{op} baseline"]
        print(f"{op:5}  ours {o:6.2f} s ({gib / o:5.2f} GiB/s)  baseline {b:6.2f} s "
              f"({gib / b:5.2f} GiB/s)  ratio {b / o:.2f}x")
    ray.shutdown()
    shutil.rmtree(DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
