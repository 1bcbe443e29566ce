#!/usr/bin/env python3
"""GPU loads of tensorsmith side by side with the other fast safetensors loaders, each in its
fast configuration, against the machine's own bound, in one run of about 7 minutes.

On the device machine, from the repo root (our wheel installed in .gpu/site, the peers'
wheels in .whl/ from scripts/gpu-peer-wheels; carry .whl and .gpu), one line:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-st09 .whl/st09/*.whl && export PYTHONPATH=/tmp/site:$PWD/.gpu/site && python3 benches/gpu_load_peers.py --st09-site /tmp/site-st09

(run with timeout_s 570: the sections share GP_BUDGET_S = 420 s and stop early to keep it.)

Here, on the CPU (every path with a 64 MiB model, device="cpu" where the peer has one;
InstantTensor and 0.9's prefetch refuse a CPU device, and their refusal is what is recorded):

    .venv-torch/bin/python -m pip install -q --no-deps --target /tmp/peers \
        fastsafetensors==0.5.0 instanttensor==0.2.2
    .venv-torch/bin/python -m pip install -q --no-deps --target /tmp/st09 safetensors==0.9.0rc1
    PYTHONPATH=crates/tensorsmith-py/python:/tmp/peers .venv-torch/bin/python \
        benches/gpu_load_peers.py --dry-run --st09-site /tmp/st09

What it does (figures printed as they come, and all of them in $OUT/gpu_peers.json, rewritten
after every section, so a run cut short still leaves what it measured):
1. writes GP_GIB (8) GiB of bf16 as a Llama-like model (hidden 4096, 20 layers) in 4 shards
   under /tmp/gpu-peers (kept for a second run), then syncs, so no write-back runs under the
   measurements;
2. the bound: 16 threads reading the shards from the page cache into pinned host memory
   (GB/s), and host-to-device copies from pinned memory (GB/s); bound = the lower;
3. whole-model loads to cuda:0 from a warm page cache, interleaved rounds (ours, the
   reference, the peers, ours, ...), medians of up to 5, every mode of every peer (a mode
   over twice as slow as its peer's best after 2 rounds stops there); the values of each
   mode's first load are checked against the reference's (per-tensor digests);
4. per rank: 2- and 4-rank tensor-parallel plans simulated on the one GPU (rank r keeps rows
   r*n/R..(r+1)*n/R of dim 0 of every other matrix and columns of dim 1 of the others, 1-D
   tensors whole): seconds per rank, our bytes read / kept from load_sharded's stats, and
   each process's read(2) bytes (/proc/self/io rchar; mmap reads are not counted there);
5. peak RssAnon growth during one load of each (ours: plus the pinned ring's peak);
6. our ring's settings swept, for the measured rule of its size, read size
   and workers: whole-model loads (the 4 shards, one call) under each setting of
   TENSORSMITH_PINNED_MIB x TENSORSMITH_READ_MIB x TENSORSMITH_LOAD_THREADS in SWEEP,
   interleaved rounds, medians, each against the default's median in the same rounds;
7. if time is left, the whole-model loads again from one 8 GiB file (each one's best mode).
A summary gives ratios as speeds: ours / peer (above 1: ours is faster) and ours / bound.

Peers and their fast configurations (what their docs give for a page-cache load without GDS):
- safetensors 0.8.0 (the reference, this machine's): load_file(p, device="cuda:0") per
  shard, its "mmap" and "pread" backends, and CPU load_file + .to(device); best mode taken.
  Per rank: safe_open(p, "pt", device).get_slice(name)[a:b] / [:, a:b] (the usual TP idiom).
- safetensors 0.9.0rc1 (PyPI pre-release, same import name: run in a subprocess with its own
  PYTHONPATH): safe_open(p, "pt", device).prefetch(plan=None, device=..., threads=8 (its
  default) or 16) on all shards at once, then iterating each PrefetchLoader (tensors are
  zero-copy views of its device allocations), and load_file. Its plan takes None or a
  step-1 slice of dim 0 only (safetensors/__init__.pyi of the 0.9.0rc1 wheel; PR
  https://github.com/safetensors/safetensors/pull/848): per rank, dim-0 parts are planned
  as slices and dim-1 parts are prefetched whole and narrowed on the GPU; get_slice too.
- fastsafetensors 0.5.0: SafeTensorsFileLoader(None, device, nogds=True, max_threads=16,
  bbuf_size_kb=16384) (its defaults, and the "optimal" nogds row of docs/amd-perf.md: 16
  threads, 16 MB buffer), add_filenames({0: shards}), copy_files_to_device(), get_tensor;
  fastsafe_open is the same. Its nogds reader opens files with O_DIRECT on local file
  systems (common.py is_odirect_enabled) unless FASTSAFETENSORS_ODIRECT=0: both modes run.
  It dlopens "libcudart.so" by that name; where only torch's libcudart.so.13 exists (pip
  torch), it is pointed at that file (recorded in the mode's info).
  Per rank: get_sharded needs a torch.distributed group of R processes (one NCCL rank per
  GPU), so one process stands in for a rank the way get_sharded's own part is made: the
  whole files copied to the device, then each part narrowed there (.contiguous()).
- InstantTensor 0.2.2: instanttensor.safe_open(shards, framework="pt", device) and
  f.tensors() (copy=True, owned tensors); backend BackendPolicy.BUFFERED (its README's choice
  when a model is loaded again soon: io_uring buffered, else mmap), Backend.MMAP, and its
  default (direct I/O: URING, else AIO). CUDA only. No per-rank part API (tensor_filter
  selects whole tensors), so it is not in the per-rank table.
- Run:ai Model Streamer: left to the store benchmarks.

Environment (or the flags of the same names): GP_GIB, GP_RUNS (5), GP_RANK_RUNS (3), GP_DIR
(/tmp/gpu-peers), GP_BUDGET_S (420: each section stops early to stay within its share),
TENSORSMITH_PINNED_MIB (our ring).
"""

import argparse
import gc
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

import torch

