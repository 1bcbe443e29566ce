"""Reading a batch-mode dataset through `tensorsmith.Dataset` beside the same reads of one
in-memory NumPy array, in one run, as ratios (this machine is noisy: absolute times are for
context only). Page cache warm (a first pass is not timed).

    .venv/bin/python benches/dataset_read.py            # DS_READ_GIB=2 by default
    DS_READ_GIB=0.5 DS_READ_RUNS=3 .venv/bin/python benches/dataset_read.py

(1) in order through `ds.batches(256)`, one pass over every value (a sum per batch), against
    `arr[a:a+256].sum()`: target >= 0.8x;
(2) per sample, `ds[i]` for every i (16 KiB samples), against `arr[i]`: indexing alone, and
    indexing plus a pass over the sample's values; target >= 0.5x;
(3) shuffled, `ds.batches(256, shuffle=seed)` against NumPy's fancy index `arr[perm[a:b]]`.
"""

import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

import tensorsmith

GIB = float(os.environ.get("DS_READ_GIB", "2"))
RUNS = int(os.environ.get("DS_READ_RUNS", "3"))
SAMPLE = 4096  # f32 values: 16 KiB a sample
BATCH = 256


def best(f):
    f()  # warm
    ts = []
    for _ in range(RUNS):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main():
    n = int(GIB * (1 << 30)) // (SAMPLE * 4)
    rng = np.random.default_rng(0)
    arr = rng.standard_normal((n, SAMPLE), dtype=np.float32)
    tmp = tempfile.mkdtemp(prefix="ds_read_")
    try:
        chunk = 8192
        batches = []
        for a in range(0, n, chunk):
            part = arr[a:a + chunk]
            values = pa.array(part.reshape(-1))
            col = pa.FixedSizeListArray.from_arrays(values, SAMPLE)
            batches.append(pa.record_batch([col], names=["x"]))
        # 64 MiB shards: 4096 samples each.
        tensorsmith.write_dataset(batches, os.path.join(tmp, "d"), batch_size=4096, dtype="F32")
        del batches
        ds = tensorsmith.Dataset(os.path.join(tmp, "d"))
        assert len(ds) == n
        print(f"{n} samples of {SAMPLE * 4 // 1024} KiB ({n * SAMPLE * 4 / (1 << 30):.2f} GiB), "
              f"{len(ds.manifest()['shards'])} shards; best of {RUNS}")

        def np_order():
            s = 0.0
            for a in range(0, n, BATCH):
                s += float(arr[a:a + BATCH].sum())
            return s

        def ts_order():
            s = 0.0
            for b in ds.batches(BATCH):
                s += float(b["x"].sum())
            return s

        assert np.isclose(np_order(), ts_order(), rtol=1e-3)
        t_np, t_ts = best(np_order), best(ts_order)
        print(f"(1) in order, batches of {BATCH}, a pass over every value: numpy {t_np:.3f} s, "
              f"tensorsmith {t_ts:.3f} s -> {t_np / t_ts:.2f}x (target >= 0.8x)")

        def np_index():
            for i in range(n):
                arr[i]

        def ts_index():
            for i in range(n):
                ds[i]

        def np_index_read():
            for i in range(n):
                arr[i].sum()

        def ts_index_read():
            for i in range(n):
                ds[i]["x"].sum()

        t_np, t_ts = best(np_index), best(ts_index)
        print(f"(2) per sample, indexing only: numpy {n / t_np:,.0f}/s, tensorsmith {n / t_ts:,.0f}/s"
              f" -> {t_np / t_ts:.2f}x (target >= 0.5x)")
        t_np, t_ts = best(np_index_read), best(ts_index_read)
        print(f"    per sample, indexing + a pass over its values: numpy {n / t_np:,.0f}/s, "
              f"tensorsmith {n / t_ts:,.0f}/s -> {t_np / t_ts:.2f}x")

        perm = np.random.default_rng(1).permutation(n)

        def np_shuffled():
            s = 0.0
            for a in range(0, n, BATCH):
                s += float(arr[perm[a:a + BATCH]].sum())
            return s

        def ts_shuffled():
            s = 0.0
            for b in ds.batches(BATCH, shuffle=1):
                s += float(b["x"].sum())
            return s

        t_np, t_ts = best(np_shuffled), best(ts_shuffled)
        print(f"(3) shuffled batches of {BATCH}: numpy fancy index {t_np:.3f} s, "
              f"tensorsmith {t_ts:.3f} s -> {t_np / t_ts:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
