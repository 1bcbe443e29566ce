"""Loading tensors onto a CUDA device at the hardware's speed.

Rust threads read the file with positioned reads (the GIL released) into a bounded ring of
pinned host buffers; each filled buffer is copied to the device on one stream with
`non_blocking`, so the copies overlap the reads of the next buffers. A buffer is reused only
after its copies have finished (a CUDA event per buffer). Each tensor owns its device storage,
allocated once at its final size, and its bytes land there directly: no second device copy,
no staging tensor on the device. Peak pinned memory is the ring (96 MiB by default, settable
with TENSORSMITH_PINNED_MIB) in buffers of one read each (8 MiB, TENSORSMITH_READ_MIB), filled
by TENSORSMITH_LOAD_THREADS workers; the ring is given back after the load (unregistered and
freed, never left in a cache). Only tensors stored as one raw run are read this way; the others
(decoded zTensor parts, dequantized GGUF blocks) are made on the CPU and copied over.

What a buffer is filled with is a `Piece`: a run of a file (`span_pieces`: whole tensors,
first-dimension parts) or a sub-part of a strided per-rank part (`part_pieces`: gathered by
the native plan). The device side is a ring object: `CudaRing` (pinned buffers, a stream,
events) or `HostRing` (plain buffers, CPU tensors as the destination, copies done at once),
so the pipeline's reads, slot reuse and copies are tested without a GPU.

A cold file is read around the page cache (`O_DIRECT`, `_direct_files`): each buffer has room
for the aligned span around its run, and a fill says where the run's bytes start in it.

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


# O_DIRECT wants offsets, lengths and buffers aligned to the device's block; ring buffers are
# made this much larger and used from an aligned address.
ALIGN = 4096


def _direct_files(native, files):
    """The files of `files` (indexes) to read bypassing the page cache: TENSORSMITH_DIRECT_IO
    "1" all local files, "auto" those less than half in the page cache (a cold load, where
    the cache only adds a copy; a warm one keeps it), "0" (the default) none. Off by
    default because it has not yet won where measured: cold, on a 2-core virtual machine's
    ext4 disk, the ring read the file 0.91x as fast with O_DIRECT as through the cache (its
    read-ahead; benches/ring_cold_read.py); the GPU machines' run decides the default."""
    mode = os.environ.get("TENSORSMITH_DIRECT_IO", "0").lower()
    if mode in ("0", "off", "false", "no"):
        return set()
    out = set()
    for i in files:
        if mode in ("1", "on", "true", "yes"):
            out.add(i)
        else:
            r = native.resident(i)
            if r is not None and r < 0.5:
                out.add(i)
    return out


def _ring_bytes():
    mib = int(os.environ.get("TENSORSMITH_PINNED_MIB", "96"))
    return max(mib, 1) << 20


def _chunk():
    """Bytes per read (and per ring buffer): TENSORSMITH_READ_MIB, else CHUNK. With the ring's
    size it sets how many reads are in flight: ring // read, at most the workers."""
    mib = int(os.environ.get("TENSORSMITH_READ_MIB", "0"))
    return mib << 20 if mib > 0 else CHUNK


def _threads(native=None, files=()):
    """Ring workers: TENSORSMITH_LOAD_THREADS, else one per core up to 16 (copies out of the
    page cache are bound by the CPUs), and at least a URL's `max_concurrency` (its GETs are
    bound by the network, not the cores)."""
    n = int(os.environ.get("TENSORSMITH_LOAD_THREADS", "0"))
    if n:
        return n
    n = min(16, os.cpu_count() or 4)
    for i in files:
        n = max(n, native.parallel_reads(i) or 0)
    return n


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


class Piece:
    """One fill of a ring buffer: `fill(ptr, cap)` reads `nbytes` bytes into host memory at
    `ptr` (an ALIGNed address with `cap` >= nbytes + 2 * ALIGN bytes; natively, the GIL
    released) and returns where they start there (None: at `ptr`), then `copies` (flat uint8
    destination tensor, offset in it, offset in the piece, bytes) move them to their
    tensors."""

    __slots__ = ("fill", "nbytes", "copies")

    def __init__(self, fill, nbytes, copies):
        self.fill, self.nbytes, self.copies = fill, nbytes, copies


