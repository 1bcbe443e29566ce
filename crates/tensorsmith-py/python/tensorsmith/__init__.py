"""tensorsmith: fast, strict reading and writing of tensor files (safetensors, zTensor v0.1,
v1.1 and v2, GGUF) and tensor datasets, backed by a Rust core.

`safe_open`, `load_file`, `save_file`, `load` and `save` follow the reference `safetensors`
package (NumPy by default; `tensorsmith.numpy` and `tensorsmith.torch` mirror
`safetensors.numpy` and `safetensors.torch`). Tensors read from a file come back as read-only
NumPy views of its memory map where the dtype allows, without a copy.
"""

import json
import os

import numpy as np

from . import _native
from ._dtypes import from_numpy, to_numpy
from ._options import option_texts
from .errors import (  # noqa: F401
    BadSlice, DatasetExists, DatasetFailure, FileNotFound, InvalidFile, InvalidInput,
    IOFailure, OptionError, TensorNotFound, TensorsmithError, Unsupported,
)

__version__ = _native.__version__

_FRAMEWORKS = {"np": "np", "numpy": "np", "pt": "pt", "torch": "pt"}


def _array(buf, dtype: str, shape, layout: str = "dense") -> np.ndarray:
    """A read-only NumPy view of `buf` (no copy)."""
    if layout.startswith("ggml:"):
        # Block-quantized GGUF data: the stored blocks, as bytes.
        return np.frombuffer(buf, dtype=np.uint8)
    dt = to_numpy(dtype)
    if len(buf) == 0:
        return np.empty(shape, dtype=dt)
    return np.frombuffer(buf, dtype=dt).reshape(shape)


def _framework(name):
    try:
        return _FRAMEWORKS[name]
    except KeyError:
        raise OptionError(f"framework must be 'np' or 'pt', not {name!r}") from None


def _out(arr: np.ndarray, framework: str, dtype: str):
    if framework == "np":
        return arr
    from ._torch import to_torch

    return to_torch(arr, dtype)


class safe_open:
    """Opens a model file (safetensors, zTensor, GGUF), a folder or index of safetensors
    shards, or an http(s) URL, for reading tensors one at a time.

        with tensorsmith.safe_open("model.safetensors", framework="np") as f:
            for k in f.keys():
                t = f.get_tensor(k)
    """

    def __init__(self, filename, framework="np", device="cpu", backend="mmap"):
        self._framework = _framework(framework)
        if device != "cpu":
            raise OptionError(f"device must be 'cpu', not {device!r}")
        self._f = _native.File(os.fspath(filename), backend)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def format(self):
        """`(name, version)`: ("safetensors", None), ("ztensor", "2"), ("gguf", "3")."""
        return self._f.format()

    def keys(self):
        """Tensor names, sorted."""
        return sorted(self._f.names())

    def offset_keys(self):
        """Tensor names in the order of their data in the file."""
        return self._f.names()

    def metadata(self):
        """The file's metadata (strings for safetensors, typed values for zTensor and GGUF),
        or None."""
        return self._f.metadata()

    def get_shape(self, name):
        return list(self._f.info_of(name)[1])

    def get_dtype(self, name):
        return self._f.info_of(name)[0]

    def get_tensor(self, name, dequantize=False):
        """The tensor's values. A GGUF block-quantized tensor (layout `ggml:q4_k` …) comes
        back as its stored blocks (a flat uint8 array) unless `dequantize=True`, which gives
        its values as float32 in the tensor's shape, bit-identical to
        `gguf.quants.dequantize` (types it cannot dequantize, such as q8_k, raise). For every
        other tensor `dequantize` changes nothing."""
        dtype, shape, layout = self._f.info_of(name)
        if dequantize and layout.startswith("ggml:"):
            arr = np.empty(shape, dtype=np.float32)
            self._f.dequantize_into(name, arr)
            return _out(arr, self._framework, "F32")
        arr = _array(self._f.tensor_bytes(name), dtype, shape, layout)
        return _out(arr, self._framework, dtype)

    def get_tensors(self, dequantize=False):
        return {k: self.get_tensor(k, dequantize=dequantize) for k in self.keys()}

    def get_slice(self, name):
        return _Slice(self, name)


class _Slice:
    """A tensor to index (`f.get_slice(name)[0:2, :]`); only the bytes the index selects are
    copied out of the map."""

    def __init__(self, f: safe_open, name: str):
        self._f, self._name = f, name
        self._dtype, shape, self._layout = f._f.info_of(name)
        self._shape = list(shape)

    def get_shape(self):
        return list(self._shape)

    def get_dtype(self):
        return self._dtype

    def __getitem__(self, index):
        full = _array(self._f._f.tensor_bytes(self._name), self._dtype, self._shape, self._layout)
        try:
            part = np.ascontiguousarray(full[index])
        except IndexError as e:
            raise BadSlice(f"tensor '{self._name}' of shape {self._shape}: {e}") from None
        if part is full or np.shares_memory(part, full):
            part = part.copy()
        return _out(part, self._f._framework, self._dtype)


def load_file(filename, framework="np", backend="mmap"):
    """Every tensor of a file as a dict (name -> array)."""
    with safe_open(filename, framework=framework, backend=backend) as f:
        return f.get_tensors()


