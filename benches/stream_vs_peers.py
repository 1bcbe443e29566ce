#!/usr/bin/env python3
"""Issue #42: one epoch of the same samples through three streaming readers off one S3 server
(s3s-fs on 127.0.0.1), each epoch in a fresh process, interleaved, with samples/s and the bytes
the store sent (a counting TCP proxy in front of it, s3_transfer.py's with 1 MiB reads):

    ours     DataLoader(TensorIterableDataset("s3://bench/ds", storage_options=...,
             cache_dir=..., cache_limit=..., shuffle=1, shuffle_kind="block",
             shuffle_block_size=SP_BLOCK, batch_size=256), batch_size=None, num_workers=2)
    mosaic   DataLoader(streaming.StreamingDataset(remote="s3://bench/mds", local=...,
             shuffle=True, shuffle_algo="py1e" / "py1br", shuffle_seed=1, batch_size=256,
             cache_limit=...), batch_size=256, num_workers=2); endpoint from S3_ENDPOINT_URL,
             keys from AWS_* (boto3)
    litdata  litdata.StreamingDataLoader(litdata.StreamingDataset("s3://bench/lit",
             cache_dir=..., storage_options={endpoint_url, keys, region}, shuffle=True, seed=1,
             max_cache_size=...), batch_size=256, num_workers=2)
    floor    boto3 get_object of every shard of ours, 2 threads, bodies dropped: the server's
             own rate, before any reader's work (the cold row's bound)
All DataLoaders fork their workers.

Two of the peers need a hand here, both in their child code below: MosaicML 0.13's workers
inherit the boto3 client (and its pooled connection) the parent fetched index.json with, and
two forked workers on one socket got each other's bytes (corrupt shards: wrong sums, or a 60 s
read timeout) - the client is dropped before the DataLoader forks. LitData's chunk GETs go
through obstore, whose HTTP client refuses an http:// endpoint (BadScheme) - allow_http is
added to the client options LitData passes it.

The data: SP_MIB (default 512) MiB of 64 KiB samples (16384 float32, uniform [0, 1), seed 0),
written three times into the server's folder (s3s-fs serves its files as objects): ours by
`tensorsmith.write_dataset`, MDS by `streaming.MDSWriter` (column `ndarray:float32:16384`),
LitData by `litdata.optimize`; 256 samples (16 MiB) a shard or chunk in each. Every reader
sums every value it receives (float64, in the main process) and counts its samples; both must
equal the data's, or the run stops.

Modes, one epoch each (the dataset's construction and the DataLoader's start-up included):
    local     ours only: the dataset's folder read directly (page cache warm)
    cold      an empty cache folder, no cache limit (>= the dataset)
    warm      the same cache folder again, in a new process
    quarter1  an empty cache folder, cache limit = a quarter of the dataset (ours cache_limit,
              MosaicML cache_limit, LitData max_cache_size)
    quarter2  the same quarter-limited folder again (what a steady-state epoch fetches)
MosaicML under the quarter limit runs with shuffle_block_size SP_MOSAIC_QBLOCK (default 1024)
and predownload SP_MOSAIC_QPREDOWNLOAD (default 512): its defaults (one block over every shard,
8 batches of predownload a worker) thrash there ("default" restores them). LitData's quarter
modes are skipped unless SP_LIT_QUARTER=1: litdata 0.2.76 hangs there (ChunkWaitTimeoutError).
A round runs the modes in that order, the readers in an order rotated from round to round; the
table shows medians over SP_RUNS rounds, each reader's time, samples/s and MiB fetched, and
ratios ours samples/s / peer samples/s (>= 1.0: ours is faster).

    python3 -m venv .venv-bench-stream
    .venv-bench-stream/bin/pip install -r benches/requirements-stream-peers.txt
    PYTHONPATH=crates/tensorsmith-py/python S3S_FS_BIN=target/s3s-fs/bin/s3s-fs SP_RUNS=2 \\
        .venv-bench-stream/bin/python benches/stream_vs_peers.py

(s3s-fs: `cargo install --locked s3s-fs@0.14.1 --features binary --root target/s3s-fs`;
tensorsmith's compiled module must be in crates/tensorsmith-py/python/tensorsmith, e.g. by
`maturin develop`.) Environment: SP_MIB (2048: the issue's 2 GiB), SP_RUNS (default 1),
SP_BLOCK (our shuffle block, default 256 samples), SP_MODES (default "cold warm quarter1
quarter2"), SP_READERS (default "ours mosaic litdata"), SP_MOSAIC_ALGOS (default "py1e
py1br"), SP_TIMEOUT (seconds an epoch may take, default 180: then killed and shown as ">"),
SP_DIRECT=1 (readers go to the server itself: no proxy on the path, nothing counted),
SP_LIT_OPTIONS (JSON of more litdata.StreamingDataset arguments), SP_LIT_NO_OBSTORE=1 (LitData
fetches chunks with boto3), SP_FAIL_LINES (lines of a failed reader's output shown, 15),
SP_DIR (scratch, default /tmp/sp-bench; removed after), S3S_FS_BIN. Every reader runs with
AWS_EC2_METADATA_DISABLED=true and HOME in the scratch folder. Each epoch's line also gives
the peak RssAnon of the reading process and of its largest worker (or other child), polled
every 20 ms, and how far that worker grew above the parent's RssAnon before the first batch
(what a forked worker starts with: torch's imports; the batches in flight are in shared
memory, not counted there).
"""

