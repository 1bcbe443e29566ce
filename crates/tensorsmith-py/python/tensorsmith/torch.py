"""`safetensors.torch`'s functions, backed by tensorsmith (needs PyTorch)."""

import os

from . import _native
from . import load as _load
from . import load_file as _load_file
from ._torch import to_numpy as _to_numpy


def _flatten(tensors: dict):
    return [(name, *_reorder(_to_numpy(t))) for name, t in tensors.items()]


def _reorder(x):
    dtype, raw, shape = x
    return dtype, shape, raw


def save(tensors: dict, metadata=None) -> bytes:
    """PyTorch tensors as safetensors bytes: `tensorsmith.torch.save({"w": torch.ones(2)})`."""
    return _native.serialize(_flatten(tensors), metadata)


def save_file(tensors: dict, filename, metadata=None) -> None:
    """PyTorch tensors to a file, atomically: `save_file({"w": t}, "m.safetensors")`."""
    _native.serialize_file(_flatten(tensors), os.fspath(filename), metadata)


def load(data: bytes):
    """Tensors of safetensors bytes as PyTorch tensors: `load(open(p, "rb").read())`."""
    return _load(data, framework="pt")


def load_file(filename, device="cpu"):
    """Every tensor of a file as PyTorch tensors (CPU): `load_file("m.safetensors")`."""
    if device != "cpu":
        from .errors import OptionError

        raise OptionError(f"device must be 'cpu', not {device!r}")
    return _load_file(filename, framework="pt")


__all__ = ["load", "load_file", "save", "save_file"]
