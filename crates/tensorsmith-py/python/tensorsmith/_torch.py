"""NumPy arrays to PyTorch tensors and back (only imported when PyTorch is used). Tensors
handed to PyTorch own their memory (one copy), as the reference's do."""

import numpy as np
import torch

_TORCH = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool, "C64": torch.complex64, "C128": torch.complex128,
}
for _name, _attr in (("U16", "uint16"), ("U32", "uint32"), ("U64", "uint64"),
                     ("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2"),
                     ("F8_E8M0", "float8_e8m0fnu")):
    if hasattr(torch, _attr):
        _TORCH[_name] = getattr(torch, _attr)
_FROM_TORCH = {v: k for k, v in _TORCH.items()}


def to_torch(arr: np.ndarray, dtype: str):
    from .errors import Unsupported

    if dtype not in _TORCH:
        raise Unsupported(f"dtype {dtype} has no PyTorch equivalent")
    if arr.size == 0:
        return torch.empty(arr.shape, dtype=_TORCH[dtype])
    raw = bytearray(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
    return torch.frombuffer(raw, dtype=_TORCH[dtype]).reshape(arr.shape)


def to_numpy(t):
    """A contiguous CPU tensor as (safetensors dtype, NumPy uint8 bytes, shape)."""
    from .errors import InvalidInput, Unsupported

    if not isinstance(t, torch.Tensor):
        raise InvalidInput(f"expected a torch.Tensor, not {type(t).__name__}")
    if t.layout != torch.strided:
        raise InvalidInput("sparse tensors cannot be saved; make them dense first")
    t = t.detach().cpu().contiguous()
    if t.dtype not in _FROM_TORCH:
        raise Unsupported(f"PyTorch dtype {t.dtype} has no safetensors equivalent")
    raw = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else np.empty(0, np.uint8)
    return _FROM_TORCH[t.dtype], raw, list(t.shape)
