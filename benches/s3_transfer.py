#!/usr/bin/env python3
"""Object-store transfers against a disk-backed S3 server (issue #33's targets), in one run:
    inspect, hash   `tensorsmith inspect|hash s3://bench/m.safetensors`: bytes moved, counted
                    by a TCP forwarder in front of the server (target < 1 MiB)
    download        `tensorsmith convert s3://bench/m.safetensors out.safetensors` against
                    boto3's `download_file` (TransferConfig defaults: 10 threads, 8 MiB parts)
                    + fsync (our convert fsyncs its output: equal work), boto3 without the
                    fsync, and the server's floor (boto3 `get_object` streamed to /dev/null);
                    interleaved runs, medians, each ratio (target: ours >= 0.8x boto3)
    upload          `tensorsmith convert m.safetensors s3://bench/up-ours.safetensors` (a
                    multipart upload streamed from the writer) against boto3's `upload_file`
                    (TransferConfig defaults: 10 threads, 8 MiB parts) of the same file
                    (target: ours >= 0.8x boto3)
    RssAnon         peak anonymous memory of our convert in each direction, polled from
                    /proc (<= 256 MiB)

    cargo build --release -p tensorsmith-cli
    cargo install --locked s3s-fs@0.14.1 --features binary --root target/s3s-fs
    .venv/bin/python benches/s3_transfer.py          # needs boto3 (tests/python/requirements.txt)

The object: S3_BENCH_GIB (default 4) GiB of random bytes as a safetensors file of four
tensors (F32, F32, BF16, BF16), uploaded once with boto3. The server: `s3s-fs` (a filesystem
behind the S3 protocol, from crates.io; S3S_FS_BIN, default target/s3s-fs/bin/s3s-fs) on
127.0.0.1 over a temporary folder. Environment: S3_BENCH_RUNS (default 3), S3_BENCH_DIR
(default /tmp/s3-bench: the server's store; removed at the end unless S3_BENCH_KEEP=1),
S3_BENCH_OUT (default S3_BENCH_DIR: the uploaded source and the downloads, one at a time; a
tmpfs such as /dev/shm where the disk cannot hold two copies), TENSORSMITH_BIN (default
target/release/tensorsmith), TENSORSMITH_BASE_BIN (another build raced as "before"),
S3_BENCH_OPTIONS (extra `--storage-option`s for our convert,
space-separated KEY=VALUE), S3_BENCH_DIRECTIONS (default "download upload").

A direction is a function returning the jobs to race (name -> command) and the files to
remove between runs (the uploads' objects are files in the server's folder). The local
source file stays in S3_BENCH_OUT for the upload direction: the disk holds it, the server's
copy and one download or upload at a time (3x S3_BENCH_GIB).
"""

import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
GIB = float(os.environ.get("S3_BENCH_GIB", "4"))
RUNS = int(os.environ.get("S3_BENCH_RUNS", "3"))
DIR = pathlib.Path(os.environ.get("S3_BENCH_DIR", "/tmp/s3-bench"))
OUT = pathlib.Path(os.environ.get("S3_BENCH_OUT", str(DIR)))
BIN = os.environ.get("TENSORSMITH_BIN", str(REPO / "target" / "release" / "tensorsmith"))
# Another build of ours raced beside it ("before": a binary of an earlier revision, to show a
# change is no slower); unset: not run.
BASE = os.environ.get("TENSORSMITH_BASE_BIN")
S3S = os.environ.get("S3S_FS_BIN", str(REPO / "target" / "s3s-fs" / "bin" / "s3s-fs"))
OPTIONS = os.environ.get("S3_BENCH_OPTIONS", "").split()
KEY, SECRET, REGION = "AKIABENCHKEY", "benchSecretKey/123", "us-east-1"
BUCKET, OBJECT = "bench", "m.safetensors"
URL = f"s3://{BUCKET}/{OBJECT}"