import json
import os
import pathlib
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import s3_transfer  # noqa: E402

MIB = float(os.environ.get("SP_MIB", "512"))
RUNS = int(os.environ.get("SP_RUNS", "1"))
BLOCK = int(os.environ.get("SP_BLOCK", "256"))
MODES = os.environ.get("SP_MODES", "cold warm quarter1 quarter2").split()
READERS = os.environ.get("SP_READERS", "ours mosaic litdata").split()
ALGOS = os.environ.get("SP_MOSAIC_ALGOS", "py1e py1br").split()
DIR = pathlib.Path(os.environ.get("SP_DIR", "/tmp/sp-bench"))
TIMEOUT = int(os.environ.get("SP_TIMEOUT", "180"))
# MosaicML under a quarter-size cache_limit: its default shuffle_block_size (>= 262144 samples:
# every shard in one block) and predownload (8 batches a worker, more than the whole cache)
# thrash (more than 7 minutes for 512 MiB, not finished); these are set instead.
# "default": Mosaic's own.
MOSAIC_QBLOCK = os.environ.get("SP_MOSAIC_QBLOCK", "1024")
MOSAIC_QPREDOWNLOAD = os.environ.get("SP_MOSAIC_QPREDOWNLOAD", "512")
# LitData 0.2.76 under a quarter-size max_cache_size hangs here (a DataLoader worker waits 120 s
# for a chunk and raises ChunkWaitTimeoutError; max_pre_download=1 and boto3 instead of obstore
# do the same): skipped unless SP_LIT_QUARTER=1.
LIT_QUARTER = os.environ.get("SP_LIT_QUARTER") == "1"
WIDTH, PER_SHARD, BATCH, WORKERS = 16384, 256, 256, 2
KEY, SECRET, REGION = s3_transfer.KEY, s3_transfer.SECRET, s3_transfer.REGION


class Proxy(s3_transfer.CountingProxy):
    """s3_transfer's counting proxy with 1 MiB reads (less of its CPU on two cores)."""

    def pipe(self, src, dst, count):
        try:
            while data := src.recv(1 << 20):
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


# ---------------------------------------------------------------- the readers (child process)

def read_ours(spec):
    from torch.utils.data import DataLoader
    from tensorsmith.torch import TensorIterableDataset
    kw = {}
    if spec["mode"] != "local":
        kw = dict(storage_options={"key": KEY, "secret": SECRET, "region": REGION,
                                   "endpoint_url": spec["endpoint"]},
                  cache_dir=spec["cache"], cache_limit=spec["limit"])
    ds = TensorIterableDataset(spec["url"], shuffle=1, shuffle_kind="block",
                               shuffle_block_size=BLOCK, batch_size=BATCH, **kw)
    loader = DataLoader(ds, batch_size=None, num_workers=WORKERS,
                        multiprocessing_context="fork")
    return (b["x"] for b in loader)


def read_mosaic(spec):
    from torch.utils.data import DataLoader
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory
    clean_stale_shared_memory()
    kw = {}
    if spec["limit"] is not None:
        for key, value in (("shuffle_block_size", MOSAIC_QBLOCK),
                           ("predownload", MOSAIC_QPREDOWNLOAD)):
            if value != "default":
                kw[key] = int(value)
    ds = StreamingDataset(remote=spec["url"], local=spec["cache"], shuffle=True,
                          shuffle_algo=spec["algo"], shuffle_seed=1, batch_size=BATCH,
                          cache_limit=spec["limit"], **kw)
    # The parent fetched index.json with a boto3 client whose pooled keep-alive connection
    # forked workers would inherit and share, interleaving two shards' bodies on one socket
    # (streaming 0.13 under fork: corrupt shards, wrong sums or a 60 s read timeout). Dropped
    # here so each worker makes its own.
    for stream in ds.streams:
        stream._downloader.clean_up()
    loader = DataLoader(ds, batch_size=BATCH, num_workers=WORKERS,
                        multiprocessing_context="fork")
    return (b["x"] for b in loader)


