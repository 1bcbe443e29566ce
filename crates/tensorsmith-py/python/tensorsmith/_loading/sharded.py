"""`tensorsmith.torch.load_sharded`: the parts of tensors one rank of a tensor-parallel job
keeps, reading only their byte spans.

Each part is planned in Rust (`tensorsmith::rank_plan`): a whole tensor or a first-dimension
cut is one contiguous span; a cut of another dimension is one run per index of the
dimensions before it, neighbouring runs read together when the gap between them is at most
4 KiB for local files or 256 KiB for URLs (so bytes read <= kept + (runs - 1) * gap in that
case, exactly the kept bytes otherwise). On the CPU each part is read straight into its
tensor, the reads of all parts of a file in one queue (as many at once as a URL's
`max_concurrency`, up to 4 for local files). Onto CUDA every part goes through the pinned ring
of `_torch_cuda` into its device tensor: one-span parts in runs of at most 8 MiB, strided
parts in sub-parts of at most 8 MiB (cut along their leading dimensions, each gathered by
the native plan into a ring buffer), so no host copy of a tensor or of a part is made. A
packed-dtype part that cannot be cut on whole bytes inside a row is gathered on the host
(its bytes alone) and copied over.
"""

import os

import torch

from .. import _open_native, _torch
from . import rank_plan as _rank_plan
from . import cuda as _torch_cuda
from ..errors import InvalidInput, TensorNotFound, Unsupported


def _natives(paths, backend, storage_options):
    """Opened files, one per path: a file, folder, shard index, URL or file object, or a
    list of them."""
    if isinstance(paths, (str, bytes, os.PathLike)) or hasattr(paths, "read"):
        paths = [paths]
    try:
        paths = list(paths)
    except TypeError:
        raise InvalidInput(f"paths must be a path, a URL or a list of them, not "
                           f"{type(paths).__name__}") from None
    if not paths:
        raise InvalidInput("paths is empty: give a file, a folder, a shard index or a list "
                           "of shards")
    return [_open_native(p, backend, storage_options) for p in paths]