# Each with the endpoint (argv[1]), bucket, key and output path; `fsync` argument: fsync it.
BOTO = """
import os, sys, boto3
endpoint, bucket, key, out, how = sys.argv[1:6]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                  aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
if how == "upload":
    s3.upload_file(out, bucket, key)
elif how == "floor":
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    with open(os.devnull, "wb") as f:
        for chunk in body.iter_chunks(1 << 20):
            f.write(chunk)
else:
    s3.download_file(bucket, key, out)
    if how == "fsync":
        fd = os.open(out, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, what):
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.time() > deadline:
                sys.exit(f"{what} did not start on port {port}")
            time.sleep(0.1)


def start_server(root):
    port = free_port()
    p = subprocess.Popen([S3S, "--host", "127.0.0.1", "--port", str(port), "--access-key", KEY,
                          "--secret-key", SECRET, str(root)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port, "s3s-fs")
    return p, f"http://127.0.0.1:{port}"


class CountingProxy:
    """A TCP forwarder on 127.0.0.1 that counts the bytes the server sends back."""

    def __init__(self, endpoint):
        host, port = endpoint.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.down = 0
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self.pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self.pipe, args=(server, client, True), daemon=True).start()

    def pipe(self, src, dst, count):
        try:
            while data := src.recv(1 << 16):
                if count:
                    with self.lock:
                        self.down += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def write_model(path):
    """GIB GiB of random bytes as four tensors: two F32, two BF16, a quarter each."""
    quarter = int(GIB * (1 << 30)) // 4 // 4 * 4
    tensors, off = {}, 0
    for i, dtype in enumerate(["F32", "F32", "BF16", "BF16"]):
        n = quarter // (4 if dtype == "F32" else 2)
        tensors[f"layers.{i}.weight"] = {"dtype": dtype, "shape": [n],
                                         "data_offsets": [off, off + quarter]}
        off += quarter
    header = json.dumps(tensors, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little"))
        f.write(header)
        chunk = os.urandom(64 << 20)
        left = off
        while left:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n


def env(endpoint):
    e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    e.update(AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION=REGION,
             AWS_ENDPOINT_URL=endpoint, HOME=str(DIR))
    return e


def timed(cmd, e):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=e)
    return time.perf_counter() - t


def peak_rss_anon(cmd, e):
    """Runs `cmd`, polling its RssAnon every 5 ms; returns the peak in KiB."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=e)
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
            time.sleep(0.005)

    th = threading.Thread(target=poll)
    th.start()
    p.wait()
    th.join()
    assert p.returncode == 0
    return peak


def storage_options():
    return [a for o in OPTIONS for a in ("--storage-option", o)]


def download(endpoint):
    """Jobs of the download direction, and the files they leave."""
    ours, boto = OUT / "ours.safetensors", OUT / "boto.safetensors"
    py = [sys.executable, "-c", BOTO, endpoint, BUCKET, OBJECT, str(boto)]
    jobs = {
        "ours": [BIN, "convert", URL, str(ours)] + storage_options(),
        "boto3+fsync": py + ["fsync"],
        "boto3": py + ["plain"],
        "floor": py + ["floor"],
    }
    before = OUT / "before.safetensors"
    if BASE:
        jobs["before"] = [BASE, "convert", URL, str(before)] + storage_options()
    return jobs, [ours, boto, before]


def upload(endpoint):
    """Jobs of the upload direction (the same local file up under two names), and the
    objects they leave (files in the server's folder)."""
    src = OUT / "source.safetensors"
    py = [sys.executable, "-c", BOTO, endpoint, BUCKET, "up-boto.safetensors", str(src)]
    jobs = {
        "ours": [BIN, "convert", str(src), f"s3://{BUCKET}/up-ours.safetensors"]
        + storage_options(),
        "boto3": py + ["upload"],
    }
    if BASE:
        jobs["before"] = [BASE, "convert", str(src), f"s3://{BUCKET}/up-before.safetensors"] \
            + storage_options()
    store = DIR / "store" / BUCKET
    return jobs, [store / f"up-{n}.safetensors" for n in ("ours", "boto", "before")]