# Each peer's own published figures, with their hardware. Ratios to these are not
# measurements of ours: they say what the peers saw on their machines.
PUBLISHED = {
    "instanttensor": [
        # https://github.com/scitix/InstantTensor/blob/main/docs/benchmark.md ("Test on 50GB/s
        # storage"; versions there: safetensors 0.7.0, fastsafetensors 0.2.2, Run:ai 0.15.6,
        # instanttensor 0.1.4); also https://docs.vllm.ai/en/latest/models/extensions/instanttensor/
        {"what": "Qwen3-30B-A3B, 61.07 GB, to 1x H200, from 50 GB/s storage",
         "seconds": 1.77, "gbps": 34.5,
         "same_table_gbps": {"safetensors": 1.07, "fastsafetensors": 2.75, "runai": 6.57}},
        {"what": "DeepSeek-R1, 688.6 GB, to 8x H200 (TP8, EP8), from 50 GB/s storage",
         "seconds": 15.3, "gbps": 45.0,
         "same_table_gbps": {"safetensors": 4.30, "fastsafetensors": 9.08, "runai": 6.82}},
        # Same page, "Test on in-memory file system (tmpfs)", 2 NUMA nodes x 8 channels DDR5.
        {"what": "Qwen3-30B-A3B from tmpfs to 1x H200", "seconds": 1.26, "gbps": 48.5,
         "same_table_gbps": {"safetensors": 4.81, "fastsafetensors": 3.66, "runai": 7.44}},
        {"what": "DeepSeek-R1 from tmpfs to 8x H200", "seconds": 12.1, "gbps": 56.9,
         "same_table_gbps": {"safetensors": 30.5, "fastsafetensors": 10.9, "runai": 8.63}},
    ],
    "fastsafetensors": [
        # https://github.com/foundation-model-stack/fastsafetensors (README, "Performance
        # Highlights"), from https://arxiv.org/abs/2505.23072 (IEEE CLOUD 2025).
        {"what": "Llama-70B to 4 GPUs with GDS, NVMe read throughput", "gbps": 26.4},
        {"what": "standalone loads vs safetensors (Llama, Falcon, Bloom)",
         "speedup": "4.8x-7.5x"},
        {"what": "vLLM startup, Llama-2-13B on 4x L40S", "seconds": 4.74,
         "safetensors_seconds": 12.39},
        {"what": "vLLM startup, Llama-2-13B on 1x A100", "seconds": 6.88,
         "safetensors_seconds": 16.04},
        # https://github.com/foundation-model-stack/fastsafetensors/blob/main/docs/amd-perf.md
        {"what": "nogds, GPT-2 Medium 1.4 GB, 1 MI300X, 16 threads, 16 MB buffer",
         "seconds": 0.235, "gbps": 6.02, "mmap_gbps": 1.28},
        # Measured by safetensors' author on 4x H100, warm page cache, TP1, vLLM load_weights:
        # https://github.com/vllm-project/vllm/pull/52462
        {"what": "Qwen3-30B-A3B 61.1 GB, warm cache, TP1, H100 (vLLM)", "seconds": 12.36,
         "gbps": 4.9},
    ],
    "safetensors": [
        # https://huggingface.co/docs/safetensors/speed: gpt2 (model.safetensors, ~0.55 GB)
        # load_file(device="cuda:0") 0.165 s vs torch.load 0.354 s (a Colab GPU runtime).
        {"what": "gpt2 ~0.55 GB to one GPU, load_file", "seconds": 0.165, "gbps": 3.3},
        # The prefetch engine's proof of concept (0.9's ancestor, safetensors PR #827), 4x
        # H100-80GB, local NVMe, vLLM load_weights: https://github.com/vllm-project/vllm/pull/52462
        {"what": "prefetch, Qwen3-30B-A3B 61.1 GB, warm cache, TP1, H100", "seconds": 4.57,
         "gbps": 13.4, "cold_seconds": 13.43},
        {"what": "prefetch, Qwen2.5-14B 29.5 GB, warm cache, TP1, H100", "seconds": 2.34,
         "gbps": 12.6, "cold_seconds": 8.06},
        # 0.9.0rc1 prefetch(plan): https://github.com/vllm-project/vllm/pull/57973 and
        # https://github.com/safetensors/safetensors/pull/848 (no size given for GLM 5.2).
        {"what": "prefetch(plan), GLM 5.2 on B200 (vLLM)", "seconds": "14-19",
         "instanttensor_seconds": 20, "fastsafetensors_seconds": 55},
        {"what": "prefetch(plan) vs prefetching all for every rank, GLM 5.2", "speedup": "3x"},
    ],
}

OURS, REF, ST09, FST, ITT = ("ours", "safetensors-0.8", "safetensors-0.9rc1",
                             "fastsafetensors", "instanttensor")
FST_THREADS, FST_BBUF_KB = 16, 16 * 1024

# Our ring's settings swept: (ring MiB, read MiB, workers; None: the default rule). The ring
# and the read size set the reads in flight (ring // read) and the workers (at most that).
# First the default (96, 8, one per core up to 16), then each factor moved alone around it,
# then the ring and the read size together (what to pin, how much at once).
SWEEP = [(96, 8, None),
         (96, 4, None), (96, 16, None), (48, 8, None), (192, 8, None), (384, 8, None),
         (192, 8, 8), (192, 8, 24), (384, 8, 32), (96, 8, 4),
         (192, 16, None), (384, 16, None), (48, 4, None), (192, 4, None), (384, 32, None)]


def say(*args):
    print(*args, flush=True)


# --- data -------------------------------------------------------------------------------


def layer_shapes(h):
    """One Llama-like layer: hidden h, 4 KV heads' worth of K/V (h/4), MLP 3.5h."""
    kv, inter = h // 4, h * 7 // 2
    return {
        "input_layernorm.weight": [h],
        "mlp.down_proj.weight": [h, inter],
        "mlp.gate_proj.weight": [inter, h],
        "mlp.up_proj.weight": [inter, h],
        "post_attention_layernorm.weight": [h],
        "self_attn.k_proj.weight": [kv, h],
        "self_attn.o_proj.weight": [h, h],
        "self_attn.q_proj.weight": [h, h],
        "self_attn.v_proj.weight": [kv, h],
    }


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class Data:
    """A model written as safetensors: `paths` (its files, in order), `dir` (holding only
    them), `shapes` (name -> shape), `nbytes` (tensor bytes)."""

    def __init__(self, dir, paths, shapes):
        self.dir, self.paths, self.shapes = dir, paths, shapes
        self.nbytes = sum(numel(s) * 2 for s in shapes.values())
        self.gb = self.nbytes / 1e9


def model_layout(gib, hidden, files):
    """[(file name, [(tensor name, shape)])] for about `gib` GiB of bf16 in `files` files."""
    per_layer = sum(numel(s) * 2 for s in layer_shapes(hidden).values())
    layers = max(files, round(gib * (1 << 30) / per_layer))
    out = []
    for f in range(files):
        lo, hi = f * layers // files, (f + 1) * layers // files
        tensors = [(f"model.layers.{i}.{k}", s) for i in range(lo, hi)
                   for k, s in layer_shapes(hidden).items()]
        if f == files - 1:
            tensors.append(("model.norm.weight", [hidden]))
        name = ("model.safetensors" if files == 1
                else f"model-{f + 1:05d}-of-{files:05d}.safetensors")
        out.append((name, tensors))
    return out


