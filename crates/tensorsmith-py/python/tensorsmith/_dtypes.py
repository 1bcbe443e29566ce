"""The one map between safetensors dtype names and NumPy dtypes (ml_dtypes for bfloat16 and
the 8-bit floats, when it is installed)."""

import numpy as np

from .errors import Unsupported

_BASIC = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "U64": np.uint64, "I32": np.int32, "U32": np.uint32,
    "I16": np.int16, "U16": np.uint16, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_, "C64": np.complex64, "C128": np.complex128,
}
# Names in ml_dtypes.
_ML = {
    "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
}
_PACKED = {"F4", "F6_E2M3", "F6_E3M2", "I4", "I2", "U4", "U2"}

try:
    import ml_dtypes as _ml
except ImportError:  # optional
    _ml = None

_TO_NP = {k: np.dtype(v) for k, v in _BASIC.items()}
if _ml is not None:
    _TO_NP.update({k: np.dtype(getattr(_ml, v)) for k, v in _ML.items() if hasattr(_ml, v)})
_FROM_NP = {v: k for k, v in _TO_NP.items()}


def to_numpy(name: str) -> np.dtype:
    """NumPy dtype of a safetensors dtype name; Unsupported when NumPy has none here."""
    try:
        return _TO_NP[name]
    except KeyError:
        if name in _ML:
            raise Unsupported(f"dtype {name} needs the ml_dtypes package (pip install ml_dtypes)") from None
        if name in _PACKED:
            raise Unsupported(f"dtype {name} packs several values per byte: NumPy has no view of it") from None
        raise Unsupported(f"dtype {name} has no NumPy equivalent") from None


def from_numpy(dt: np.dtype) -> str:
    """safetensors dtype name of a NumPy dtype (byte order aside)."""
    try:
        return _FROM_NP[np.dtype(dt).newbyteorder("=")]
    except KeyError:
        raise Unsupported(f"NumPy dtype {dt} has no safetensors equivalent") from None