DIRECTIONS = {"download": download, "upload": upload}
TARGETS = {"download": ("boto3+fsync", 0.8), "upload": ("boto3", 0.8)}


def race(name, endpoint, e):
    """RUNS interleaved runs of every job of a direction; prints medians and ratios."""
    jobs, leftovers = DIRECTIONS[name](endpoint)
    t = {k: [] for k in jobs}
    for run in range(RUNS):
        order = list(jobs) if run % 2 == 0 else list(jobs)[::-1]
        for job in order:
            for f in leftovers:
                f.unlink(missing_ok=True)
            subprocess.run(["sync"])
            time.sleep(0.5)
            t[job].append(timed(jobs[job], e))
    for f in leftovers:
        f.unlink(missing_ok=True)
    med = {k: statistics.median(v) for k, v in t.items()}
    size = GIB * (1 << 30)
    print(f"{name}: medians of {RUNS} interleaved runs")
    for job, secs in med.items():
        runs = " ".join(f"{s:.2f}" for s in t[job])
        print(f"  {job:12} {secs:7.2f} s  {size / secs / (1 << 20):7.0f} MiB/s   (runs: {runs})")
    for job in med:
        if job != "ours":
            print(f"  {job}/ours {med[job] / med['ours']:5.2f}x")
    base, target = TARGETS[name]
    print(f"  target: {base}/ours >= {target}x")
    peak = peak_rss_anon(jobs["ours"], e)
    for f in leftovers:
        f.unlink(missing_ok=True)
    print(f"  peak RssAnon of ours {peak / 1024:6.1f} MiB   (target <= 256 MiB)")
    if "before" in jobs:
        peak = peak_rss_anon(jobs["before"], e)
        for f in leftovers:
            f.unlink(missing_ok=True)
        print(f"  peak RssAnon of before {peak / 1024:6.1f} MiB")


def moved(cmd, endpoint):
    """Bytes the server sends back while `cmd` runs through a counting forwarder."""
    proxy = CountingProxy(endpoint)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env(proxy.endpoint))
    return proxy.down


def main():
    for exe, how in ((BIN, "cargo build --release -p tensorsmith-cli"),
                     (S3S, "cargo install --locked s3s-fs@0.14.1 --features binary "
                           "--root target/s3s-fs")):
        if not os.access(exe, os.X_OK):
            sys.exit(f"{exe} missing: {how}")
    import boto3
    DIR.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    root = DIR / "store"
    root.mkdir(exist_ok=True)
    server, endpoint = start_server(root)
    try:
        e = env(endpoint)
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name=REGION)
        local = OUT / "source.safetensors"
        if not local.exists():
            write_model(local)
        if not (root / BUCKET / OBJECT).exists():
            if BUCKET not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
                s3.create_bucket(Bucket=BUCKET)
            s3.upload_file(str(local), BUCKET, OBJECT)
        size = s3.head_object(Bucket=BUCKET, Key=OBJECT)["ContentLength"]
        print(f"{URL}: {size / (1 << 30):.2f} GiB in 4 tensors, s3s-fs on {endpoint} over "
              f"{root}, downloads to {OUT}; {os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.2f}; {BIN} {' '.join(OPTIONS)}")
        for cmd in ("inspect", "hash"):
            n = moved([BIN, cmd, URL], endpoint)
            print(f"{cmd:8} moved {n / 1024:8.1f} KiB   (target < 1 MiB)")
        for name in os.environ.get("S3_BENCH_DIRECTIONS", "download upload").split():
            race(name, endpoint, e)
    finally:
        server.terminate()
        server.wait(10)
        if os.environ.get("S3_BENCH_KEEP") != "1":
            shutil.rmtree(DIR)
            if OUT != DIR:
                shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
