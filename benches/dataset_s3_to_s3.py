#!/usr/bin/env python3
"""Parquet on S3 to a dataset on S3 (issue #33's target), against a disk-backed S3 server, in
one run, interleaved, medians:
    ours     `tensorsmith dataset write s3://bench/in/ s3://bench/out-… --batch-size N
             --columns emb --dtype F32` (the input read by ranged GETs through the Parquet
             reader, shards uploaded as written)
    ours-pages   the same with --parquet-remote-pages (the page plan: page headers and
             levels scanned by small ranged GETs, then pages decoded into shards), when
             DS_BENCH_PAGES=1
    script   what one writes without us: pyarrow.fs.S3FileSystem reads each Parquet file a
             batch of N rows at a time (only `emb`), NumPy makes the (N, 1024) array,
             safetensors.numpy.save_file writes it to a temporary file, boto3's upload_file
             uploads it (TransferConfig defaults)
    floor    the server's floor for the same bytes: boto3 downloading every input object
             (download_fileobj to nowhere, TransferConfig defaults: 10 threads, 8 MiB parts)
             then uploading as many objects of the shards' size (put_object, 10 at once)
Target: ours >= 3x the script, or within 1.2x of the floor. Peak RssAnon of our process,
polled from /proc.

    cargo build --release -p tensorsmith-cli
    cargo install --locked s3s-fs@0.14.1 --features binary --root target/s3s-fs
    .venv/bin/python benches/dataset_s3_to_s3.py      # boto3, pyarrow, safetensors (.venv)

The input: DS_BENCH_GIB (default 2) GiB of Parquet as pyarrow writes it by default (snappy,
dictionary on: the random floats fall back to PLAIN pages), files of DS_BENCH_FILE_MIB
(default 256) MiB: `emb` list<float32> of 1024 values per row, `label` int64. Uploaded once
with boto3 into `s3s-fs` (S3S_FS_BIN, default target/s3s-fs/bin/s3s-fs) on 127.0.0.1 over
DS_BENCH_DIR (default /tmp/ds-s3-bench; removed at the end unless DS_BENCH_KEEP=1).
DS_BENCH_BATCH (default 4096 rows: 16 MiB shards), DS_BENCH_RUNS (default 3),
TENSORSMITH_BIN (default target/release/tensorsmith), TENSORSMITH_BASE_BIN (an earlier
build raced as "before"). Outputs are removed between runs.
"""

import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benches"))
from s3_transfer import start_server  # noqa: E402  (s3s-fs on a free port, same keys)
GIB = float(os.environ.get("DS_BENCH_GIB", "2"))
FILE_MIB = int(os.environ.get("DS_BENCH_FILE_MIB", "256"))
BATCH = int(os.environ.get("DS_BENCH_BATCH", "4096"))
RUNS = int(os.environ.get("DS_BENCH_RUNS", "3"))
DIR = pathlib.Path(os.environ.get("DS_BENCH_DIR", "/tmp/ds-s3-bench"))
BIN = os.environ.get("TENSORSMITH_BIN", str(REPO / "target" / "release" / "tensorsmith"))
# Another build of ours raced beside it as "before" (an earlier revision's binary); unset: none.
BASE = os.environ.get("TENSORSMITH_BASE_BIN")
S3S = os.environ.get("S3S_FS_BIN", str(REPO / "target" / "s3s-fs" / "bin" / "s3s-fs"))
KEY, SECRET, REGION = "AKIABENCHKEY", "benchSecretKey/123", "us-east-1"
BUCKET, WIDTH = "bench", 1024