def _flatten(tensors: dict):
    out = []
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise InvalidInput(f"tensor names must be strings, not {type(name).__name__}")
        arr = np.asarray(value)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        shape = list(arr.shape)  # before ascontiguousarray, which makes 0-d arrays 1-d
        flat = np.ascontiguousarray(arr).reshape(-1)
        out.append((name, from_numpy(arr.dtype), shape, flat.view(np.uint8)))
    return out


def save(tensors: dict, metadata=None) -> bytes:
    """A dict of NumPy arrays as safetensors bytes (as the reference writes them)."""
    return _native.serialize(_flatten(tensors), metadata)


def save_file(tensors: dict, filename, metadata=None) -> None:
    """Writes a dict of NumPy arrays as a safetensors file, atomically."""
    _native.serialize_file(_flatten(tensors), os.fspath(filename), metadata)


def load(data: bytes, framework="np"):
    """Tensors of safetensors bytes; the arrays are views of `data`."""
    fw = _framework(framework)
    view = memoryview(data)
    out = {}
    for name, dtype, shape, begin, end in _native.parse_bytes(data):
        out[name] = _out(_array(view[begin:end], dtype, shape), fw, dtype)
    return out


def inspect(target, backend="mmap") -> dict:
    """What `tensorsmith inspect --json` prints (schema "tensorsmith.inspect/1"), as a dict."""
    return json.loads(_native.inspect_json(os.fspath(target), backend))


def hash(target, content=False, compat=None, backend="mmap") -> dict:  # noqa: A001
    """The format-neutral structural ID (`ts1-...`), with `content=True` also the content
    digest (`tc1-...`); with `compat="weight-inspect"` weight-inspect's hash and short ID."""
    a, b = _native.hash(os.fspath(target), content, compat, backend)
    if compat is not None:
        return {"structural_hash": a, "id": b}
    out = {"structural_id": a}
    if b is not None:
        out["content_digest"] = b
    return out


def diff(a, b, values=False, all=False) -> dict:  # noqa: A002
    """What differs between two models (schema "tensorsmith.diff/1"); `values=True` compares
    the values of tensors present in both."""
    return json.loads(_native.diff_json(os.fspath(a), os.fspath(b), values, all))


def convert(src, dst, *, dtype=None, rounding="nearest", zt_version=None, compress=None,
            digest=None, densify=False, drop_metadata=False, shard_size=None) -> list:
    """Converts any model to safetensors (or shards, with `shard_size` in bytes or "5GB"), or
    to zTensor (`dst` ending in .zt, or `zt_version` "0.1", "1.1", "2"). `compress` is a zstd
    level. Returns the paths written."""
    if isinstance(shard_size, str):
        shard_size = _native.parse_size(shard_size)
    if compress is True:
        compress = 3
    files = _native.convert(os.fspath(src), os.fspath(dst), dtype, rounding,
                            None if zt_version is None else str(zt_version),
                            compress or None, digest, densify, drop_metadata, shard_size)
    return [os.fspath(p) for p in files]


def write_dataset(data, path, *, mode="error", threads=0, **options) -> dict:
    """Writes Arrow data (a pyarrow Table, RecordBatch, RecordBatchReader, a list of batches,
    or anything with `__arrow_c_stream__`) as a dataset in the safetensors-spark layout.
    Options take the connector's names: batch_size or name_col, dtype, columns, shapes,
    tail_strategy, duplicatesStrategy, target_shard_size_mb, generate_index, kv_separator,
    f16_rounding. `mode` is "error", "overwrite" or "append". Returns the manifest."""
    data = _arrow_stream(data)
    text = _native.write_dataset(data, os.fspath(path), option_texts(options), mode, threads)
    return json.loads(text)


def _arrow_stream(data):
    if hasattr(data, "__arrow_c_stream__"):
        return data
    import pyarrow as pa

    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, (list, tuple)):
        if not data:
            raise InvalidInput("no record batches given")
        return pa.Table.from_batches(list(data))
    raise InvalidInput(f"expected Arrow data, not {type(data).__name__}")


class Dataset:
    """A dataset in the safetensors-spark layout, map-style: `len(ds)` and `ds[i]` (PyTorch's
    DataLoader can use it as it is). Batch mode: `ds[i]` is sample i, a dict column -> array.
    KV mode: `ds[i]` is {"key": key, "tensor": array} for the i-th key in sorted order, and
    `ds["key"]` the tensor of that key."""

    def __init__(self, path, framework="np"):
        self._framework = _framework(framework)
        self._r = _native.DatasetReader(os.fspath(path))
        self._len = len(self._r)
        self._keys = self._r.keys() if self._r.mode == "kv" else []

    @property
    def mode(self):
        return self._r.mode

    def manifest(self) -> dict:
        return json.loads(self._r.manifest_json())

    def keys(self):
        return list(self._keys)

    def __len__(self):
        return self._len

    def _one(self, item):
        name, dtype, shape, buf = item
        return name, _out(_array(buf, dtype, shape), self._framework, dtype)

    def __getitem__(self, i):
        if isinstance(i, str):
            if self.mode != "kv":
                raise TypeError("tensors by key are for KV-mode datasets")
            return self._one(self._r.tensor(i))[1]
        i = int(i)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"index {i} out of range for a dataset of {self._len}")
        if self.mode == "kv":
            key = self._keys[i]
            return {"key": key, "tensor": self._one(self._r.tensor(key))[1]}
        return dict(self._one(t) for t in self._r.sample(i))


__all__ = [
    "safe_open", "load_file", "save_file", "load", "save", "inspect", "hash", "diff", "convert",
    "write_dataset", "Dataset", "TensorsmithError",
]