def read_litdata(spec):
    from litdata import StreamingDataLoader, StreamingDataset
    from litdata.streaming import downloader
    # LitData's chunk GETs go through obstore, whose HTTP client refuses an http:// endpoint
    # (reqwest BadScheme) unless allow_http is among its client options; LitData passes fixed
    # ones (AWS_ALLOW_HTTP in the environment does not reach them), so it is added there.
    downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True
    if os.environ.get("SP_LIT_NO_OBSTORE") == "1":  # boto3 for the chunks too
        downloader._OBSTORE_AVAILABLE = False
    kw = json.loads(os.environ.get("SP_LIT_OPTIONS", "{}"))  # more StreamingDataset arguments
    ds = StreamingDataset(spec["url"], cache_dir=spec["cache"], shuffle=True, seed=1, **kw,
                          max_cache_size=spec["limit"] or "100GB",
                          storage_options={"endpoint_url": spec["endpoint"],
                                           "aws_access_key_id": KEY,
                                           "aws_secret_access_key": SECRET,
                                           "region_name": REGION})
    loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=WORKERS)
    return (b["x"] for b in loader)


def read_floor(spec):
    """The server's floor: every object of our dataset GET by boto3 into memory and dropped,
    WORKERS threads; yields nothing (no sum)."""
    import concurrent.futures
    import boto3
    s3 = boto3.client("s3", endpoint_url=spec["endpoint"], aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name=REGION)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="bench", Prefix="ds/")["Contents"]]

    def get(key):
        body = s3.get_object(Bucket="bench", Key=key)["Body"]
        while body.read(1 << 20):
            pass

    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(get, keys))
    return iter(())


def rss_anon_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                for c in f.read().split():
                    out.append(int(c))
                    out.extend(descendants(int(c)))
    except OSError:
        pass
    return out


def poll_rss(peaks, stop):
    """Peak RssAnon (KiB) of this process and of each process below it (the DataLoader's
    workers, the peers' helpers), every 20 ms until `stop` is set."""
    me = os.getpid()
    while not stop.is_set():
        for pid in [me] + descendants(me):
            peaks[pid] = max(peaks.get(pid, 0), rss_anon_kib(pid))
        stop.wait(0.02)


def child(spec):
    import threading
    import torch
    peaks, stop = {}, threading.Event()
    poller = threading.Thread(target=poll_rss, args=(peaks, stop), daemon=True)
    poller.start()
    t0 = time.perf_counter()
    total, n = 0.0, 0
    batches = globals()["read_" + spec["reader"]](spec)
    base = rss_anon_kib(os.getpid())  # imports done, reader made, workers not yet forked
    for x in batches:
        x = torch.as_tensor(x)
        assert x.shape[1:] == (WIDTH,) and x.dtype == torch.float32, (x.shape, x.dtype)
        total += float(x.sum(dtype=torch.float64))
        n += x.shape[0]
    secs = time.perf_counter() - t0
    stop.set()
    poller.join()
    main = peaks.pop(os.getpid(), 0)
    pathlib.Path(spec["out"]).write_text(json.dumps({
        "secs": secs, "n": n, "total": total, "rss_main": main, "rss_base": base,
        "rss_worker": max(peaks.values(), default=0)}))


# ---------------------------------------------------------------- writing (parent)

_FLAT = None  # the samples, flat (litdata.optimize's forked workers read it)


def lit_sample(i):
    return {"x": _FLAT[i * WIDTH:(i + 1) * WIDTH]}