# The script a user writes without us: argv endpoint, bucket, input prefix, output prefix,
# batch rows.
SCRIPT = """
import os, sys, tempfile, boto3, numpy as np, pyarrow.fs as pafs, pyarrow.parquet as pq
from safetensors.numpy import save_file
endpoint, bucket, prefix, out, batch = sys.argv[1:6]
key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
fs = pafs.S3FileSystem(access_key=key, secret_key=secret, region="us-east-1",
                       endpoint_override=endpoint.removeprefix("http://"), scheme="http")
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key,
                  aws_secret_access_key=secret, region_name="us-east-1")
files = sorted(f.path for f in fs.get_file_info(pafs.FileSelector(f"{bucket}/{prefix}"))
               if f.type == pafs.FileType.File and not f.base_name.startswith(("_", ".")))
n = 0
with tempfile.TemporaryDirectory() as tmp:
    for path in files:
        with fs.open_input_file(path) as f:
            for b in pq.ParquetFile(f).iter_batches(batch_size=int(batch), columns=["emb"]):
                col = b.column(0)
                a = col.values.to_numpy().reshape(len(col), -1)
                shard = os.path.join(tmp, f"part-{n:05d}.safetensors")
                save_file({"emb": a}, shard)
                s3.upload_file(shard, bucket, f"{out}/part-{n:05d}.safetensors")
                os.remove(shard)
                n += 1
"""

# The floor: argv endpoint, bucket, input prefix, output prefix, shard bytes, shard count.
FLOOR = """
import io, os, sys, boto3
endpoint, bucket, prefix, out, size, count = sys.argv[1:7]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                  aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
class Nowhere(io.RawIOBase):
    def writable(self):
        return True
    def write(self, b):
        return len(b)
for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")["Contents"]:
    s3.download_fileobj(bucket, o["Key"], Nowhere())
body = os.urandom(int(size))
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(10) as pool:
    list(pool.map(lambda i: s3.put_object(Bucket=bucket, Key=f"{out}/part-{i:05d}.safetensors",
                                          Body=body), range(int(count))))
"""


def env(endpoint):
    e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    e.update(AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION=REGION,
             AWS_ENDPOINT_URL=endpoint, HOME=str(DIR))
    return e


def write_inputs(s3, tmp):
    """GIB GiB of pyarrow-default Parquet in files of FILE_MIB MiB, uploaded under in/."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = FILE_MIB * (1 << 20) // (WIDTH * 4)
    files = max(1, round(GIB * 1024 / FILE_MIB))
    rng = np.random.default_rng(0)
    for i in range(files):
        v = rng.standard_normal((rows, WIDTH), dtype=np.float32)
        emb = pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), WIDTH)
        t = pa.table({"emb": emb.cast(pa.list_(pa.float32())),
                      "label": pa.array(np.arange(rows) % 10)})
        local = tmp / f"part-{i:03d}.parquet"
        pq.write_table(t, local)
        s3.upload_file(str(local), BUCKET, f"in/part-{i:03d}.parquet")
        local.unlink()
    return files, rows


def run_polled(cmd, e):
    """(seconds, peak RssAnon KiB) of `cmd`, polled every 10 ms from /proc."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=e)
    peak = 0

    def poll():
        nonlocal peak
        while p.poll() is None:
            try:
                for line in open(f"/proc/{p.pid}/status"):
                    if line.startswith("RssAnon:"):
                        peak = max(peak, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.01)

    th = threading.Thread(target=poll)
    th.start()
    _, err = p.communicate()
    th.join()
    secs = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{cmd[:4]} failed: {err.decode(errors='replace')}")
    return secs, peak


