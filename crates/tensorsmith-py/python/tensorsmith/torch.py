"""The reference `safetensors.torch` module, backed by tensorsmith (needs PyTorch, not NumPy's
extra dtypes: bf16, float8 and the unsigned types work with torch alone).

Loading: CPU tensors are views of a private, copy-on-write mapping of the file (writable; a
write never reaches the file); `device="cuda"` reads through a pinned pipeline straight into
each tensor's device memory; any other device torch knows gets the CPU tensors moved there.
Saving: the reference's checks and messages (shared, sparse and non-contiguous tensors), and
`save_model`/`load_model` for models with tied weights.

Datasets for training loops: `TensorDataset` (map-style, with `TensorSampler` for its
shuffled, DDP-split and resumable orders) and `TensorIterableDataset` (split between DDP ranks
and DataLoader workers, optionally shuffled), samples as CPU tensors that are views of the
shards.
"""

from __future__ import annotations

import operator
import os
from collections import defaultdict
from collections.abc import MutableMapping
from typing import Any, Mapping, Sequence

import torch

from . import _native
from . import load as _load
from . import load_file as _load_file
from ._torch import as_bytes as _as_bytes
from ._torch import parse_device as _parse_device
from ._torch import spec as _spec
from ._options import Metadata, PathOrUrl, Source, StorageOptions
from .errors import InvalidInput

__all__ = [
    "load", "load_file", "save", "save_file", "save_model", "load_model", "storage_ptr",
    "storage_size",
]


def __getattr__(name):
    # The datasets subclass torch.utils.data's classes: imported on first use and left out of
    # __all__, so `from tensorsmith.torch import *` stays the safetensors.torch drop-in.
    if name == "TensorDataset":
        from .torch_dataset import TensorDataset

        return TensorDataset
    if name == "TensorIterableDataset":
        from .torch_iterable import TensorIterableDataset

        return TensorIterableDataset
    if name == "TensorSampler":
        from .torch_sampler import TensorSampler

        return TensorSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_DOCS = "https://huggingface.co/docs/safetensors/torch_shared_tensors"


def storage_ptr(tensor: torch.Tensor) -> int:
    """The address of the storage under `tensor` (0 for meta tensors)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (NotImplementedError, RuntimeError):
        return 0


def storage_size(tensor: torch.Tensor) -> int:
    """The bytes of the storage under `tensor`."""
    try:
        return tensor.untyped_storage().nbytes()
    except (NotImplementedError, RuntimeError):
        return tensor.nelement() * tensor.element_size()


def _end_ptr(tensor: torch.Tensor) -> int:
    """One past the last byte of `tensor`'s elements."""
    if tensor.nelement() == 0:
        return tensor.data_ptr()
    return tensor.view(-1)[-1].data_ptr() + tensor.element_size()


def _is_complete(tensor: torch.Tensor) -> bool:
    """Whether `tensor` covers its whole storage, from its first byte."""
    return (tensor.data_ptr() == storage_ptr(tensor)
            and tensor.nelement() * tensor.element_size() == storage_size(tensor))


def _find_shared_tensors(state_dict):
    """Names grouped by the memory they share: tensors of one storage whose byte ranges
    overlap are in one set; every other tensor is a set of its own. Groups come in the order
    their first tensor appears."""
    by_storage = {}
    for name, t in state_dict.items():
        if t.device.type == "meta":
            continue
        ptr, size = storage_ptr(t), storage_size(t)
        if ptr == 0 or size == 0:
            continue
        by_storage.setdefault((t.device, ptr, size), set()).add(name)
    groups = []
    for names in by_storage.values():
        if len(names) < 2:
            groups.append(names)
            continue
        spans = sorted((state_dict[n].data_ptr(), _end_ptr(state_dict[n]), n) for n in names)
        current, reach = {spans[0][2]}, spans[0][1]
        for start, stop, name in spans[1:]:
            if start >= reach:
                groups.append(current)
                current = {name}
            else:
                current.add(name)
            reach = stop
        groups.append(current)
    return groups


def _remove_duplicate_names(state_dict, *, preferred_names=None, discard_names=None):
    """For each group of names sharing memory, the name to keep (one covering the whole
    storage: preferred names first, then names not to discard, then the first by sort order)
    -> the names to drop."""
    preferred = set(preferred_names or [])
    discard = set(discard_names or [])
    to_remove = defaultdict(list)
    for shared in _find_shared_tensors(state_dict):
        complete = {n for n in shared if _is_complete(state_dict[n])}
        if not complete:
            raise RuntimeError(
                "Error while trying to find names to remove to save state dict, but found no "
                f"suitable name to keep for saving amongst: {shared}. None is covering the "
                "entire storage.Refusing to save/load the model since you could be storing "
                f"much more memory than needed. Please refer to {_DOCS} for more information. "
                "Or open an issue.")
        keep = min(complete)
        if complete - discard:
            keep = min(complete - discard)
        if preferred & complete:
            keep = min(preferred & complete)
        for name in sorted(shared):
            if name != keep:
                to_remove[keep].append(name)
    return to_remove