def write_safetensors(path, tensors, source):
    """Writes `tensors` ([(name, shape)]) as BF16, each one's bytes a window of `source`
    (int16) at its own offset, so values differ from tensor to tensor at no cost."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors:
        n = numel(shape) * 2
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    size = 8 + len(raw) + off
    if path.exists() and path.stat().st_size == size:
        return 0
    period = source.numel() - max(numel(s) for _, s in tensors)
    part = path.with_name(path.name + ".partial")
    with open(part, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name, shape in tensors:
            start = zlib.crc32(name.encode()) % period
            f.write(memoryview(source[start:start + numel(shape)].numpy()).cast("B"))
    os.replace(part, path)
    return size


def make_data(root, gib, hidden, files):
    layout = model_layout(gib, hidden, files)
    dir = root / ("single" if files == 1 else "shards")
    dir.mkdir(parents=True, exist_ok=True)
    for stale in dir.glob("*.partial"):
        stale.unlink()
    biggest = max(numel(s) for _, ts in layout for _, s in ts)
    g = torch.Generator().manual_seed(0)
    base = torch.randn((1 << 22) + 12345, generator=g).bfloat16().view(torch.int16)
    reps = (biggest + base.numel() * 2) // base.numel() + 1
    source = base.repeat(reps)  # windows of it start anywhere in its first period
    t = time.perf_counter()
    written = sum(write_safetensors(dir / name, ts, source) for name, ts in layout)
    t_write = time.perf_counter() - t
    t = time.perf_counter()
    os.sync()  # dirty pages written back now, not under the measurements
    t_sync = time.perf_counter() - t
    paths = [dir / name for name, _ in layout]
    shapes = {n: s for _, ts in layout for n, s in ts}
    return Data(dir, paths, shapes), {"written_bytes": written, "write_s": t_write,
                                      "sync_s": t_sync}


def rank_plan(shapes, ranks, rank):
    """name -> None (1-D: whole) or (dim, start, stop): matrices alternate, in name order,
    between rows (dim 0) and columns (dim 1)."""
    plan, k = {}, 0
    for name in sorted(shapes):
        shape = shapes[name]
        if len(shape) < 2:
            plan[name] = None
            continue
        dim = k % 2
        k += 1
        n = shape[dim]
        plan[name] = (dim, rank * n // ranks, (rank + 1) * n // ranks)
    return plan


def plan_bytes(shapes, plan):
    total = 0
    for name, spec in plan.items():
        n = numel(shapes[name]) * 2
        total += n if spec is None else n * (spec[2] - spec[1]) // shapes[name][spec[0]]
    return total


# --- measuring ----------------------------------------------------------------------------


def is_cuda(device):
    return str(device).startswith("cuda")


def sync(device):
    if is_cuda(device):
        torch.cuda.synchronize()


def timed(fn, device):
    sync(device)
    t = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t, out


def free(device, full=False):
    gc.collect(2 if full else 0)  # young objects: cheap; a full pass at the end of a round
    if is_cuda(device):
        torch.cuda.empty_cache()


def proc_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rchar():
    """Bytes this process asked of read(2)/pread(2)/readv (not mmap page faults)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def peak_rss_during(fn):
    """(fn(), peak RssAnon growth in MiB while it ran)."""
    base, peak, done = proc_status("RssAnon"), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], proc_status("RssAnon"))
            time.sleep(0.002)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        out = fn()
    finally:
        done.set()
        th.join()
    peak[0] = max(peak[0], proc_status("RssAnon"))
    return out, (peak[0] - base) / 1024


@contextmanager
def env(name, value):
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextmanager
def envs(settings):
    with ExitStack() as stack:
        for name, value in settings.items():
            stack.enter_context(env(name, value))
        yield


_WEIGHTS = {}


def digest(t):
    """Two int64 sums of a tensor's raw values (plain, and weighted by position mod 1021):
    equal values give equal digests, a moved or changed block almost never does."""
    flat = t.detach().contiguous().view(-1)
    view = {2: torch.int16, 4: torch.int32}.get(flat.element_size(), torch.uint8)
    x = flat.view(view)
    step = 1021 * (1 << 14)  # a multiple of 1021: every chunk starts at weight 1
    if x.device not in _WEIGHTS:
        _WEIGHTS[x.device] = torch.arange(step, device=x.device, dtype=torch.int64) % 1021 + 1
    w = _WEIGHTS[x.device]
    s1 = s2 = torch.zeros((), dtype=torch.int64, device=x.device)
    for i in range(0, x.numel(), step):
        c = x[i:i + step].to(torch.int64)
        s1 = s1 + c.sum()
        s2 = s2 + (c * w[:c.numel()]).sum()
    return [int(s1), int(s2), list(t.shape)]


def digests(tensors):
    return {name: digest(t) for name, t in tensors.items()}


def part(t, spec):
    return t if spec is None else t.narrow(spec[0], spec[1], spec[2] - spec[1])


def compare(got, expected):
    """(all equal, names that differ or are missing or extra, at most 5)."""
    bad = [n for n in expected if got.get(n) != expected[n]]
    bad += [n for n in got if n not in expected]
    return not bad, bad[:5]


def attempt(rec, label, name, first, device, call):
    """One timed load, `call()` (0.9's worker asked for digests on a first load): None when
    it fails (its error kept in `rec` and printed: one failing peer never stops the run),
    else (seconds, the tensors loaded in this process or None, their digests when `first`,
    read(2) bytes)."""
    r0 = rchar()
    try:
        extra = {"want_digests": first} if name == ST09 else {}
        t, out = timed(partial(call, **extra), device)
    except Exception as e:  # noqa: BLE001 - one failing peer never stops the run
        rec["error"] = f"{type(e).__name__}: {e}"[:2000]
        say(f"  {label} error: {rec['error'][:300]}")
        free(device)
        return None
    if isinstance(out, Remote):
        return out.t, None, out.digests, out.rchar
    io = rchar() - r0
    return t, out, (digests(out) if first else None), io


# --- the machine's bound -------------------------------------------------------------------


def bound_read(paths, threads, chunk, pinned):
    """GB/s of `threads` threads reading the files (page cache) into their own pinned
    buffers with pread, `chunk` bytes a read."""
    bufs = [torch.empty(chunk, dtype=torch.uint8, pin_memory=pinned) for _ in range(threads)]
    jobs = []
    for i, p in enumerate(paths):
        size = p.stat().st_size
        jobs += [(i, off, min(chunk, size - off)) for off in range(0, size, chunk)]
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    it, lock, total = iter(jobs), threading.Lock(), sum(j[2] for j in jobs)

    def work(k):
        mv = memoryview(bufs[k].numpy())
        while True:
            with lock:
                job = next(it, None)
            if job is None:
                return
            i, off, n = job
            if os.preadv(fds[i], [mv[:n]], off) != n:
                raise RuntimeError("short read")

    try:
        ths = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        t = time.perf_counter()
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        dt = time.perf_counter() - t
    finally:
        for fd in fds:
            os.close(fd)
    return total / dt / 1e9


def bound_h2d(device, nbytes, chunk=None, reps=5):
    """GB/s of host-to-device copies from pinned memory: one copy of `nbytes`, or
    `chunk`-byte copies queued on one stream."""
    src = torch.ones(nbytes, dtype=torch.uint8).pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)

    def copy():
        if chunk is None:
            dst.copy_(src, non_blocking=True)
        else:
            for a in range(0, nbytes, chunk):
                dst[a:a + chunk].copy_(src[a:a + chunk], non_blocking=True)

    timed(copy, device)
    times = [timed(copy, device)[0] for _ in range(reps)]
    return nbytes / statistics.median(times) / 1e9


# --- whole-model loads, one function per peer ----------------------------------------------


def ours_full(data, device, mode, info):
    import tensorsmith.torch as ts

    if mode == "folder":  # one call: all shards through one pinned ring
        return ts.load_file(data.dir, device=device)
    out = {}
    for p in data.paths:
        out.update(ts.load_file(p, device=device))
    return out


def ours_ring(data, device):
    """Ours through the ring, whatever the device: onto CUDA, load_file of the folder (one
    ring over the shards); on the CPU, the same pipeline into CPU tensors (HostRing), per
    file."""
    if is_cuda(device):
        import tensorsmith.torch as ts

        return ts.load_file(data.dir, device=device)
    import tensorsmith
    from tensorsmith._loading import cuda as ring

    out = {}
    for p in data.paths:
        native = tensorsmith._open_native(str(p), "pread")
        out.update(ring.load(native, native.names(), torch.device("cpu"), None,
                             ring.HostRing()))
    return out


def ref_full(data, device, mode, info):
    import safetensors.torch as st

    out = {}
    for p in data.paths:
        if mode == "load_file":
            out.update(st.load_file(p, device=device))
        elif mode == "load_file-pread":
            out.update(st.load_file(p, device=device, backend="pread"))
        else:  # "cpu-then-to": the mapped CPU tensors copied over
            out.update({k: v.to(device) for k, v in st.load_file(p).items()})
    return out


