#!/usr/bin/env python3
"""Per-rank loads from an S3 server, the CPU stand-in of a GPU rank's load: rank r of R
keeps its part of each tensor, read by `tensorsmith.torch.load_sharded(url, plan)` into
CPU tensors, against boto3 ranged GETs of the very same byte spans at the same concurrency
into memory (preallocated buffers, each part's body copied in once: what a loader built on
boto3 does), and the server's floor (one boto3 GET per span streamed to nothing at the same
concurrency). The target: ours >= 0.8x boto3's rate. "ring" is the same load through the
CUDA path's pipeline with its CPU stand-in (`HostRing`: plain buffers, CPU tensors), as a
GPU rank reads a store. Beside them, Run:ai's Model Streamer
(`runai-model-streamer` with `runai-model-streamer-s3`, RS_RUNAI_SITE: a folder they are
installed in with `pip install --no-deps --target`, unset: not run), the store peer built
for model loads: it streams whole tensors (its `tensor_names` filter picks tensors, not
parts), so a rank's parts come from whole tensors narrowed; its concurrency set to the same
RS_CONCURRENCY (RUNAI_STREAMER_CONCURRENCY). And the whole model (a rank of one): ours
`load_file(url)` and `load_sharded(url, {name: None})`, boto3 and Run:ai.

    cargo install --locked s3s-fs@0.14.1 --features binary --root target/s3s-fs
    VIRTUAL_ENV=$PWD/.venv-torch .venv-torch/bin/maturin develop --release \\
        -m crates/tensorsmith-py/Cargo.toml        # or any build of the extension
    .venv-torch/bin/python benches/rank_store_vs_boto3.py

The model: RS_GIB (default 2) GiB of bf16, 24 tensors [rows, 4096] (column-parallel: cut
along dimension 0) and 8 tensors [4096, cols] (row-parallel: cut along dimension 1, so a
rank's part is one run per row, coalesced by the URL rule: gaps of at most 256 KiB read
through, reads of at most 8 MiB). Plans: R = 2 and 4, ranks 0 and R-1. The spans given to
boto3 are our plan's own reads (`part_plan`), so both sides move the same bytes; boto3 cuts
spans into part_size (8 MiB) pieces as our store reads do, RS_CONCURRENCY (default 10, our
max_concurrency default) at once over the whole plan. The server: s3s-fs on 127.0.0.1 over
RS_DIR (default /tmp/rank-store-bench). RS_RUNS (default 3) interleaved runs, medians.

Then each rank-0 load of R = 2 and 4 once more in a process of its own for its peak memory:
the peak RSS during the load (the high-water mark reset through /proc/self/clear_refs once
everything is imported and connected) less the RSS before it, beside the bytes the rank keeps
(the tensors it returns). RS_RSS=0 skips this.
"""

import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import torch
from botocore.config import Config

import tensorsmith
import tensorsmith.torch as ours
from tensorsmith._loading import cuda as _ring
from tensorsmith._loading import sharded as _sharded