def write_all(bucket, n):
    global _FLAT
    import numpy as np
    import pyarrow as pa
    import tensorsmith
    _FLAT = np.random.default_rng(0).random(n * WIDTH, dtype=np.float32)
    expected = float(_FLAT.sum(dtype=np.float64))
    t = time.perf_counter()
    rows = pa.FixedSizeListArray.from_arrays(pa.array(_FLAT), WIDTH)
    tensorsmith.write_dataset(pa.table({"x": rows}), str(bucket / "ds"), batch_size=PER_SHARD,
                              dtype="F32", threads=2)
    del rows
    print(f"  ours written   {time.perf_counter() - t:5.1f} s", flush=True)
    if "mosaic" in READERS:
        from streaming import MDSWriter
        t = time.perf_counter()
        with MDSWriter(out=str(bucket / "mds"), columns={"x": f"ndarray:float32:{WIDTH}"},
                       size_limit=PER_SHARD * (WIDTH * 4 + 4) + 4096, progress_bar=False) as w:
            for i in range(n):
                w.write({"x": _FLAT[i * WIDTH:(i + 1) * WIDTH]})
        print(f"  MDS written    {time.perf_counter() - t:5.1f} s", flush=True)
    if "litdata" in READERS:
        import litdata
        t = time.perf_counter()
        litdata.optimize(fn=lit_sample, inputs=list(range(n)), output_dir=str(bucket / "lit"),
                         chunk_size=PER_SHARD, num_workers=2, start_method="fork",
                         verbose=False)
        print(f"  LitData written {time.perf_counter() - t:5.1f} s", flush=True)
    _FLAT = None
    return expected


def folder_bytes(path):
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ---------------------------------------------------------------- the run (parent)