def _plan(ranges):
    """`ranges` (name -> (file, start, end), in file order) as pieces to read: (file, offset,
    length) runs of at most `_chunk()` bytes, each with the (tensor name, offset in the
    tensor) its bytes go to. Consecutive tensors of one file share a run."""
    chunk = _chunk()
    runs = []  # [file, start, end, [(name, tensor_start_in_file)]]
    for name, (i, start, end) in ranges.items():
        pos = start
        while pos < end:
            last = runs[-1] if runs else None
            if last and last[0] == i and last[2] == pos and last[2] - last[1] < chunk:
                take = min(end, last[1] + chunk)
                last[2] = take
                last[3].append((name, start))
            else:
                take = min(end, pos + chunk)
                runs.append([i, pos, take, [(name, start)]])
            pos = take
    return runs


def span_pieces(native, ranges, dest, direct=()):
    """Pieces reading `ranges` (name -> (file, start, end)) into `dest` (name -> flat uint8
    tensor of the span's size): runs of at most `_chunk()` bytes, neighbouring tensors sharing
    one; the runs of files in `direct` read bypassing the page cache (where the file cannot
    be, as a plain read)."""
    pieces = []
    for i, start, end, targets in _plan(ranges):
        copies = []
        for name, t_start in targets:
            d = dest[name]
            a, b = max(start, t_start), min(end, t_start + d.numel())
            copies.append((d, a - t_start, a - start, b - a))
        if i in direct:
            def fill(ptr, cap, i=i, s=start, n=end - start):
                at = native.read_into_direct(i, s, n, ptr, cap)
                if at is None:
                    native.read_into(i, s, n, ptr)
                return at
        else:
            def fill(ptr, cap, i=i, s=start, n=end - start):
                native.read_into(i, s, n, ptr)
        pieces.append(Piece(fill, end - start, copies))
    return pieces