_FST_CUDART = []


def fst_cudart():
    """fastsafetensors dlopens "libcudart.so" by that name, which a pip-installed torch does
    not bring (only nvidia/cu13/lib/libcudart.so.13). When the name does not load, point its
    loader at torch's runtime (the same library torch already runs on). Returns what was
    done, once per process."""
    if _FST_CUDART:
        return _FST_CUDART[0]
    import ctypes
    import glob

    try:
        ctypes.CDLL("libcudart.so")
        how = "libcudart.so loads by name"
    except OSError:
        found = sorted(f for d in sys.path if d for f in
                       glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcudart.so*"))
                       + glob.glob(os.path.join(d, "nvidia", "*", "*", "lib", "libcudart.so*"))
                       + glob.glob(os.path.join(d, "torch", "lib", "libcudart*.so*")))
        if found:
            import fastsafetensors.copier.nogds as nogds

            nogds.resolve_runtime_lib_name = lambda framework=None, _p=found[-1]: _p
            how = f"libcudart.so not on the loader's path: given {found[-1]}"
        else:
            how = "libcudart.so not found (nor torch's libcudart.so.N)"
    _FST_CUDART.append(how)
    return how


def fst_full(data, device, mode, info):
    from fastsafetensors import SafeTensorsFileLoader

    if is_cuda(device):
        info["cudart"] = fst_cudart()
    with env("FASTSAFETENSORS_ODIRECT", "0" if mode == "buffered" else None):
        loader = SafeTensorsFileLoader(None, device, nogds=True, max_threads=FST_THREADS,
                                       bbuf_size_kb=FST_BBUF_KB)
        try:
            loader.add_filenames({0: [str(p) for p in data.paths]})
            fb = loader.copy_files_to_device()
            try:
                # Tensors share ownership of the file buffers: valid after close.
                return {k: fb.get_tensor(k) for k in loader.get_keys()}
            finally:
                fb.close()
        finally:
            loader.close()


def itt_full(data, device, mode, info):
    from instanttensor import Backend, BackendPolicy, safe_open

    backend = {"buffered": BackendPolicy.BUFFERED, "mmap": Backend.MMAP,
               "default-direct": None}[mode]
    out = {}
    with safe_open([str(p) for p in data.paths], framework="pt", device=device,
                   backend=backend) as f:
        info["backend"] = f.backend.name
        for name, t in f.tensors():
            out[name] = t
    return out


class Remote:
    """A load run in the safetensors 0.9 worker: its time and digests, no tensors."""

    def __init__(self, reply):
        self.t, self.digests = reply["t"], reply.get("digests")
        self.rss_mib, self.rchar = reply.get("rss_mib"), reply.get("rchar")


class St09:
    """safetensors 0.9.0rc1 in a subprocess (this file with --st09-worker, its folder first
    on PYTHONPATH), driven one JSON line at a time so its loads interleave with ours."""

    def __init__(self, site):
        self.proc, self.error, self.version = None, None, None
        if not site or not (Path(site) / "safetensors").is_dir():
            self.error = f"no safetensors package under --st09-site {site!r}"
            return
        pp = os.environ.get("PYTHONPATH", "")
        env_ = dict(os.environ, PYTHONPATH=os.path.abspath(site) + (os.pathsep + pp if pp else ""))
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--st09-worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env_)

    def start(self, device):
        if self.proc is None:
            return
        try:
            hello = self.call({"op": "hello", "device": str(device)}, timeout=240)
            self.version = hello["version"]
            if not self.version.startswith("0.9"):
                self.error = f"the worker imported safetensors {self.version}, not 0.9"
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            self.error = f"worker did not start: {e}"

    def call(self, msg, timeout=180):
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(self.error or "the safetensors 0.9 worker has exited")
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        box = []
        th = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()),
                              daemon=True)
        th.start()
        th.join(timeout)
        if not box or not box[0]:
            self.proc.kill()
            self.error = (f"the worker gave no answer to {msg['op']} in {timeout} s"
                          if not box else "the safetensors 0.9 worker exited")
            raise RuntimeError(self.error)
        reply = json.loads(box[0])
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply

    def full(self, data, device, mode, info, want_digests=False, rss=False):
        if self.error:
            raise RuntimeError(self.error)
        return Remote(self.call({"op": "full", "paths": [str(p) for p in data.paths],
                                 "device": str(device), "mode": mode,
                                 "digests": want_digests, "rss": rss}))

    def rank(self, data, plan, device, mode, info, want_digests=False):
        if self.error:
            raise RuntimeError(self.error)
        return Remote(self.call({"op": "rank", "paths": [str(p) for p in data.paths],
                                 "device": str(device), "mode": mode, "plan": plan,
                                 "digests": want_digests}))

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except Exception:  # noqa: BLE001
                self.proc.kill()


# --- per-rank parts, one function per peer -----------------------------------------------


def ours_rank(data, plan, device, mode, info):
    import tensorsmith
    import tensorsmith.torch as ts

    if mode == "prefetch-t8":  # 0.9's call, unchanged, on our safe_open
        return st09_prefetch(data.paths, str(device), 8, plan, tensorsmith.safe_open)
    stats = {}
    out = ts.load_sharded([str(p) for p in data.paths], plan, device=device, stats=stats)
    info.update(stats)
    return out


def get_slice_rank(safe_open, paths, plan, device):
    """The usual per-rank idiom of the safetensors API (0.8 here, 0.9 in the worker)."""
    out = {}
    for p in paths:
        with safe_open(str(p), framework="pt", device=str(device)) as f:
            for name in f.keys():
                if name not in plan:
                    continue
                spec = plan[name]
                if spec is None:
                    out[name] = f.get_tensor(name)
                elif spec[0] == 0:
                    out[name] = f.get_slice(name)[spec[1]:spec[2]]
                else:
                    out[name] = f.get_slice(name)[:, spec[1]:spec[2]]
    return out


def ref_rank(data, plan, device, mode, info):
    from safetensors import safe_open

    return get_slice_rank(safe_open, data.paths, plan, device)


def fst_rank(data, plan, device, mode, info):
    # One process cannot run get_sharded (it scatters over a torch.distributed group of R
    # processes); this makes the same part get_sharded cuts for its own rank, in one process.
    whole = fst_full(data, device, mode.split("/")[1], info)
    return {name: part(whole[name], spec).contiguous() for name, spec in plan.items()}


# --- the safetensors 0.9 worker (runs in the subprocess) ----------------------------------


def st09_prefetch(paths, device, threads, plan=None, safe_open=None):
    """All files' PrefetchLoaders started at once, then drained. `plan`: name -> None or
    (dim, start, stop); dim 0 goes to the engine as a slice, dim 1 is loaded whole and
    narrowed on the device (the plan takes dim-0 slices only). `safe_open`: 0.9's (the
    default, in the worker) or ours, whose prefetch takes the same calls."""
    if safe_open is None:
        from safetensors import safe_open

    handles = [safe_open(str(p), framework="pt", device=device) for p in paths]
    loaders = []
    try:
        for h in handles:
            if plan is None:
                loaders.append(h.prefetch(device=device, threads=threads))
                continue
            sub = {n: (slice(plan[n][1], plan[n][2]) if plan[n] and plan[n][0] == 0 else None)
                   for n in h.keys() if n in plan}
            if sub:
                loaders.append(h.prefetch(sub, device=device, threads=threads))
        out = {}
        for ld in loaders:
            for name, t in ld:
                spec = plan.get(name) if plan is not None else None
                out[name] = part(t, spec).contiguous() if spec and spec[0] == 1 else t
        return out
    finally:
        for ld in loaders:
            ld.close()