def main():
    if not os.access(s3_transfer.S3S, os.X_OK):
        sys.exit(f"{s3_transfer.S3S} missing: set S3S_FS_BIN, or cargo install --locked "
                 "s3s-fs@0.14.1 --features binary --root target/s3s-fs")
    shutil.rmtree(DIR, ignore_errors=True)
    root = DIR / "s3"
    bucket = root / "bench"
    bucket.mkdir(parents=True)
    (DIR / "home").mkdir()
    n = int(MIB * (1 << 20) // (WIDTH * 4))
    print(f"{n} samples of {WIDTH * 4 // 1024} KiB ({n * WIDTH * 4 / 2**20:.0f} MiB); "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
    expected = write_all(bucket, n)
    sizes = {name: folder_bytes(bucket / d) for name, d in
             (("ours", "ds"), ("mosaic", "mds"), ("litdata", "lit")) if (bucket / d).exists()}
    print("  stored: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items()))
    data_bytes = n * WIDTH * 4
    quarter = data_bytes // 4
    server, endpoint = s3_transfer.start_server(root)
    proxy = Proxy(endpoint)
    # SP_DIRECT=1: the readers go to the server itself (no proxy on the path; fetched shows 0).
    reach = endpoint if os.environ.get("SP_DIRECT") == "1" else proxy.endpoint
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION=REGION,
               AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true",
               S3_ENDPOINT_URL=reach, AWS_ENDPOINT_URL=reach,
               HOME=str(DIR / "home"))
    # The jobs: (reader name as shown, reader, options); modes run for each.
    jobs = []
    for r in READERS:
        if r == "mosaic":
            jobs += [(f"mosaic-{a}", "mosaic", {"algo": a}) for a in ALGOS]
        else:
            jobs.append((r, r, {}))
    urls = {"ours": "s3://bench/ds", "mosaic": "s3://bench/mds", "litdata": "s3://bench/lit"}
    results = {}  # (job, mode) -> [(secs, fetched)]
    timeouts = {}  # (job, mode) -> [fetched before the kill]
    counter = [0]

    def run(name, reader, opts, mode, cache, limit, url):
        counter[0] += 1
        out = DIR / f"result-{counter[0]}.json"
        spec = dict(opts, reader=reader, mode=mode, url=url, cache=str(cache), limit=limit,
                    endpoint=reach, out=str(out))
        before = proxy.down
        p = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(spec)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        try:
            log, _ = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the child and its DataLoader workers
            p.communicate()
            fetched = proxy.down - before
            print(f"  {name:13s} {mode:8s} TIMEOUT after {TIMEOUT} s, fetched "
                  f"{fetched / 2**20:7.1f} MiB so far", flush=True)
            timeouts.setdefault((name, mode), []).append(fetched)
            return
        fetched = proxy.down - before
        if p.returncode != 0 or not out.exists():
            print(f"  {name} {mode}: FAILED (exit {p.returncode})\n" +
                  "\n".join("    " + line for line in log.splitlines()[-int(os.environ.get("SP_FAIL_LINES", "15")):]), flush=True)
            return
        r = json.loads(out.read_text())
        ok = reader == "floor" or r["n"] == n and abs(r["total"] - expected) <= 1e-6 * abs(expected)
        rss = f"RssAnon main {r['rss_main'] / 1024:.0f} MiB"
        if r["rss_worker"]:
            rss += (f", worker {r['rss_worker'] / 1024:.0f} MiB (+"
                    f"{(r['rss_worker'] - r['rss_base']) / 1024:.0f} over the forked parent's)")
        print(f"  {name:13s} {mode:8s} {r['secs']:7.2f} s {n / r['secs']:7.0f} samples/s "
              f"fetched {fetched / 2**20:7.1f} MiB  samples {r['n']} sum {r['total']:.6e}  {rss}"
              f"{'' if ok else '  WRONG (expected ' + str(n) + ', ' + repr(expected) + ')'}",
              flush=True)
        if not ok:
            sys.exit(f"{name} {mode} read wrong data")
        results.setdefault((name, mode), []).append((r["secs"], fetched))

    try:
        print(f"data {data_bytes / 2**20:.0f} MiB; quarter cache limit {quarter / 2**20:.0f} MiB;"
              f" proxy {proxy.endpoint} -> s3s-fs {endpoint}", flush=True)
        if "ours" in READERS:
            run("ours", "ours", {}, "local", "", None, str(bucket / "ds"))  # page cache warm
            results.pop(("ours", "local"), None)
        for rnd in range(RUNS):
            k = rnd % len(jobs)
            order = jobs[k:] + jobs[:k]
            print(f"round {rnd + 1}: {' '.join(j[0] for j in order)}", flush=True)
            caches = {}
            for mode in ["local"] + MODES:
                if mode == "cold":
                    run("floor", "floor", {}, "cold", "", None, "")
                for name, reader, opts in order:
                    if mode == "local":
                        if reader == "ours":
                            run(name, reader, opts, mode, "", None, str(bucket / "ds"))
                        continue
                    kind = "full" if mode in ("cold", "warm") else "quarter"
                    if reader == "litdata" and kind == "quarter" and not LIT_QUARTER:
                        continue
                    cache = DIR / f"cache-{rnd}-{name}-{kind}"
                    if mode in ("cold", "quarter1"):
                        shutil.rmtree(cache, ignore_errors=True)
                    caches[cache] = True
                    run(name, reader, opts, mode, cache,
                        None if kind == "full" else quarter, urls[reader])
            for cache in caches:
                shutil.rmtree(cache, ignore_errors=True)
    finally:
        server.terminate()
        server.wait(10)
    report(jobs, n, data_bytes, results, timeouts)
    shutil.rmtree(DIR, ignore_errors=True)


def report(jobs, n, data_bytes, results, timeouts):
    med = {k: (statistics.median(s for s, _ in v), statistics.median(f for _, f in v))
           for k, v in results.items()}
    print(f"\nmedians of {RUNS} round(s); {n} samples, {data_bytes / 2**20:.0f} MiB; "
          "ratio = ours samples/s / peer samples/s (>= 1.0: ours faster)")
    names = [j[0] for j in jobs]
    if ("floor", "cold") in med:
        secs, fetched = med[("floor", "cold")]
        print(f"floor (boto3 GETs of our shards, {WORKERS} threads, no decoding): {secs:.2f} s, "
              f"{fetched / 2**20:.0f} MiB, {fetched / 2**20 / secs:.0f} MiB/s")
    print(f"{'mode':9s}" + "".join(f"{nm:>28s}" for nm in names))
    for mode in ["local"] + MODES:
        row, any_ = f"{mode:9s}", False
        for nm in names:
            if (nm, mode) in med:
                secs, fetched = med[(nm, mode)]
                cell = f"{secs:6.2f}s {n / secs:6.0f}/s {fetched / 2**20:6.0f}MiB"
                any_ = True
            elif (nm, mode) in timeouts:
                cell = f">{TIMEOUT}s >{max(timeouts[(nm, mode)]) / 2**20:.0f}MiB"
                any_ = True
            else:
                cell = "-"
            row += f"{cell:>28s}"
        if any_:
            print(row)
    if "litdata" in names and not LIT_QUARTER and any(m.startswith("quarter") for m in MODES):
        print("litdata quarter: not run (hangs, ChunkWaitTimeoutError; SP_LIT_QUARTER=1 runs it)")
    print(f"{'ratio':9s}" + "".join(f"{nm:>28s}" for nm in names if nm != "ours"))
    for mode in MODES:
        if ("ours", mode) not in med:
            continue
        row = f"{mode:9s}"
        for nm in names:
            if nm == "ours":
                continue
            cell = (f"{med[(nm, mode)][0] / med[('ours', mode)][0]:.2f}x"
                    if (nm, mode) in med else
                    f">{TIMEOUT / med[('ours', mode)][0]:.1f}x" if (nm, mode) in timeouts else "-")
            row += f"{cell:>28s}"
        print(row)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
    else:
        main()