def _check_for_save(tensors):
    """The reference's refusals, in its order: not a dict, not tensors, sparse tensors,
    tensors sharing memory, non-contiguous tensors."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"Key `{k}` is invalid, expected torch.Tensor but received {type(v)}")
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise ValueError(
            f"You are trying to save a sparse tensors: `{sparse}` which this library does not "
            "support. You can make it a dense tensor before saving with `.to_dense()` but be "
            "aware this might make a much larger file than needed.")
    failing = [names for names in _find_shared_tensors(tensors) if len(names) > 1]
    if failing:
        raise RuntimeError(
            f"""
            Some tensors share memory, this will lead to duplicate memory on disk and potential differences when loading them again: {failing}.
            A potential way to correctly save your model is to use `save_model`.
            More information at {_DOCS}
            """)
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{k}` which is not allowed. It "
                "either means you are trying to save tensors which are reference of each other "
                "in which case it's recommended to save only the full tensors, and reslice at "
                "load time, or simply call `.contiguous()` on your tensor to pack it before "
                "saving.")


def _flatten(tensors):
    """(name, dtype, shape, bytes) per tensor for the native writer: CPU tensors lend their
    memory; tensors on another device are copied to the host, one at a time as the writer
    reaches them (`_native` reads each buffer once, in order)."""
    _check_for_save(tensors)
    out = []
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise InvalidInput(f"tensor names must be strings, not {type(name).__name__}")
        if t.device.type == "cpu":
            dtype, shape, flat = _as_bytes(name, t)
            out.append((name, dtype, shape, flat.numpy()))
        elif t.device.type == "meta":
            # No data to write: torch's own error, as the reference raises it (its copy to
            # the CPU), before anything is written.
            t.to("cpu")
            raise InvalidInput(f"tensor {name!r} is a meta tensor: it has no data to save")
        else:
            # Copied to the host when the writer reaches it, and dropped after.
            dtype, shape = _spec(name, t)
            out.append((name, dtype, shape, lambda t=t, name=name: _as_bytes(name, t)[2].numpy()))
    return out


def save(tensors: Mapping[str, torch.Tensor], metadata: Metadata = None) -> bytes:
    """PyTorch tensors as safetensors bytes, as the reference writes them:
    `tensorsmith.torch.save({"w": torch.ones(2)})`."""
    return _native.serialize(_flatten(tensors), metadata)


def save_file(tensors: Mapping[str, torch.Tensor], filename: PathOrUrl,
              metadata: Metadata = None) -> None:
    """PyTorch tensors to a file, atomically: `save_file({"w": t}, "m.safetensors")`."""
    _native.serialize_file(_flatten(tensors), os.fspath(filename), metadata)


def load(data: bytes) -> dict[str, torch.Tensor]:
    """Tensors of safetensors bytes as PyTorch tensors (owned): `load(open(p, "rb").read())`."""
    return _load(data, framework="pt")


def load_file(filename: Source, device: Any = "cpu", *, backend: str = "mmap",
              storage_options: StorageOptions = None) -> dict[str, torch.Tensor]:
    """Every tensor of a file, folder of shards or shard index as PyTorch tensors on `device`
    ("cpu", "cuda", "cuda:N", an int, a torch.device): `load_file("m.safetensors")`. A URL
    (`s3://`, `az://`, `gs://`, `hf://`, `http(s)://`) is read by ranges, with
    `storage_options` (as `tensorsmith.safe_open` takes them); onto a GPU through the same
    pinned pipeline as a local file."""
    return _load_file(filename, framework="pt", backend=backend, device=device,
                      storage_options=storage_options)


def load_sharded(paths: Source | Sequence[PathOrUrl], plan: Mapping[str, Any],
                 device: Any = "cpu", *, backend: str = "mmap",
                 storage_options: StorageOptions = None, stats: dict[str, Any] | None = None,
                 max_gap: int | None = None) -> dict[str, torch.Tensor]:
    """The parts of tensors one rank keeps, reading only their byte spans:
    `load_sharded("m.safetensors", {"w_up": (0, r * n, (r + 1) * n), "norm": None}, "cuda:0")`.

    `paths`: a file, a folder of shards, a shard index JSON, a URL (`s3://`, `az://`,
    `gs://`, `hf://`, `http(s)://`, read by ranged GETs with `storage_options` as
    `safe_open` takes them), or a list of shard files or URLs. `plan`: tensor name -> the
    part this rank needs, only the names it holds are loaded:
      - `None`: the whole tensor;
      - `(dim, start, stop)`: elements `start:stop` along dimension `dim` (column-parallel
        layers and experts cut dimension 0, row-parallel layers dimension 1), counted in the
        file's elements (an F4 tensor's values, two per torch `float4_e2m1fn_x2` element);
      - a `get_slice` index (a slice, or a tuple of slices, ints and `...`: `(slice(None),
        slice(a, b))`), under the reference's NumPy rules (checked, never clamped).
    A plan of safetensors 0.9's per-rank prefetch (`PrefetchPlan = Dict[str,
    Optional[slice]]`: None or a first-dimension slice) is such a plan, so one plan serves
    both; `safe_open(..., framework="pt").prefetch(plan)` takes it as 0.9's does. A step
    other than 1 (which 0.9 refuses) reads the whole `start:stop` range and keeps every
    step-th row in memory: `stats` then shows the bytes read beyond those kept.

    A first-dimension cut (and a whole tensor) is one contiguous span; a cut of another
    dimension is a run per row, neighbouring runs read together when the gap between them is
    at most 4 KiB (local files) or 256 KiB (URLs), or `max_gap` bytes when given (0: never
    merged, exactly the kept bytes, one read per run): bytes read <= kept + (runs - 1) * gap
    then, exactly the kept bytes otherwise. Cuts of packed dtypes (F4, F6, I4, ...) must fall
    on whole bytes; GGUF block, compressed and sparse tensors are read whole only (plan
    None), else refused. Tensors are new (owned), contiguous, on `device` ("cpu", "cuda",
    "cuda:N", an int, a torch.device; onto CUDA every part goes through the pinned ring, in
    pieces of at most 8 MiB).
    `stats`, a dict, receives `bytes_kept`, `bytes_read` (tensor bytes asked of the files)
    and `reads`."""
    from ._loading import sharded as _torch_sharded

    natives = _torch_sharded._natives(paths, backend, storage_options)
    if max_gap is not None:
        gap = -1
        if not isinstance(max_gap, bool):
            try:
                gap = operator.index(max_gap)  # NumPy integers too
            except TypeError:
                pass
        if gap < 0:
            raise InvalidInput(f"max_gap must be a number of bytes >= 0, not {max_gap!r}")
        max_gap = gap
    if stats is not None and not isinstance(stats, MutableMapping):
        raise InvalidInput(f"stats must be a dict to fill, not {type(stats).__name__}")
    return _torch_sharded.load(natives, plan, _parse_device(device), stats, max_gap)


def save_model(model: torch.nn.Module, filename: PathOrUrl, metadata: Metadata = None,
               force_contiguous: bool = True) -> None:
    """Saves `model.state_dict()`, tied weights once: each dropped name is recorded in the
    metadata as the name kept (user keys are not overwritten)."""
    state_dict = model.state_dict()
    for kept, dropped in _remove_duplicate_names(state_dict).items():
        for name in dropped:
            if metadata is None:
                metadata = {}
            metadata.setdefault(name, kept)
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=metadata)
    except ValueError as e:
        raise ValueError(f"{e} Or use save_model(..., force_contiguous=True), read the docs for "
                         "potential caveats.") from None


def load_model(model: torch.nn.Module, filename: Source, strict: bool = True,
               device: Any = "cpu", *, backend: str = "mmap",
               storage_options: StorageOptions = None) -> tuple[set[str], list[str]]:
    """Loads a file written by `save_model` into `model` (tied weights restored); returns
    `(missing, unexpected)` names. With `strict`, any of either is a RuntimeError."""
    state_dict = load_file(filename, device=device, backend=backend,
                           storage_options=storage_options)
    tied = _remove_duplicate_names(model.state_dict(), preferred_names=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing)
    for dropped in tied.values():
        for name in dropped:
            if name in missing:
                missing.remove(name)
            else:
                unexpected.append(name)
    if strict and (missing or unexpected):
        msg = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            msg += "\n    Missing key(s) in state_dict: " + ", ".join(
                f'"{k}"' for k in sorted(missing))
        if unexpected:
            msg += "\n    Unexpected key(s) in state_dict: " + ", ".join(
                f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(msg)
    return missing, unexpected