def st09_handle(msg):
    import safetensors

    device = msg.get("device", "cpu")
    if msg["op"] == "hello":
        if is_cuda(device):
            torch.empty(1, device=device)
        return {"version": safetensors.__version__, "file": safetensors.__file__}
    paths, mode = msg["paths"], msg["mode"]
    plan = msg.get("plan")
    if plan is not None:
        plan = {k: (tuple(v) if v is not None else None) for k, v in plan.items()}

    def load():
        if msg["op"] == "rank" and mode == "get_slice":
            return get_slice_rank(safetensors.safe_open, paths, plan, device)
        if msg["op"] == "rank":  # "prefetch-tN"
            return st09_prefetch(paths, device, int(mode.split("-t")[1]), plan)
        if mode == "load_file":
            import safetensors.torch as st

            out = {}
            for p in paths:
                out.update(st.load_file(p, device=device))
            return out
        return st09_prefetch(paths, device, int(mode.split("-t")[1]))

    r0 = rchar()
    if msg.get("rss"):
        (t, out), rss = peak_rss_during(lambda: timed(load, device))
    else:
        (t, out), rss = timed(load, device), None
    reply = {"t": t, "rss_mib": rss, "rchar": rchar() - r0}
    if msg.get("digests"):
        reply["digests"] = digests(out)
    del out
    free(device)
    return reply


def worker_main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the libraries print goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["op"] == "quit":
            return
        try:
            reply = st09_handle(msg)
        except Exception as e:  # noqa: BLE001 - reported to the bench, which records it
            reply = {"error": f"{type(e).__name__}: {e}"}
        proto.write(json.dumps(reply) + "\n")


# --- the run ------------------------------------------------------------------------------


