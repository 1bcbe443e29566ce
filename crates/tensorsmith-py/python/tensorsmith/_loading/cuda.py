"""Loading tensors onto a CUDA device at the hardware's speed.

Rust threads read the file with positioned reads (the GIL released) into a bounded ring of
pinned host buffers; each filled buffer is copied to the device on one stream with
`non_blocking`, so the copies overlap the reads of the next buffers. A buffer is reused only
after its copies have finished (a CUDA event per buffer). Each tensor owns its device storage,
allocated once at its final size, and its bytes land there directly: no second device copy,
no staging tensor on the device. Peak pinned memory is the ring (96 MiB by default, settable
with TENSORSMITH_PINNED_MIB); the ring is given back after the load (unregistered and freed,
never left in a cache). Only tensors stored as one raw run are read this way; the others
(decoded zTensor parts, dequantized GGUF blocks) are made on the CPU and copied over.

No CUDA toolkit is needed to build tensorsmith: the GPU is driven through torch.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import torch

from .._torch import torch_dtype, torch_shape

# Bytes per read: 16 reads of 8 MiB in flight keep the page cache's copy rate (about
# 45 GB/s with 16 threads on an H100 host), while the ring stays small enough that pinning
# it (about 0.4 ms per MiB, paid at every load since the ring is not kept) costs little.
# Measured on an H100 (8 GiB bf16, warm cache): a ring of 512 MiB in 32 MiB reads gave
# 19 GB/s, 256 MiB in 16 MiB reads 29 GB/s, 128 MiB in 8 MiB reads 32.5 GB/s; on two
# machines 96 MiB in 8 MiB reads beat 128 MiB (38.2 vs 33.9 and 27.6 vs 23.7 GB/s).
CHUNK = 8 << 20


def _ring_bytes():
    mib = int(os.environ.get("TENSORSMITH_PINNED_MIB", "96"))
    return max(mib, 1) << 20


def _threads():
    return int(os.environ.get("TENSORSMITH_LOAD_THREADS", "0")) or min(16, os.cpu_count() or 4)


class _Pinned:
    """Page-locked host memory of our own (an anonymous buffer registered with CUDA), so it
    is unregistered and freed when the load ends instead of staying in torch's pinned
    cache."""

    def __init__(self, nbytes):
        self.host = torch.empty(nbytes, dtype=torch.uint8)
        self.ptr = self.host.data_ptr()
        rt = torch.cuda.cudart()
        err = rt.cudaHostRegister(self.ptr, nbytes, 0)
        if int(err) != 0:
            raise RuntimeError(f"cudaHostRegister of {nbytes} bytes failed: {err}")
        self.registered = True

    def free(self):
        if self.registered:
            torch.cuda.cudart().cudaHostUnregister(self.ptr)
            self.registered = False
        self.host = None


def _plan(ranges):
    """`ranges` (name -> (file, start, end), in file order) as pieces to read: (file, offset,
    length) runs of at most CHUNK bytes, each with the (tensor name, offset in the tensor) its
    bytes go to. Consecutive tensors of one file share a run."""
    runs = []  # [file, start, end, [(name, tensor_start_in_file)]]
    for name, (i, start, end) in ranges.items():
        pos = start
        while pos < end:
            last = runs[-1] if runs else None
            if last and last[0] == i and last[2] == pos and last[2] - last[1] < CHUNK:
                take = min(end, last[1] + CHUNK)
                last[2] = take
                last[3].append((name, start))
            else:
                take = min(end, pos + CHUNK)
                runs.append([i, pos, take, [(name, start)]])
            pos = take
    return runs


def load(native, names, device, cpu_tensor):
    """`names` -> tensors on CUDA `device`; `cpu_tensor(name)` makes those not stored raw.
    Every tensor is complete when this returns; on an error none is handed out."""
    out = {}
    raw = {}  # name -> (file, start, end)
    for name in names:
        dtype_name, shape, layout = native.info_of(name)
        rng = native.raw_range(name)
        if rng is None or layout.startswith("ggml:"):
            # Decoded or block tensors: made on the CPU, copied once.
            out[name] = cpu_tensor(name).to(device)
            continue
        out[name] = torch.empty(torch_shape(dtype_name, shape), dtype=torch_dtype(dtype_name),
                                device=device)
        if rng[2] > rng[1]:
            raw[name] = rng
    if raw:
        _pipeline(native, _plan(raw),
                  {name: out[name].view(-1).view(torch.uint8) for name in raw}, device)
    return out


def _pipeline(native, runs, dest, device):
    """Reads `runs` into the ring and copies them into `dest` (name -> flat uint8 device
    tensor)."""
    slots = max(1, min(_ring_bytes() // CHUNK, len(runs)))
    slot_bytes = min(CHUNK, max(r[2] - r[1] for r in runs))
    # Each slot is allocated and registered by the worker that first fills it, so the
    # registrations (page pinning: about 0.4 ms per MiB) run in parallel with each other and
    # with the first reads.
    pinned = [None] * slots
    stream = torch.cuda.Stream(device=device)
    events = [None] * slots
    try:
        def read(k, wait_for):
            if wait_for is not None:
                wait_for.synchronize()  # the slot's previous copies are done (GIL released)
            slot = k % slots
            if pinned[slot] is None:
                pinned[slot] = _Pinned(slot_bytes)
            i, start, end, _ = runs[k]
            native.read_into(i, start, end - start, pinned[slot].ptr)

        with ThreadPoolExecutor(max_workers=min(_threads(), slots)) as pool:
            futures = [pool.submit(read, k, None) for k in range(min(slots, len(runs)))]
            for k, (i, start, end, targets) in enumerate(runs):
                futures[k].result()
                futures[k] = None
                src = pinned[k % slots].host
                with torch.cuda.stream(stream):
                    for name, t_start in targets:
                        d = dest[name]
                        a, b = max(start, t_start), min(end, t_start + d.numel())
                        d[a - t_start:b - t_start].copy_(src[a - start:b - start],
                                                         non_blocking=True)
                    ev = torch.cuda.Event()
                    ev.record(stream)
                events[k % slots] = ev
                if k + slots < len(runs):
                    futures.append(pool.submit(read, k + slots, ev))
        stream.synchronize()
    except BaseException:
        try:
            stream.synchronize()
        except Exception:  # noqa: BLE001 - the first error is the one to report
            pass
        raise
    finally:
        for p in pinned:
            if p is not None:
                p.free()