def main():
    for exe, how in ((BIN, "cargo build --release -p tensorsmith-cli"),
                     (S3S, "cargo install --locked s3s-fs@0.14.1 --features binary "
                           "--root target/s3s-fs")):
        if not os.access(exe, os.X_OK):
            sys.exit(f"{exe} missing: {how}")
    import boto3

    DIR.mkdir(parents=True, exist_ok=True)
    root = DIR / "store"
    root.mkdir(exist_ok=True)
    server, endpoint = start_server(root)
    try:
        e = env(endpoint)
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name=REGION)
        if BUCKET not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
            s3.create_bucket(Bucket=BUCKET)
        t0 = time.perf_counter()
        objs = s3.list_objects_v2(Bucket=BUCKET, Prefix="in/").get("Contents", [])
        if not objs:
            write_inputs(s3, DIR)
            objs = s3.list_objects_v2(Bucket=BUCKET, Prefix="in/")["Contents"]
        size = sum(o["Size"] for o in objs)
        print(f"input: {len(objs)} Parquet objects, {size / (1 << 30):.2f} GiB (made in "
              f"{time.perf_counter() - t0:.0f} s); s3s-fs on {endpoint} over {root}; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; {BIN}")
        ours = [BIN, "dataset", "write", f"s3://{BUCKET}/in/", None, "--batch-size",
                str(BATCH), "--columns", "emb", "--dtype", "F32", "--retain", "0"]
        jobs = {
            "ours": lambda out: [*ours[:4], f"s3://{BUCKET}/{out}", *ours[5:]],
            "script": lambda out: [sys.executable, "-c", SCRIPT, endpoint, BUCKET, "in", out,
                                   str(BATCH)],
        }
        if BASE:
            jobs["before"] = lambda out: [BASE, *jobs["ours"](out)[1:]]
        if os.environ.get("DS_BENCH_PAGES") == "1":
            jobs["ours-pages"] = lambda out: [*jobs["ours"](out), "--parquet-remote-pages"]
        # The floor moves what ours moves: the shards' bytes, learned from a first write.
        secs, _ = run_polled(jobs["ours"]("out-warm"), e)
        shards = [o for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="out-warm/")["Contents"]
                  if o["Key"].rsplit("/", 1)[1].startswith("part-")]
        shard_size = max(o["Size"] for o in shards)
        print(f"warm-up write: {secs:.1f} s, {len(shards)} shards of {shard_size} bytes")
        jobs["floor"] = lambda out: [sys.executable, "-c", FLOOR, endpoint, BUCKET, "in", out,
                                     str(shard_size), str(len(shards))]
        shutil.rmtree(root / BUCKET / "out-warm", ignore_errors=True)
        times = {k: [] for k in jobs}
        peaks = {k: [] for k in jobs}
        for run in range(RUNS):
            order = list(jobs) if run % 2 == 0 else list(jobs)[::-1]
            for job in order:
                out = f"out-{job}-{run}"
                subprocess.run(["sync"])
                time.sleep(0.5)
                secs, peak = run_polled(jobs[job](out), e)
                times[job].append(secs)
                peaks[job].append(peak)
                shutil.rmtree(root / BUCKET / out, ignore_errors=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"medians of {RUNS} interleaved runs (load now {os.getloadavg()[0]:.2f}):")
        for job, secs in med.items():
            runs = " ".join(f"{s:.1f}" for s in times[job])
            print(f"  {job:12} {secs:7.1f} s  {size / secs / (1 << 20):6.0f} MiB/s in  "
                  f"peak RssAnon {max(peaks[job]) / 1024:6.0f} MiB   (runs: {runs})")
        print(f"  script/ours {med['script'] / med['ours']:5.2f}x   (target >= 3x)")
        print(f"  ours/floor  {med['ours'] / med['floor']:5.2f}x   (target <= 1.2x)")
        if "before" in med:
            print(f"  before/ours {med['before'] / med['ours']:5.2f}x   (target >= 1.0x: no slower "
                  f"than the earlier build)")
        if "ours-pages" in med:
            print(f"  script/ours-pages {med['script'] / med['ours-pages']:5.2f}x, "
                  f"ours-pages/floor {med['ours-pages'] / med['floor']:5.2f}x")
    finally:
        server.terminate()
        server.wait(10)
        if os.environ.get("DS_BENCH_KEEP") != "1":
            shutil.rmtree(DIR)


if __name__ == "__main__":
    main()