def part_pieces(native, name, cut, shape, nbytes, dest, max_gap=None):
    """Pieces reading the part `cut` of tensor `name` (of `shape`; the part `nbytes` long)
    into `dest` (a flat uint8 tensor of the part, row-major), each at most `_chunk()` bytes: the
    part cut along its leading dimensions into sub-parts, each gathered by the native plan
    (only its spans read). None when the part cannot be cut on whole bytes (a packed dtype
    cut inside a row): then it is read whole on the host."""
    full = list(cut) + [(0, d) for d in shape[len(cut):]]
    pieces = []
    chunk = _chunk()

    def split(prefix, depth, at):
        # Bytes of one index at `depth` with every later dimension as `full` has it.
        count = 1
        for a, b in full[depth + 1:]:
            count *= b - a
        rows = full[depth][1] - full[depth][0]
        if rows == 0:
            return at
        per, left = divmod(nbytes * count, _count(full) or 1)
        if left:
            raise _NotWhole
        step = max(1, chunk // per) if per else rows
        if per > chunk and depth + 1 < len(full):
            for r in range(*full[depth]):
                at = split(prefix + [(r, r + 1)], depth + 1, at)
            return at
        for r in range(full[depth][0], full[depth][1], step):
            sub = prefix + [(r, min(r + step, full[depth][1]))] + full[depth + 1:]
            n = per * (sub[depth][1] - sub[depth][0])
            pieces.append(Piece(lambda ptr, cap, sub=sub, n=n:
                                native.read_part_into(name, sub, ptr, n, max_gap),
                                n, [(dest, at, 0, n)]))
            at += n
        return at

    try:
        split([], 0, 0)
    except _NotWhole:
        return None
    return pieces


class _NotWhole(Exception):
    pass


def _count(full):
    n = 1
    for a, b in full:
        n *= b - a
    return n


def load(native, names, device, cpu_tensor, ring=None):
    """`names` -> tensors on CUDA `device`; `cpu_tensor(name)` makes those not stored raw.
    Every tensor is complete when this returns; on an error none is handed out. `ring`:
    None, the pinned ring onto `device`; a `HostRing` with device "cpu" runs the same
    pipeline into CPU tensors (tests without a GPU)."""
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
        dest = {name: out[name].view(-1).view(torch.uint8) for name in raw}
        files = {r[0] for r in raw.values()}
        run(span_pieces(native, raw, dest, _direct_files(native, files)),
            CudaRing(device) if ring is None else ring, _threads(native, files))
    return out


class CudaRing:
    """The device side of the ring: pinned buffers of our own, copies on one stream, an
    event per filled buffer."""

    def __init__(self, device):
        self.stream = torch.cuda.Stream(device=device)

    def buffer(self, nbytes):
        return _Pinned(nbytes)

    def copy(self, dst, src):
        with torch.cuda.stream(self.stream):
            dst.copy_(src, non_blocking=True)

    def mark(self):
        ev = torch.cuda.Event()
        ev.record(self.stream)
        return ev

    def finish(self):
        self.stream.synchronize()


class _Done:
    def synchronize(self):
        pass


class _Host:
    def __init__(self, nbytes, ring):
        self.host = torch.empty(nbytes, dtype=torch.uint8)
        self.ptr = self.host.data_ptr()
        self.ring = ring
        ring.live += nbytes
        ring.made += 1
        ring.peak = max(ring.peak, ring.live)

    def free(self):
        if self.host is not None:
            self.ring.live -= self.host.numel()
            self.host = None


class HostRing:
    """The ring with plain host memory in place of pinned buffers and CPU tensors in place
    of device memory (copies done at once): the pipeline's reading, slot reuse and copying
    run without a GPU. `peak` (bytes of ring buffers alive at once), `made` (buffers made)
    and `live` (after the run: 0) are what a test checks."""

    def __init__(self):
        self.live = self.peak = self.made = 0

    def buffer(self, nbytes):
        return _Host(nbytes, self)

    def copy(self, dst, src):
        dst.copy_(src)

    def mark(self):
        return _Done()

    def finish(self):
        pass


def run(pieces, ring, threads=None):
    """Fills ring buffers with `pieces` on up to `threads` (default `_threads()`) workers and
    hands each filled buffer's copies to `ring` in order; a buffer is filled again only after
    its copies are done (its mark synchronized). Every buffer is given back before this
    returns, also on an error (the first one is raised)."""
    if not pieces:
        return
    slots = max(1, min(_ring_bytes() // _chunk(), len(pieces)))
    # Room for an aligned start and a direct read's aligned span around the piece.
    slot_bytes = max(p.nbytes for p in pieces) + 3 * ALIGN
    starts = [0] * len(pieces)  # where each piece's bytes start in its buffer
    # Each slot is allocated and registered by the worker that first fills it, so the
    # registrations (page pinning: about 0.4 ms per MiB) run in parallel with each other and
    # with the first reads.
    buffers = [None] * slots
    try:
        def fill(k, wait_for):
            if wait_for is not None:
                wait_for.synchronize()  # the slot's previous copies are done (GIL released)
            slot = k % slots
            if buffers[slot] is None:
                buffers[slot] = ring.buffer(slot_bytes)
            ptr = buffers[slot].ptr
            pad = -ptr % ALIGN
            at = pieces[k].fill(ptr + pad, slot_bytes - pad)
            starts[k] = pad + (at or 0)

        with ThreadPoolExecutor(max_workers=min(threads or _threads(), slots)) as pool:
            futures = [pool.submit(fill, k, None) for k in range(min(slots, len(pieces)))]
            for k, piece in enumerate(pieces):
                futures[k].result()
                futures[k] = None
                src = buffers[k % slots].host[starts[k]:]
                for d, at, off, n in piece.copies:
                    ring.copy(d[at:at + n], src[off:off + n])
                mark = ring.mark()
                if k + slots < len(pieces):
                    futures.append(pool.submit(fill, k + slots, mark))
        ring.finish()
    except BaseException:
        try:
            ring.finish()
        except Exception:  # noqa: BLE001 - the first error is the one to report
            pass
        raise
    finally:
        for b in buffers:
            if b is not None:
                b.free()
