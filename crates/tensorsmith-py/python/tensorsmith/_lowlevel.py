"""The reference package's framework-free writing and reading API: `TensorSpec` (a tensor as a
dtype, a shape and a raw memory range), `serialize`, `serialize_file` and `deserialize`, with
the reference's names, dtype spellings and behaviour."""

from __future__ import annotations

import ctypes
import os
from typing import Any, Mapping, Sequence

from . import _native
from ._options import Metadata, PathOrUrl
from .errors import TensorsmithError

# TensorSpec's dtype spellings (NumPy/PyTorch style) -> safetensors codes.
_SPEC_DTYPES = {
    "bool": "BOOL", "int8": "I8", "uint8": "U8", "int16": "I16", "uint16": "U16",
    "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64",
    "float16": "F16", "float32": "F32", "float64": "F64", "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3", "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2": "F8_E5M2",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "float8_e8m0fnu": "F8_E8M0", "float4_e2m1fn_x2": "F4",
    "complex64": "C64",
}


class TensorSpec:
    """One tensor handed to `serialize` / `serialize_file`: its dtype (NumPy-style name such
    as "float32"; the safetensors code is `spec.dtype`), its shape, and the address and length
    of its contiguous little-endian bytes. The caller keeps the memory alive while it is used.
    For "float4_e2m1fn_x2" (two values per byte) the last dimension given is doubled, so
    `spec.shape` is the element count the header records.

        >>> import numpy as np, tensorsmith
        >>> a = np.zeros((2, 3), np.float32)
        >>> spec = tensorsmith.TensorSpec(dtype=a.dtype.name, shape=a.shape,
        ...                               data_ptr=a.ctypes.data, data_len=a.nbytes)
        >>> spec.dtype, spec.shape
        ('F32', [2, 3])
    """

    __slots__ = ("_dtype", "_shape", "_ptr", "_len")

    def __init__(self, *, dtype: str, shape: Sequence[int], data_ptr: int,
                 data_len: int) -> None:
        try:
            code = _SPEC_DTYPES[dtype]
        except (KeyError, TypeError):
            raise TensorsmithError(
                f'Unknown dtype "{dtype}". Supported dtypes: {", ".join(_SPEC_DTYPES)}'
            ) from None
        shape = [int(d) for d in shape]
        if any(d < 0 for d in shape):
            raise OverflowError("can't convert negative int to unsigned")
        if code == "F4" and shape:
            shape[-1] *= 2
        self._dtype, self._shape = code, shape
        self._ptr, self._len = int(data_ptr), int(data_len)

    @property
    def dtype(self) -> str:
        """The safetensors code ("F32", "BF16", ...)."""
        return self._dtype

    @property
    def shape(self) -> list[int]:
        """The element-count shape the header records."""
        return list(self._shape)

    @property
    def data_ptr(self) -> int:
        return self._ptr

    @property
    def data_len(self) -> int:
        return self._len

    def __repr__(self):
        return (f"TensorSpec(dtype='{self._dtype}', shape={self._shape}, "
                f"data_ptr={self._ptr}, data_len={self._len})")

    def _buffer(self):
        if self._len == 0:
            return b""
        # A memoryview (full buffer protocol, strides included) of the caller's memory.
        return memoryview((ctypes.c_ubyte * self._len).from_address(self._ptr)).cast("B")


def _tensors(tensor_dict):
    out = []
    for name, spec in tensor_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, not {type(name).__name__}")
        if not isinstance(spec, TensorSpec):
            raise TypeError(f"'{type(spec).__name__}' object cannot be converted to 'TensorSpec'")
        out.append((name, spec.dtype, spec.shape, spec._buffer()))
    return out


def _wrap(call):
    try:
        return call()
    except TensorsmithError as e:
        raise type(e)(f"Error while serializing: {e}") from None


def serialize(tensor_dict: Mapping[str, TensorSpec], metadata: Metadata = None) -> bytes:
    """The safetensors bytes of `{name: TensorSpec}` (and optional `{str: str}` metadata),
    byte for byte as the reference writes them.

        >>> import numpy as np, tensorsmith
        >>> a = np.zeros(2, np.int32)
        >>> out = tensorsmith.serialize({"a": tensorsmith.TensorSpec(
        ...     dtype="int32", shape=[2], data_ptr=a.ctypes.data, data_len=a.nbytes)})
        >>> out[8:]
        b'{"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}  \\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'
    """
    tensors = _tensors(tensor_dict)
    return _wrap(lambda: _native.serialize(tensors, metadata))


def serialize_file(tensor_dict: Mapping[str, TensorSpec], filename: PathOrUrl,
                   metadata: Metadata = None) -> None:
    """Writes `{name: TensorSpec}` as a safetensors file (atomically: a temporary file renamed
    into place), without holding the GIL.

        >>> import numpy as np, tensorsmith
        >>> a = np.ones((2, 2), np.float32)
        >>> tensorsmith.serialize_file({"a": tensorsmith.TensorSpec(
        ...     dtype="float32", shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)},
        ...     "model.safetensors")  # doctest: +SKIP
    """
    tensors = _tensors(tensor_dict)
    path = os.fspath(filename)
    _wrap(lambda: _native.serialize_file(tensors, path, metadata))


def deserialize(data: bytes | bytearray | memoryview) -> list[tuple[str, dict[str, Any]]]:
    """The tensors of safetensors bytes, in file order, as the reference gives them:
    `[(name, {"shape": [...], "dtype": "F32", "data": bytearray}), ...]`.

        >>> import numpy as np, tensorsmith
        >>> [(n, d["dtype"], d["shape"]) for n, d in tensorsmith.deserialize(
        ...     tensorsmith.save({"a": np.zeros(3, np.float32)}))]
        [('a', 'F32', [3])]
    """
    try:
        located = _native.parse_bytes(data)
    except TensorsmithError as e:
        raise type(e)(f"Error while deserializing: {e}") from None
    view = memoryview(data).cast("B")
    return [(name, {"shape": list(shape), "dtype": dtype, "data": bytearray(view[b:e])})
            for name, dtype, shape, b, e in located]


__all__ = ["TensorSpec", "serialize", "serialize_file", "deserialize"]
