#!/usr/bin/env python3
"""Bytes moved reading one column of a dataset on S3 (issue #41 item 4's target: at most 1.1x
the column's bytes, plus headers, manifest and index), against moto in server mode behind a
counting TCP forwarder on 127.0.0.1 (every byte the server sends back, HTTP headers
included). In one run:
    open       `tensorsmith.Dataset("s3://…", columns=["c1"])`: versions, manifest, index
    one column every batch of `ds.batches(DS_COL_BATCH)` of that dataset (one column of
               DS_COL_COLUMNS), against the column's bytes and the dataset's
    again      the same pass a second time (what was read is kept: nothing moves)
    every col  `Dataset("s3://…")` (no `columns`), every batch: each shard fetched whole
    export     `tensorsmith.dataset_export` of the dataset (every column: shards whole)
with wall times for context (moto is slow; the bytes are the figures).

    VIRTUAL_ENV=$PWD/.venv .venv/bin/python -m maturin develop -q -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/dataset_store_column_read.py
    DS_COL_MIB=8 DS_COL_COLUMNS=3 .venv/bin/python benches/dataset_store_column_read.py

DS_COL_MIB (default 32): MiB of each column; DS_COL_COLUMNS (default 4) columns of 1024 f32 a
sample; DS_COL_SHARD_ROWS (default 1024: 4 MiB of each column a shard); DS_COL_BATCH
(default 256 rows a batch).
"""

import os
import pathlib
import socket
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
import local_servers  # noqa: E402
import tensorsmith  # noqa: E402

MIB = float(os.environ.get("DS_COL_MIB", "32"))
COLUMNS = int(os.environ.get("DS_COL_COLUMNS", "4"))
SHARD_ROWS = int(os.environ.get("DS_COL_SHARD_ROWS", "1024"))
BATCH = int(os.environ.get("DS_COL_BATCH", "256"))
WIDTH = 1024
KEY, SECRET = "AKIABENCHCOLUMN", "benchColumnSecret/123"


class Counter:
    """A TCP forwarder to `upstream` (host, port) counting the bytes the server sends back."""

    def __init__(self, upstream):
        self.upstream, self.down, self.lock = upstream, 0, threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            client, _ = self.sock.accept()
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, src, dst, count):
        try:
            while True:
                b = src.recv(1 << 16)
                if not b:
                    break
                if count:
                    with self.lock:
                        self.down += len(b)
                dst.sendall(b)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def moved(self, f):
        """(bytes the server sent back while `f` ran, seconds, f's result)."""
        before, t = self.down, time.perf_counter()
        r = f()
        time.sleep(0.05)  # the last responses' bytes counted
        return self.down - before, time.perf_counter() - t, r


def main():
    rows = int(MIB * (1 << 20)) // (WIDTH * 4)
    servers = local_servers.moto()
    endpoint = next(servers)
    try:
        direct = {"key": KEY, "secret": SECRET, "endpoint_url": endpoint, "region": "us-east-1"}
        import boto3

        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                     aws_secret_access_key=SECRET, region_name="us-east-1"
                     ).create_bucket(Bucket="bench")
        rng = np.random.default_rng(0)
        cols = {}
        for k in range(COLUMNS):
            arr = rng.standard_normal((rows, WIDTH), dtype=np.float32)
            cols[f"c{k}"] = pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1)), WIDTH)
        url = "s3://bench/ds"
        tensorsmith.write_dataset(pa.table(cols), url, storage_options=direct,
                                  batch_size=SHARD_ROWS, dtype="F32", generate_index="true")
        del cols
        host, port = endpoint.removeprefix("http://").split(":")
        counter = Counter((host, int(port)))
        opts = dict(direct, endpoint_url=counter.endpoint)

        opened, t_open, ds = counter.moved(
            lambda: tensorsmith.Dataset(url, storage_options=opts, columns=["c1"]))
        m = ds.manifest()
        total = m["total_bytes"]
        column = rows * WIDTH * 4

        def one_pass(d):
            s = 0.0
            for b in d.batches(BATCH):
                s += float(b[next(iter(b))][:, 0].sum())
            return s

        col, t_col, _ = counter.moved(lambda: one_pass(ds))
        again, t_again, _ = counter.moved(lambda: one_pass(ds))
        every = tensorsmith.Dataset(url, storage_options=opts)
        all_cols, t_all, _ = counter.moved(lambda: one_pass(every))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "e.parquet")
            exp, t_exp, _ = counter.moved(
                lambda: tensorsmith.dataset_export(url, out, storage_options=opts))

        mib = 1 << 20
        print(f"dataset: {rows} samples, {COLUMNS} columns of {WIDTH} f32 "
              f"({column / mib:.1f} MiB each), {len(m['shards'])} shards, "
              f"{total / mib:.1f} MiB in all; moto {endpoint}, bytes counted by a forwarder")
        print(f"open (versions, manifest, index):   {opened:>12,} B  {t_open:6.2f} s")
        print(f"one column, every batch:            {col:>12,} B  {t_col:6.2f} s  "
              f"{col / column:.4f}x the column ({column:,} B), "
              f"{col / total:.4f}x the dataset ({total:,} B)")
        print(f"the same pass again:                {again:>12,} B  {t_again:6.2f} s")
        print(f"every column, every batch:          {all_cols:>12,} B  {t_all:6.2f} s  "
              f"{all_cols / total:.4f}x the dataset")
        print(f"dataset_export (every column):      {exp:>12,} B  {t_exp:6.2f} s  "
              f"{exp / total:.4f}x the dataset")
        target = 1.1 * column + opened
        print(f"target: one column <= 1.1 x column + open = {target:,.0f} B: "
              f"{'met' if col <= target else 'NOT met'}")
    finally:
        next(servers, None)


if __name__ == "__main__":
    main()