REPO = pathlib.Path(__file__).resolve().parents[1]
GIB = float(os.environ.get("RS_GIB", "2"))
RUNS = int(os.environ.get("RS_RUNS", "3"))
CONC = int(os.environ.get("RS_CONCURRENCY", "10"))
DIR = pathlib.Path(os.environ.get("RS_DIR", "/tmp/rank-store-bench"))
S3S = os.environ.get("S3S_FS_BIN", str(REPO / "target" / "s3s-fs" / "bin" / "s3s-fs"))
KEY, SECRET, BUCKET, OBJECT = "AKIABENCHKEY", "benchSecretKey/123", "bench", "m.safetensors"
PART = 8 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(root):
    port = free_port()
    p = subprocess.Popen([S3S, "--host", "127.0.0.1", "--port", str(port), "--access-key", KEY,
                          "--secret-key", SECRET, str(root)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    p.kill()
    sys.exit("s3s-fs did not start")


def model():
    """name -> (tensor, the dimension ranks cut)."""
    per = int(GIB * (1 << 30)) // 2 // 32  # elements per tensor
    g = torch.Generator().manual_seed(0)
    t = {}
    for i in range(24):
        t[f"layers.{i}.up.weight"] = (torch.randn(per // 4096, 4096, generator=g).bfloat16(), 0)
    for i in range(8):
        t[f"layers.{i}.down.weight"] = (torch.randn(4096, per // 4096, generator=g).bfloat16(),
                                        1)
    return t


def plan_of(tensors, rank, ranks):
    plan = {}
    for name, (x, dim) in tensors.items():
        n = x.shape[dim]
        plan[name] = (dim, rank * n // ranks, (rank + 1) * n // ranks)
    return plan


def spans_of(url, opts, plan):
    """Our plan's reads for `plan`, as (start, end) file offsets, and the bytes kept."""
    reads, kept = [], 0
    native = tensorsmith._open_native(url, "mmap", opts)
    for name, (dim, a, b) in plan.items():
        _, shape, _ = native.info_of(name)
        cut = [(0, d) for d in shape[:dim]] + [(a, b)]
        _, _, nbytes, _, _, rd, _, _ = native.part_plan(name, cut)
        reads += rd
        kept += nbytes
    return reads, kept


def whole(tensors, url, opts, s3, endpoint):
    """The whole model (a rank of one): ours by load_file and by load_sharded, boto3 ranged
    GETs of the data span, Run:ai; times as ratios to ours (load_sharded)."""
    native = tensorsmith._open_native(url, "mmap", opts)
    ranges = [native.raw_range(n) for n in tensors]
    span = [(min(r[1] for r in ranges), max(r[2] for r in ranges))]
    want = checksum({n: v for n, (v, _) in tensors.items()})
    t = {"load_file": [], "load_sharded": [], "boto3": []}
    for run in range(RUNS):
        for name, fn in (("load_file", lambda: ours.load_file(url, storage_options=opts)),
                         ("load_sharded", lambda: ours.load_sharded(
                             url, dict.fromkeys(tensors), storage_options=opts)),
                         ("boto3", lambda: boto3_load(s3, span))):
            s = time.perf_counter()
            got = fn()
            t[name].append(time.perf_counter() - s)
            if run == 0 and name != "boto3":
                assert abs(checksum(got) - want) <= 1e-6 * abs(want), name
            del got
        secs, total = runai_load(endpoint, url)
        if secs is not None:
            t.setdefault("runai", []).append(secs)
            assert abs(total - want) <= 1e-6 * abs(want), (total, want)
    med = {k: statistics.median(v) for k, v in t.items()}
    size = span[0][1] - span[0][0]
    print(f"whole model {size / 2**20:.0f} MiB: " + ", ".join(
        f"{k} {size / v / 1e6:.0f} MB/s ({v / med['load_sharded']:.2f}x ours' time)"
        for k, v in med.items()), flush=True)
    return {"whole": True, "bytes": size, **{f"{k}_s": v for k, v in med.items()}}


def boto3_client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, region_name="us-east-1",
                        config=Config(max_pool_connections=CONC))


def boto3_load(s3, spans):
    """The spans in part_size pieces, CONC at once, each body copied into its place in one
    preallocated buffer per span."""
    bufs = [bytearray(b - a) for a, b in spans]
    jobs = [(k, p, min(p + PART, b)) for k, (a, b) in enumerate(spans)
            for p in range(a, b, PART)]

    def get(job):
        k, p, q = job
        body = s3.get_object(Bucket=BUCKET, Key=OBJECT, Range=f"bytes={p}-{q - 1}")["Body"]
        at = p - spans[k][0]
        view = memoryview(bufs[k])[at:at + (q - p)]
        got = 0
        while got < q - p:
            chunk = body.read(min(1 << 20, q - p - got))
            if not chunk:
                raise IOError("short body")
            view[got:got + len(chunk)] = chunk
            got += len(chunk)

    with ThreadPoolExecutor(CONC) as pool:
        list(pool.map(get, jobs))
    return bufs


def floor_load(s3, spans):
    """One GET per span piece, CONC at once, bodies read and dropped."""
    jobs = [(p, min(p + PART, b)) for a, b in spans for p in range(a, b, PART)]

    def get(job):
        p, q = job
        body = s3.get_object(Bucket=BUCKET, Key=OBJECT, Range=f"bytes={p}-{q - 1}")["Body"]
        for _ in body.iter_chunks(1 << 20):
            pass

    with ThreadPoolExecutor(CONC) as pool:
        list(pool.map(get, jobs))


# Run:ai's streamer in a process of its own (its settings are read from the environment when
# its library loads): argv = url, tensor names (JSON) or "", plan (JSON) or "". Prints the
# seconds of the load (parts narrowed and copied out of its buffers included) and a checksum.
RUNAI = """
import json, sys, time
import torch
from runai_model_streamer import SafetensorsStreamer
url, names, plan = sys.argv[1], json.loads(sys.argv[2] or "null"), json.loads(sys.argv[3] or "{}")
def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
try:
    open("/proc/self/clear_refs", "w").write("5")
except OSError:
    pass
base = kib("VmRSS")
s = time.perf_counter()
out = {}
with SafetensorsStreamer() as st:
    st.stream_file(url, tensor_names=names)
    for name, t in st.get_tensors():
        if name in plan:
            dim, a, b = plan[name]
            t = t.narrow(dim, a, b - a).clone()
        out[name] = t
secs, peak = time.perf_counter() - s, kib("VmHWM")
print(secs, sum(float(t.float().sum()) for t in out.values()), (peak - base) * 1024)
"""


def runai_load(endpoint, url, names=None, plan=None):
    """Seconds of a Run:ai streamer load (None where RS_RUNAI_SITE is unset), and the sum of
    what it loaded (a check against ours)."""
    secs, total, _ = runai_run(endpoint, url, names, plan)
    return secs, total


def runai_run(endpoint, url, names=None, plan=None):
    """`runai_load`'s seconds and sum, and the peak RSS over the load's start (bytes)."""
    site = os.environ.get("RS_RUNAI_SITE")
    if not site:
        return None, None, None
    env = dict(os.environ, PYTHONPATH=site, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
               AWS_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint, AWS_EC2_METADATA_DISABLED="true",
               RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0", RUNAI_STREAMER_CONCURRENCY=str(CONC),
               RUNAI_STREAMER_LOG_LEVEL="WARNING")
    r = subprocess.run([sys.executable, "-c", RUNAI, url, json.dumps(names) if names else "",
                        json.dumps(plan) if plan else ""], env=env, capture_output=True,
                       text=True)
    if r.returncode:
        raise RuntimeError(f"Run:ai streamer failed: {r.stderr[-2000:]}")
    seconds, total, rss = r.stdout.split()[-3:]
    return float(seconds), float(total), float(rss)


def rss_kib(field):
    """`field` (VmRSS, VmHWM) of this process's /proc/self/status, in KiB."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_child(kind, payload):
    """One load of `kind` (ours, ring, boto3) of the plan in the JSON file `payload`, in this
    process; prints the peak RSS over the load's start and whether the peak could be reset."""
    p = json.loads(pathlib.Path(payload).read_text())
    url, opts, endpoint = p["url"], p["opts"], p["endpoint"]
    plan = {n: tuple(v) for n, v in p["plan"].items()}
    spans = [tuple(x) for x in p["spans"]]
    s3 = boto3_client(endpoint)
    natives = _sharded._natives(url, "mmap", opts)
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
        reset = True
    except OSError:
        reset = False
    base = rss_kib("VmRSS")
    if kind == "ours":
        got = ours.load_sharded(url, plan, storage_options=opts)
    elif kind == "ring":
        got = _sharded.load(natives, plan, torch.device("cpu"), {}, None, _ring.HostRing())
    else:
        got = boto3_load(s3, spans)
    peak = rss_kib("VmHWM")
    del got
    print(json.dumps({"over_kib": peak - base, "reset": reset}))


def peak_rss(url, opts, endpoint, tensors):
    """Peak RSS over each rank-0 load's start (ours, ring, boto3, Run:ai), each in a process
    of its own, against the bytes kept."""
    rows = []
    for ranks in (2, 4):
        plan = plan_of(tensors, 0, ranks)
        spans, kept = spans_of(url, opts, plan)
        payload = DIR / "rss.json"
        payload.write_text(json.dumps({"url": url, "opts": opts, "endpoint": endpoint,
                                       "plan": plan, "spans": spans}))
        row = {"ranks": ranks, "rank": 0, "kept": kept}
        for kind in ("ours", "ring", "boto3"):
            r = subprocess.run([sys.executable, __file__, "--rss", kind, str(payload)],
                               capture_output=True, text=True, check=True)
            got = json.loads(r.stdout.splitlines()[-1])
            row[f"{kind}_rss"] = got["over_kib"] * 1024
            row["reset"] = got["reset"]
        _, _, rss = runai_run(endpoint, url, list(plan), plan)
        if rss is not None:
            row["runai_rss"] = rss
        rows.append(row)
        print(f"peak RSS over the start, R={ranks} rank 0 (keeps {kept / 2**20:.0f} MiB): "
              + ", ".join(f"{k[:-4]} {v / 2**20:.0f} MiB ({v / kept:.2f}x kept)"
                          for k, v in row.items() if k.endswith("_rss"))
              + ("" if row["reset"] else " (peak not reset: includes the imports)"),
              flush=True)
    return rows


def checksum(d):
    return sum(float(t.float().sum()) for t in d.values())


def main():
    shutil.rmtree(DIR, ignore_errors=True)
    (DIR / "store").mkdir(parents=True)
    tensors = model()
    import safetensors.torch as ref

    local = DIR / OBJECT
    ref.save_file({k: v for k, (v, _) in tensors.items()}, local)
    size = local.stat().st_size
    server, endpoint = start_server(DIR / "store")
    try:
        # Uploaded, not copied into the server's folder: s3s-fs keeps an uploaded object's
        # checksum, and hashes a copied file whole on every GET.
        s3 = boto3_client(endpoint)
        s3.create_bucket(Bucket=BUCKET)
        s3.upload_file(str(local), BUCKET, OBJECT)
        local.unlink()
        opts = {"key": KEY, "secret": SECRET, "endpoint_url": endpoint, "region": "us-east-1",
                "max_concurrency": str(CONC)}
        url = f"s3://{BUCKET}/{OBJECT}"
        print(f"model {size / 2**30:.2f} GiB on s3s-fs, concurrency {CONC}, {RUNS} runs, "
              f"medians; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        results = []
        for ranks in (2, 4):
            for rank in (0, ranks - 1):
                plan = plan_of(tensors, rank, ranks)
                spans, kept = spans_of(url, opts, plan)
                moved = sum(b - a for a, b in spans)
                t = {"ours": [], "ring": [], "boto3": [], "floor": []}
                for run in range(RUNS):
                    stats = {}
                    s = time.perf_counter()
                    got = ours.load_sharded(url, plan, storage_options=opts, stats=stats)
                    t["ours"].append(time.perf_counter() - s)
                    assert stats["bytes_read"] == moved, (stats, moved)
                    if run == 0:
                        for name, (dim, a, b) in plan.items():
                            want = tensors[name][0].narrow(dim, a, b - a)
                            assert torch.equal(got[name], want), name
                    del got
                    # The CUDA path's pipeline with its CPU stand-in (HostRing): pieces of at
                    # most 8 MiB through a ring of buffers into CPU tensors.
                    natives = _sharded._natives(url, "mmap", opts)
                    s = time.perf_counter()
                    got = _sharded.load(natives, plan, torch.device("cpu"), {}, None,
                                        _ring.HostRing())
                    t["ring"].append(time.perf_counter() - s)
                    if run == 0:
                        for name, (dim, a, b) in plan.items():
                            want = tensors[name][0].narrow(dim, a, b - a)
                            assert torch.equal(got[name], want), name
                    del got
                    s = time.perf_counter()
                    bufs = boto3_load(s3, spans)
                    t["boto3"].append(time.perf_counter() - s)
                    assert sum(map(len, bufs)) == moved
                    del bufs
                    s = time.perf_counter()
                    floor_load(s3, spans)
                    t["floor"].append(time.perf_counter() - s)
                    secs, total = runai_load(endpoint, url, list(plan), plan)
                    if secs is not None:
                        t.setdefault("runai", []).append(secs)
                        if run == 0:
                            want = checksum({n: tensors[n][0].narrow(d, a, b - a)
                                             for n, (d, a, b) in plan.items()})
                            assert abs(total - want) <= 1e-6 * max(1.0, abs(want)), (total, want)
                med = {k: statistics.median(v) for k, v in t.items()}
                rate = {k: moved / v / 1e6 for k, v in med.items()}
                row = {"ranks": ranks, "rank": rank, "kept": kept, "read": moved,
                       "spans": len(spans), **{f"{k}_s": v for k, v in med.items()},
                       "ours_vs_boto3": rate["ours"] / rate["boto3"],
                       "ring_vs_boto3": rate["ring"] / rate["boto3"],
                       "ours_vs_floor": rate["ours"] / rate["floor"]}
                peer = (f"; through the ring (the CUDA path, CPU stand-in) {rate['ring']:.0f} "
                        f"MB/s: {row['ring_vs_boto3']:.2f}x boto3")
                if "runai" in med:
                    row["ours_vs_runai"] = med["runai"] / med["ours"]
                    peer += (f"; Run:ai (whole tensors) {med['runai']:.2f} s, ours "
                            f"{med['ours']:.2f} s: {row['ours_vs_runai']:.2f}x")
                results.append(row)
                print(f"R={ranks} rank {rank}: kept {kept / 2**20:.0f} MiB, read "
                      f"{moved / 2**20:.0f} MiB ({moved / kept:.3f}x) in {len(spans)} spans; "
                      f"ours {rate['ours']:.0f} MB/s, boto3 {rate['boto3']:.0f} MB/s, floor "
                      f"{rate['floor']:.0f} MB/s: ours/boto3 {row['ours_vs_boto3']:.2f}x, "
                      f"ours/floor {row['ours_vs_floor']:.2f}x{peer}", flush=True)
        results.append(whole(tensors, url, opts, s3, endpoint))
        if os.environ.get("RS_RSS", "1") != "0":
            results += peak_rss(url, opts, endpoint, tensors)
        if os.environ.get("RS_JSON"):
            pathlib.Path(os.environ["RS_JSON"]).write_text(json.dumps(results, indent=1))
    finally:
        server.kill()
        if not os.environ.get("RS_KEEP"):
            shutil.rmtree(DIR, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rss"]:
        rss_child(sys.argv[2], sys.argv[3])
    else:
        main()