def _owners(natives, names):
    """Tensor name -> the opened file holding it, for the names asked; a name in two of the
    files given is refused (which one to read would be a guess)."""
    owner = {}
    for f in natives:
        have = set(f.names())
        for n in names:
            if n in have:
                if n in owner:
                    raise InvalidInput(f"tensor {n!r} is in both {owner[n].location} and "
                                       f"{f.location}")
                owner[n] = f
    missing = [n for n in names if n not in owner]
    if missing:
        where = ", ".join(f.location for f in natives)
        raise TensorNotFound(f"{where}: no tensor {missing[0]!r}"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return owner


def _cut_text(cut):
    """A cut as an index: `[0:4, 10:13]`."""
    return "[" + ", ".join(f"{a}:{b}" for a, b in cut) + "]"


def load(natives, plan, device, stats=None, max_gap=None, ring=None, workers=None):
    """`plan` (name -> None, (dim, start, stop) or a get_slice index) -> tensors on
    `device` (a torch.device). `ring`: the ring every part goes through; None: the pinned
    ring onto CUDA, direct reads into the tensors on the CPU (`_torch_cuda.HostRing` with
    device "cpu": the CUDA path's pipeline with CPU tensors in place of device memory).
    `workers`: the ring's threads (default: `_torch_cuda._threads`)."""
    if not isinstance(plan, dict):
        raise InvalidInput(f"plan must be a dict of tensor name -> part, not "
                           f"{type(plan).__name__}")
    owner = _owners(natives, list(plan))
    for f in natives:
        f.reset_bytes_read()
    # Parts are read into CPU tensors, or through the ring into CUDA ones; for another
    # device (mps, xpu, ...) into CPU tensors moved there at the end; onto "meta" nothing is
    # read (shapes and dtypes only, as torch makes meta tensors).
    meta = device.type == "meta"
    alloc = device if device.type in ("cpu", "cuda", "meta") else torch.device("cpu")
    out = {}
    spans = {}  # native -> {name: (file index, start, end)}: one-span parts for the ring
    pieces = []  # strided parts' pieces for the ring
    strided = set()  # the natives strided parts are read from
    direct = {}  # native -> [(name, cut, addr, len)]: parts read straight into CPU tensors
    posts = {}
    if ring is None and device.type == "cuda":
        ring = _torch_cuda.CudaRing(device)
    for name, spec in plan.items():
        f = owner[name]
        dtype_name, shape, layout = f.info_of(name)
        if layout.startswith("ggml:") or f.raw_range(name) is None:
            # GGUF blocks, compressed or sparse parts: whole tensors only, made as
            # get_tensor makes them.
            part = _rank_plan.plan_entry(name, spec, shape)
            if part.cut and part.shape != list(shape):
                raise Unsupported(f"tensor {name!r} ({layout}, not stored as one raw run) is "
                                  "read whole only: plan None for it")
            t = _torch.Reader(f, "pread").tensor(name)
            out[name] = t if device.type == "cpu" else t.to(device)
            continue
        part = _rank_plan.plan_entry(name, spec, shape)
        dtype = _torch.torch_dtype(dtype_name)
        try:
            tshape = _torch.torch_shape(dtype_name, part.shape)
        except Unsupported as e:
            raise Unsupported(f"tensor {name!r} of shape {list(shape)}, part "
                              f"{_cut_text(part.cut)}: {e}") from None
        t = torch.empty(tshape, dtype=dtype, device=alloc)
        nbytes = t.numel() * t.element_size()
        out[name] = t
        if part.post is not None:
            posts[name] = part.post
        if not nbytes or meta:
            continue
        if ring is None:
            direct.setdefault(f, []).append((name, part.cut, t.data_ptr(), nbytes))
            continue
        span = f.part_span(name, part.cut)
        if span is not None:
            spans.setdefault(f, {})[name] = span
            continue
        flat = t.view(-1).view(torch.uint8)
        more = _torch_cuda.part_pieces(f, name, part.cut, shape, nbytes, flat, max_gap)
        if more is None:  # a packed dtype cut inside a row: the part's bytes on the host
            host = torch.empty(nbytes, dtype=torch.uint8)
            f.read_part_into(name, part.cut, host.data_ptr(), nbytes, max_gap)
            flat.copy_(host)
        else:
            pieces += more
            strided.add(f)
    for f, parts in direct.items():
        f.read_parts_into(parts, max_gap)  # every part's reads in one queue
    threads = _torch_cuda._threads()
    for f, ranges in spans.items():
        dest = {n: out[n].view(-1).view(torch.uint8) for n in ranges}
        files = {r[0] for r in ranges.values()}
        cold = _torch_cuda._direct_files(f, files)
        pieces += _torch_cuda.span_pieces(f, ranges, dest, cold)
        threads = max(threads, _torch_cuda._threads(f, files))
    for f in strided:
        threads = max(threads, _torch_cuda._threads(f, range(f.file_count())))
    if pieces:
        _torch_cuda.run(pieces, ring, threads if workers is None else workers)
    kept = 0
    for name, t in out.items():
        if name in posts:
            t = t[posts[name]]
        if t.device != device:
            t = t.to(device)
        if not t.is_contiguous():
            t = t.contiguous()
        elif not meta and t.untyped_storage().nbytes() > t.numel() * t.element_size():
            # A step kept a few rows of the range read: they alone are kept, not the range.
            t = t.clone(memory_format=torch.contiguous_format)
        out[name] = t
        kept += t.numel() * t.element_size()
    if stats is not None:
        read, reads = (sum(v) for v in zip(*(f.bytes_read() for f in natives)))
        stats.update(bytes_kept=kept, bytes_read=read, reads=reads)
    return out