class Run:
    def __init__(self, args):
        self.args, self.t0 = args, time.monotonic()
        self.device = args.device
        self.res = {"meta": {}, "published": PUBLISHED, "data": {}, "bound": {}, "full": {},
                    "per_rank": {}, "memory": {}, "ratios": {}, "notes": []}
        out = os.environ.get("OUT")
        self.json_path = (Path(out) if out else Path(args.dir)) / "gpu_peers.json"
        self.expected = None  # name -> digest, from the reference's first load
        self.expected_parts = {}  # "R/r" -> name -> digest
        self.st09 = None

    def left(self, frac=1.0):
        return self.args.budget_s * frac - (time.monotonic() - self.t0)

    def save(self):
        self.json_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.json_path.with_name(self.json_path.name + ".tmp")
        tmp.write_text(json.dumps(self.res, indent=1, default=str))
        os.replace(tmp, self.json_path)

    # 2. bound
    def bound(self, data):
        b, pinned = self.res["bound"], is_cuda(self.device)
        threads = self.args.threads
        for chunk in (8 << 20, 32 << 20):
            key = f"read_{threads}threads_{chunk >> 20}MiB_gbps"
            try:
                b[key] = bound_read(data.paths, threads, chunk, pinned)
            except Exception as e:  # noqa: BLE001
                b[key + "_error"] = f"{type(e).__name__}: {e}"
        reads = [v for k, v in b.items() if k.startswith("read_") and k.endswith("_gbps")]
        b["read_into"] = "pinned memory" if pinned else "pageable memory (no CUDA)"
        b["read_gbps"] = max(reads) if reads else None
        if pinned:
            n = min(1 << 30, data.nbytes)
            b["h2d_1copy_gbps"] = bound_h2d(self.device, n)
            b["h2d_8MiB_copies_gbps"] = bound_h2d(self.device, n, chunk=8 << 20)
            b["h2d_gbps"] = max(b["h2d_1copy_gbps"], b["h2d_8MiB_copies_gbps"])
            b["bound_gbps"] = min(b["read_gbps"] or 1e9, b["h2d_gbps"])
        free(self.device)
        say(f"bound: {threads}-thread pread from the page cache into "
            f"{'pinned' if pinned else 'plain (no CUDA)'} memory "
            f"{fmt(b['read_gbps'])} GB/s (8 MiB: {fmt(b.get(f'read_{threads}threads_8MiB_gbps'))},"
            f" 32 MiB: {fmt(b.get(f'read_{threads}threads_32MiB_gbps'))}); H2D from pinned "
            f"{fmt(b.get('h2d_gbps'))} GB/s (one 1 GiB copy {fmt(b.get('h2d_1copy_gbps'))}, "
            f"8 MiB copies {fmt(b.get('h2d_8MiB_copies_gbps'))}); bound "
            f"{fmt(b.get('bound_gbps'))} GB/s")
        self.save()

    def full_contestants(self):
        st09 = self.st09
        return [
            (OURS, ["folder", "per-file"], ours_full),
            (REF, ["load_file", "load_file-pread", "cpu-then-to"], ref_full),
            (ST09, ["prefetch-t8", "prefetch-t16", "load_file"], st09.full),
            (FST, ["buffered", "o_direct"], fst_full),
            (ITT, ["buffered", "mmap", "default-direct"], itt_full),
        ]

    # 3. and 7. whole-model loads
    def full(self, data, label, runs, until_frac, modes_of=None):
        """Rounds of every contestant's modes (or only `modes_of[name]`); after two rounds,
        a mode more than twice as slow as its contestant's best stops (time for the rest)."""
        res = self.res["full"].setdefault(label, {"gb": data.gb, "files": len(data.paths)})
        recs, pending = {}, []
        contestants = [(name, [m for m in modes if modes_of is None or m in modes_of.get(name, ())]
                        or modes, fn) for name, modes, fn in self.full_contestants()]
        for name, modes, _ in contestants:
            for mode in modes:
                recs[(name, mode)] = res.setdefault(name, {}).setdefault(
                    mode, {"times_s": [], "info": {}})
        say(f"\nwhole-model loads, {label}: {len(data.paths)} file(s), {data.gb:.2f} GB, "
            f"{self.device}, warm page cache")
        last = 0.0
        for rnd in range(runs):
            if rnd > 0 and self.left(until_frac) < last:
                res["stopped_after_rounds"] = rnd
                say(f"  (stopped after {rnd} rounds: time budget)")
                break
            if rnd == 2:
                self.drop_slow_modes(recs)
            t_round = time.perf_counter()
            for name, modes, fn in contestants:
                for mode in modes:
                    rec = recs[(name, mode)]
                    if "error" in rec or "dropped" in rec:
                        continue
                    first = not rec["times_s"]
                    done = attempt(rec, f"{name:19} {mode:16}", name, first, self.device,
                                   partial(fn, data, self.device, mode, rec["info"]))
                    if done is None:
                        continue
                    t, out, got, io = done
                    if out is not None and first and name == REF and mode == "load_file":
                        self.reference_digests(got, out, data.shapes)
                    rec.setdefault("rchar_bytes", io)
                    del out
                    free(self.device)
                    rec["times_s"].append(t)
                    if got is not None:
                        pending.append((rec, got))
                    say(f"  round {rnd + 1}: {name:19} {mode:16} {t:8.3f} s "
                        f"{data.gb / t:7.2f} GB/s")
            if self.expected is not None:
                for rec, got in pending:
                    rec["equal"], rec["mismatch"] = compare(got, self.expected)
                pending = []
            elif rnd == 0:
                self.res["notes"].append(f"{label}: the reference's load failed, so no values "
                                         "were checked")
            free(self.device, full=True)
            last = time.perf_counter() - t_round
            self.finish_full(res, data)
            self.save()
        self.print_full(res, label)

    @staticmethod
    def drop_slow_modes(recs):
        """Fastest times compared (a first round's warm-up does not count against a mode);
        ours keeps all its modes (they are cheap)."""
        best = {}
        for (name, _), rec in recs.items():
            if rec["times_s"]:
                best[name] = min(best.get(name, 1e9), min(rec["times_s"]))
        for (name, mode), rec in recs.items():
            if name != OURS and rec["times_s"] and min(rec["times_s"]) > 2 * best[name]:
                rec["dropped"] = "after 2 rounds: over twice the time of its peer's best mode"
                say(f"  {name} {mode}: no more rounds ({rec['dropped']})")

    def reference_digests(self, got, tensors, shapes):
        if self.expected is not None:
            return
        self.expected = got
        for ranks in self.args.ranks:
            for r in range(ranks):
                plan = rank_plan(shapes, ranks, r)
                self.expected_parts[f"{ranks}/{r}"] = {
                    n: digest(part(tensors[n], spec)) for n, spec in plan.items()}

    def finish_full(self, res, data):
        for name in (OURS, REF, ST09, FST, ITT):
            best = None
            for mode, rec in res.get(name, {}).items():
                if not isinstance(rec, dict) or not rec.get("times_s"):
                    continue
                rec["median_s"] = statistics.median(rec["times_s"])
                rec["gbps"] = data.gb / rec["median_s"]
                if best is None or rec["gbps"] > res[name][best]["gbps"]:
                    best = mode
            res.setdefault("best", {})[name] = best
        ours = self.best_gbps(res, OURS)
        bound = self.res["bound"].get("bound_gbps")
        ratios = {}
        for name in (REF, ST09, FST, ITT):
            peer = self.best_gbps(res, name)
            if ours and peer:
                ratios[f"ours/{name}"] = ours / peer
        if ours and bound:
            ratios["ours/bound"] = ours / bound
            for name in (REF, ST09, FST, ITT):
                peer = self.best_gbps(res, name)
                if peer:
                    ratios[f"{name}/bound"] = peer / bound
        res["ratios"] = ratios

    @staticmethod
    def best_gbps(res, name):
        mode = res.get("best", {}).get(name)
        return res[name][mode]["gbps"] if mode else None

    def print_full(self, res, label):
        say(f"whole-model loads, {label}, medians (best mode of each marked *):")
        for name in (OURS, REF, ST09, FST, ITT):
            for mode, rec in res.get(name, {}).items():
                if not isinstance(rec, dict):
                    continue
                star = "*" if res.get("best", {}).get(name) == mode else " "
                if "gbps" in rec:
                    eq = {True: "equal", False: f"DIFFERS {rec.get('mismatch')}",
                          None: "unchecked"}[rec.get("equal")]
                    extra = f" {rec['info']}" if rec.get("info") else ""
                    say(f" {star}{name:19} {mode:16} {rec['median_s']:8.3f} s "
                        f"{rec['gbps']:7.2f} GB/s  n={len(rec['times_s'])}  {eq}{extra}")
                elif "error" in rec:
                    say(f"  {name:19} {mode:16} error: {rec['error'][:200]}")
        say("  ratios (speed, above 1 = ours faster): " + ", ".join(
            f"{k} {v:.2f}" for k, v in res.get("ratios", {}).items()))

    # 4. per rank
    def rank_contestants(self):
        best = self.res["full"].get("shards", {}).get("best", {})
        st09_prefetch = best.get(ST09) if str(best.get(ST09)).startswith("prefetch") \
            else "prefetch-t8"
        fst = best.get(FST) or "buffered"
        return [
            (OURS, ["load_sharded", "prefetch-t8"], ours_rank),
            (REF, ["get_slice"], ref_rank),
            (ST09, [st09_prefetch, "get_slice"], self.st09.rank),
            (FST, [f"whole+narrow/{fst}"], fst_rank),
        ]

    def per_rank(self, data, runs, until_frac):
        res = self.res["per_rank"]
        res["not_run"] = {ITT: "no per-part API: tensor_filter selects whole tensors only"}
        say(f"\nper-rank parts ({', '.join(map(str, self.args.ranks))} ranks simulated on one "
            f"{self.device}), {data.gb:.2f} GB in {len(data.paths)} files")
        last = 0.0
        for run in range(runs):
            if run > 0 and self.left(until_frac) < last:
                res["stopped_after_runs"] = run
                say(f"  (stopped after {run} runs: time budget)")
                break
            t_run = time.perf_counter()
            for ranks in self.args.ranks:
                for r in range(ranks):
                    self.one_rank(data, ranks, r, run, res)
            free(self.device, full=True)
            last = time.perf_counter() - t_run
            self.finish_rank(res)
            self.save()
        self.print_rank(res)

    def one_rank(self, data, ranks, r, run, res):
        key = f"{ranks}/{r}"
        plan = rank_plan(data.shapes, ranks, r)
        kept = plan_bytes(data.shapes, plan)
        for name, modes, fn in self.rank_contestants():
            for mode in modes:
                rec = res.setdefault(name, {}).setdefault(mode, {}).setdefault(
                    key, {"times_s": [], "info": {}, "kept_bytes": kept})
                if "error" in rec:
                    continue
                first = run == 0
                done = attempt(rec, f"{key:5} {name:19} {mode:13}", name, first, self.device,
                               partial(fn, data, plan, self.device, mode, rec["info"]))
                if done is None:
                    continue
                t, out, got, io = done
                del out
                free(self.device)
                rec["times_s"].append(t)
                rec.setdefault("rchar_bytes", io)
                if got is not None and key in self.expected_parts:
                    rec["equal"], rec["mismatch"] = compare(got, self.expected_parts[key])
                say(f"  run {run + 1}: rank {key:5} {name:19} {mode:13} {t:8.3f} s "
                    f"{kept / t / 1e9:7.2f} GB/s kept"
                    + (f"  read {rec['info'].get('bytes_read', 0) / 1e9:.3f} GB"
                       if name == OURS else ""))

    def finish_rank(self, res):
        for name in (OURS, REF, ST09, FST):
            for per in res.get(name, {}).values():
                for rec in per.values():
                    if rec.get("times_s"):
                        rec["median_s"] = statistics.median(rec["times_s"])
        ratios = {}
        for ranks in self.args.ranks:
            ours = self.rank_worst(res, OURS, "load_sharded", ranks)
            for name in (REF, ST09, FST):
                for mode in res.get(name, {}):
                    if not isinstance(res[name][mode], dict):
                        continue
                    peer = self.rank_worst(res, name, mode, ranks)
                    if ours and peer:
                        ratios[f"{ranks} ranks: ours/{name} {mode}"] = peer / ours
        res["ratios_slowest_rank"] = ratios

    @staticmethod
    def rank_worst(res, name, mode, ranks):
        """The slowest rank's median seconds, when every rank has one."""
        per = res.get(name, {}).get(mode, {})
        ts = [per.get(f"{ranks}/{r}", {}).get("median_s") for r in range(ranks)]
        return max(ts) if ts and all(ts) else None

    def print_rank(self, res):
        say("per-rank medians (seconds; GB/s of kept bytes; ours: GB read / GB kept):")
        for ranks in self.args.ranks:
            for r in range(ranks):
                key = f"{ranks}/{r}"
                cells = []
                for name in (OURS, REF, ST09, FST):
                    for mode, per in res.get(name, {}).items():
                        rec = per.get(key, {})
                        if "median_s" in rec:
                            eq = {True: "", False: " DIFFERS", None: " unchecked"}[
                                rec.get("equal")]
                            cell = (f"{name} {mode} {rec['median_s']:.3f} s "
                                    f"{rec['kept_bytes'] / rec['median_s'] / 1e9:.1f} GB/s{eq}")
                            if name == OURS:
                                info = rec["info"]
                                cell += (f" (read {info.get('bytes_read', 0) / 1e9:.3f} / kept "
                                         f"{info.get('bytes_kept', 0) / 1e9:.3f} GB, "
                                         f"{info.get('reads')} reads)")
                            cells.append(cell)
                        elif "error" in rec:
                            cells.append(f"{name} {mode} error")
                say(f"  rank {key}: " + "; ".join(cells))
        say("  ratios, slowest rank (speed, above 1 = ours faster): " + ", ".join(
            f"{k} {v:.2f}" for k, v in res.get("ratios_slowest_rank", {}).items()))

    # 5. memory
    def memory(self, data):
        res, full = self.res["memory"], self.res["full"].get("shards", {})
        say("\npeak RssAnon growth during one load (the CUDA context made before):")
        for name, _, fn in self.full_contestants():
            mode = full.get("best", {}).get(name)
            if mode is None:
                continue
            rec = res.setdefault(name, {"mode": mode})
            try:
                if name == ST09:
                    out = fn(data, self.device, mode, {}, rss=True)
                    rec["rss_anon_growth_mib"] = out.rss_mib
                elif name == OURS:
                    counter = PinnedCounter()
                    with counter:
                        out, rec["rss_anon_growth_mib"] = peak_rss_during(
                            partial(fn, data, self.device, mode, {}))
                    rec["pinned_peak_mib"] = counter.peak / (1 << 20)
                    rec["pinned_counted_by"] = counter.how
                    rec["ring_mib_configured"] = ring_mib()
                else:
                    out, rec["rss_anon_growth_mib"] = peak_rss_during(
                        partial(fn, data, self.device, mode, {}))
            except Exception as e:  # noqa: BLE001
                rec["error"] = f"{type(e).__name__}: {e}"[:1000]
            out = None
            free(self.device)
            line = f"  {name:19} {mode:16} "
            line += (f"{rec['rss_anon_growth_mib']:.0f} MiB" if rec.get("rss_anon_growth_mib")
                     is not None else f"error: {rec.get('error', '?')[:200]}")
            if name == OURS:
                line += (f"; pinned peak {fmt(rec.get('pinned_peak_mib'), 0)} MiB "
                         f"({rec.get('pinned_counted_by')}), ring configured "
                         f"{rec.get('ring_mib_configured')} MiB")
            say(line)
        self.save()

    # 6. our ring's settings
    def sweep(self, data, runs, until_frac):
        """Whole-model loads of ours (one call over the shards) under each setting of SWEEP,
        in interleaved rounds after a warm-up load; each setting's median against the
        default's (the first setting). On the CPU (a
        dry run) the same pipeline runs into CPU tensors through the HostRing stand-in."""
        res = self.res.setdefault("sweep", {"settings": {}})
        if runs <= 0:
            res["skipped"] = "--sweep-runs 0"
            return
        say(f"\nour ring's settings (ring MiB / read MiB / workers), whole model, "
            f"{data.gb:.2f} GB, warm page cache:")
        recs = {}
        for ring, read, workers in SWEEP:
            key = f"{ring}/{read}/{workers or 'default'}"
            recs[key] = res["settings"].setdefault(key, {
                "ring_mib": ring, "read_mib": read, "workers": workers, "times_s": []})
        timed(partial(ours_ring, data, self.device), self.device)  # a warm-up, not counted
        free(self.device, full=True)
        keys, last = list(recs), 0.0
        for rnd in range(runs):
            if self.left(until_frac) < last * 1.2:
                res["stopped_after_rounds"] = rnd
                say(f"  (stopped after {rnd} rounds: time budget)")
                break
            t_round = time.perf_counter()
            # Each round starts one setting later, so no setting always follows the same one.
            for key in keys[rnd % len(keys):] + keys[:rnd % len(keys)]:
                rec = recs[key]
                if "error" in rec:
                    continue
                settings = {"TENSORSMITH_PINNED_MIB": str(rec["ring_mib"]),
                            "TENSORSMITH_READ_MIB": str(rec["read_mib"]),
                            "TENSORSMITH_LOAD_THREADS": str(rec["workers"] or 0)}
                try:
                    with envs(settings):
                        t, out = timed(partial(ours_ring, data, self.device), self.device)
                    if rnd == 0 and self.expected is not None:
                        rec["equal"], rec["mismatch"] = compare(digests(out), self.expected)
                except Exception as e:  # noqa: BLE001 - one failing setting never stops it
                    rec["error"] = f"{type(e).__name__}: {e}"[:1000]
                    say(f"  {key:16} error: {rec['error'][:300]}")
                    continue
                finally:
                    out = None
                    free(self.device)
                rec["times_s"].append(t)
            last = time.perf_counter() - t_round
            free(self.device, full=True)
            self.finish_sweep(res, data)
            self.save()
        default = recs[next(iter(recs))].get("median_s")
        for key, rec in recs.items():
            if "median_s" in rec:
                say(f"  {key:16} {rec['median_s']:7.3f} s {rec['gbps']:6.2f} GB/s "
                    f"{rec.get('vs_default', 0):5.2f}x the default"
                    + ("" if rec.get("equal", True) else "  VALUES DIFFER"))
        best = res.get("best")
        if best and default:
            say(f"  best: {best} ({recs[best]['vs_default']:.2f}x the default)")

    @staticmethod
    def finish_sweep(res, data):
        settings = res["settings"]
        for rec in settings.values():
            if rec["times_s"]:
                rec["median_s"] = statistics.median(rec["times_s"])
                rec["gbps"] = data.gb / rec["median_s"]
        default = settings[next(iter(settings))].get("median_s")
        timed_ = {k: r for k, r in settings.items() if "median_s" in r}
        if default:
            for rec in timed_.values():
                rec["vs_default"] = default / rec["median_s"]  # above 1: faster than the default
        if timed_:
            res["best"] = min(timed_, key=lambda k: timed_[k]["median_s"])

    def summary(self):
        for label, res in self.res["full"].items():
            self.res["ratios"][f"full {label}"] = res.get("ratios", {})
        self.res["ratios"]["per rank, slowest rank"] = self.res["per_rank"].get(
            "ratios_slowest_rank", {})
        self.save()
        say("\n=== summary ===")
        b = self.res["bound"]
        say(f"bound {fmt(b.get('bound_gbps'))} GB/s (read {fmt(b.get('read_gbps'))}, "
            f"H2D {fmt(b.get('h2d_gbps'))})")
        for label, res in self.res["full"].items():
            parts = []
            for name in (OURS, REF, ST09, FST, ITT):
                g = self.best_gbps(res, name)
                parts.append(f"{name} {fmt(g)} GB/s ({res.get('best', {}).get(name)})")
            say(f"{label}: " + "; ".join(parts))
            say("  ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in res.get("ratios", {}).items()))
        sw = self.res.get("sweep", {})
        if sw.get("best"):
            say(f"ring sweep: best {sw['best']} (ring MiB/read MiB/workers), "
                f"{sw['settings'][sw['best']].get('vs_default', 0):.2f}x the default 96/8")
        rr = self.res["per_rank"].get("ratios_slowest_rank", {})
        if rr:
            say("per rank, slowest rank: " + ", ".join(f"{k} {v:.2f}" for k, v in rr.items()))
        say("published (theirs, their hardware): " + "; ".join(
            f"{peer}: {p[0]['what']} {p[0].get('gbps', p[0].get('seconds'))}"
            for peer, p in PUBLISHED.items()))
        say(f"json: {self.json_path}")


class PinnedCounter:
    """Counts our pinned buffers while active (wraps tensorsmith's `_Pinned`, if it is
    there); `peak` bytes at once."""

    def __init__(self):
        self.live = self.peak = 0
        self.lock, self.how, self.saved = threading.Lock(), None, None

    def __enter__(self):
        try:
            from tensorsmith._loading import cuda as tc

            cls = tc._Pinned
        except (ImportError, AttributeError):
            self.how = "not counted: no tensorsmith._loading.cuda._Pinned"
            return self
        init, release = cls.__init__, cls.free
        counter = self

        def counted_init(obj, nbytes, *a, **k):
            init(obj, nbytes, *a, **k)
            obj._bench_counted = nbytes
            with counter.lock:
                counter.live += nbytes
                counter.peak = max(counter.peak, counter.live)

        def counted_free(obj, *a, **k):
            n = getattr(obj, "_bench_counted", 0)
            obj._bench_counted = 0
            with counter.lock:
                counter.live -= n
            return release(obj, *a, **k)

        cls.__init__, cls.free = counted_init, counted_free
        self.saved, self.how = (cls, init, release), "counted: _Pinned buffers"
        return self

    def __exit__(self, *exc):
        if self.saved:
            cls, init, release = self.saved
            cls.__init__, cls.free = init, release


def ring_mib():
    try:
        from tensorsmith._loading import cuda as tc

        return tc._ring_bytes() >> 20
    except (ImportError, AttributeError):
        return int(os.environ.get("TENSORSMITH_PINNED_MIB", "96"))


def fmt(v, digits=2):
    return "n/a" if v is None else f"{v:.{digits}f}"


def versions():
    out = {"python": platform.python_version(), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda}
    for mod in ("safetensors", "fastsafetensors", "instanttensor", "tensorsmith", "numpy"):
        try:
            from importlib.metadata import version

            out[mod] = version(mod)
        except Exception:  # noqa: BLE001
            out[mod] = None
    return out


def machine(dir):
    info = {"cpus": os.cpu_count(), "kernel": platform.release()}
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_gib"] = int(f.readline().split()[1]) / (1 << 20)
        best = ("", "")
        real = os.path.realpath(dir)
        with open("/proc/mounts") as f:
            for line in f:
                p = line.split()
                if real == p[1] or real.startswith(p[1].rstrip("/") + "/"):
                    if len(p[1]) >= len(best[0]):
                        best = (p[1], p[2])
        info["data_fs"] = best[1]
    except OSError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_mem_gib"] = torch.cuda.get_device_properties(0).total_memory / (1 << 30)
    return info


def parse():
    e = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true",
                    help="64 MiB model, device=cpu, 2 rounds: checks every path on a CPU")
    ap.add_argument("--gib", type=float, default=float(e("GP_GIB", "8")))
    ap.add_argument("--runs", type=int, default=int(e("GP_RUNS", "5")))
    ap.add_argument("--rank-runs", type=int, default=int(e("GP_RANK_RUNS", "3")))
    ap.add_argument("--dir", default=e("GP_DIR", "/tmp/gpu-peers"))
    ap.add_argument("--budget-s", type=float, default=float(e("GP_BUDGET_S", "420")))
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--threads", type=int, default=16, help="threads of the read bound")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--st09-site", default=e("GP_ST09_SITE", "/tmp/site-st09"),
                    help="folder where safetensors 0.9.0rc1 is installed (pip --target)")
    ap.add_argument("--no-single", action="store_true", help="skip the one-file variant")
    ap.add_argument("--sweep-runs", type=int, default=int(e("GP_SWEEP_RUNS", "3")),
                    help="rounds of the ring sweep (0: skip it)")
    ap.add_argument("--st09-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.hidden = 4096
    if args.dry_run:
        args.gib, args.hidden, args.device = 64 / 1024, 512, "cpu"
        args.runs, args.rank_runs = min(args.runs, 3), 1
        args.sweep_runs = min(args.sweep_runs, 2)
        if "GP_DIR" not in os.environ and args.dir == "/tmp/gpu-peers":
            args.dir = "/tmp/gpu-peers-dry"
    return args


def main():
    args = parse()
    if args.st09_worker:
        return worker_main()
    sys.stdout.reconfigure(line_buffering=True)
    run = Run(args)
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    run.st09 = St09(args.st09_site)  # its torch import and CUDA context overlap the writing
    if is_cuda(args.device):
        if not torch.cuda.is_available():
            sys.exit("no CUDA device: run with --dry-run for the CPU check")
        torch.empty(1, device=args.device)  # our CUDA context, before any measurement
    run.res["meta"] = {"args": vars(args), "versions": versions(), "machine": machine(root),
                       "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                       "ring_mib": ring_mib(), "dry_run": args.dry_run}
    say(f"gpu_load_peers: {run.res['meta']['machine']}, {run.res['meta']['versions']}")

    data, how = make_data(root, args.gib, args.hidden, 4)
    run.res["data"] = {"shards": [str(p) for p in data.paths], "bytes": data.nbytes,
                       "tensors": len(data.shapes), "hidden": args.hidden, **how,
                       "shapes": data.shapes}
    say(f"data: {len(data.paths)} shards, {len(data.shapes)} bf16 tensors, {data.gb:.2f} GB "
        f"({how['written_bytes'] / 1e9:.2f} GB written in {how['write_s']:.1f} s, sync "
        f"{how['sync_s']:.1f} s)")
    run.st09.start(args.device)
    run.res["meta"]["st09"] = {"version": run.st09.version, "error": run.st09.error}
    say(f"safetensors 0.9 worker: {run.st09.version or run.st09.error}")
    run.save()

    try:
        run.bound(data)
        run.full(data, "shards", args.runs, 0.45)
        run.per_rank(data, args.rank_runs, 0.75)
        run.memory(data)
        run.sweep(data, args.sweep_runs, 0.85)
        if args.no_single:
            run.res["notes"].append("one-file variant skipped (--no-single)")
        else:
            full = run.res["full"]["shards"]
            per_round = sum(full[name][mode]["median_s"]
                            for name, mode in full.get("best", {}).items() if mode)
            write_est = (data.nbytes / 1.5e9) if not (root / "single").exists() else 5
            if run.left() > write_est + 3 * per_round + 10:
                single, how1 = make_data(root, args.gib, args.hidden, 1)
                run.res["data"]["single"] = {"path": str(single.paths[0]), **how1}
                say(f"\none-file variant written ({how1['write_s']:.1f} s)")
                best = full.get("best", {})
                run.full(single, "single", 3, 1.0,
                         modes_of={k: [v] for k, v in best.items() if v})
            else:
                run.res["notes"].append(
                    f"one-file variant skipped: {run.left():.0f} s left, needs about "
                    f"{write_est + 3 * per_round:.0f} s")
                say(run.res["notes"][-1])
    finally:
        run.st09.close()
        run.res["meta"]["elapsed_s"] = time.monotonic() - run.t0
        run.save()
    run.summary()


if __name__ == "__main__":
    main()
