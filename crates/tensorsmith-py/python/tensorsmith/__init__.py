"""tensorsmith: fast, strict reading and writing of tensor files (safetensors, zTensor v0.1,
v1.1 and v2, GGUF) and tensor datasets, backed by a Rust core.

A drop-in for the reference `safetensors` package: swap the import and keep the code.

Reading
    safe_open(path | URL | folder | file object, framework="np")   lazy, one tensor at a time
        .keys() .offset_keys() .metadata() .get_tensor(name) .get_tensors()
        .get_slice(name)[index]   (the reference's indexing rules and error texts)
    load_file(path)  every tensor as a dict;  load(bytes)  the same from bytes
    Tensors come back as writable NumPy arrays, views of a private copy-on-write map of the
    file where the dtype allows (no up-front copy; a write never reaches the file), or with
    `readonly=True` as read-only views of tensorsmith's shared map; framework="pt" gives
    PyTorch tensors, "tf", "flax" ("jax"), "mlx" and "paddle" that framework's.

Writing (byte-identical to the reference, atomic for files)
    save_file(tensors, path, metadata=None, digest=False);  save(tensors) -> bytes
    serialize / serialize_file / deserialize / TensorSpec   the framework-free API
    digest=True records per-tensor digests under __metadata__["tensorsmith.digest"];
    `tensorsmith verify FILE` names any tensor whose bytes changed.

Tools
    inspect(path)  hash(path, content=True)  diff(a, b, values=True)  convert(src, dst, ...)
    report(path, "model.html")   the HTML page of `tensorsmith report`
    stats(path)  value statistics per tensor (NaN/Inf/zeros, range, F16/BF16/FP8 fit)

Datasets (the safetensors-spark layout)
    write_dataset(arrow_data, path, batch_size=..., dtype=...);  Dataset(path)[i]
    tensorsmith.spark.register(spark)  adds the Spark data source "safetensors"

Errors derive from TensorsmithError (alias SafetensorError) and from the matching built-in
(FileNotFoundError, KeyError, ValueError, IndexError).

    >>> import numpy as np, tensorsmith
    >>> tensorsmith.save_file({"w": np.ones((2, 2), np.float32)}, "w.safetensors")
    >>> tensorsmith.load_file("w.safetensors")["w"].sum()
    np.float32(4.0)
"""

from __future__ import annotations

import bisect
import itertools
import json
import os

import numpy as np

from . import _native, _numpy
from ._loading import rank_plan as _rank_plan
from ._loading import slicing as _slicing
from ._checks import (  # noqa: F401
    dataset_clean, dataset_export, dataset_info, dataset_verify, validate, verify,
)
from ._lowlevel import TensorSpec, deserialize, serialize, serialize_file
from ._dtypes import from_numpy, to_numpy
from ._options import option_texts, storage_pairs as _storage
from ._options import Metadata, Names, PathOrUrl, Source, StorageOptions, Tensors
from typing import Any, Iterator, Mapping, Sequence
from .errors import (  # noqa: F401
    BadSlice, DatasetExists, DatasetFailure, FileNotFound, InvalidFile, InvalidInput,
    IOFailure, OptionError, TensorNotFound, TensorsmithError, Unsupported,
)

SafetensorError = TensorsmithError  # the reference package's name of the base error class

__version__ = _native.__version__

# The reference's framework names; "tf", "flax", "mlx" and "paddle" tensors are converted
# from NumPy arrays (that framework is imported only when a tensor is made).
_FRAMEWORKS = {"np": "np", "numpy": "np", "pt": "pt", "torch": "pt", "pytorch": "pt",
               "tf": "tf", "tensorflow": "tf", "jax": "flax", "flax": "flax", "mlx": "mlx",
               "paddle": "paddle"}


def _array(buf, dtype: str, shape, layout: str = "dense") -> np.ndarray:
    """A read-only NumPy view of `buf` (no copy)."""
    if layout.startswith("ggml:"):
        # Block-quantized GGUF data: the stored blocks, as rows of bytes.
        return np.frombuffer(buf, dtype=np.uint8).reshape(shape)
    dt = to_numpy(dtype)
    if len(buf) == 0:
        return np.empty(shape, dtype=dt)
    return np.frombuffer(buf, dtype=dt).reshape(shape)


def _framework(name):
    try:
        return _FRAMEWORKS[name]
    except (KeyError, TypeError):
        raise OptionError(f"framework {name} is invalid") from None


def _out(arr: np.ndarray, framework: str, dtype: str):
    if framework == "np":
        return arr
    if framework != "pt":
        return _numpy.to_framework(arr, framework)
    from ._torch import to_torch

    return to_torch(arr, dtype)


def _open_native(target, backend, storage_options=None):
    """A `_native.File` of a path, URL (http(s)://, s3://, hf://), folder or shard index, or of
    a file object (its descriptor mapped when it has one, else read through `seek`/`read`)."""
    if hasattr(target, "read") and hasattr(target, "seek"):
        name = str(getattr(target, "name", "<file object>"))
        try:
            fd = target.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if isinstance(fd, int) and fd >= 0:
            return _native.File.from_fd(fd, name, backend)
        return _native.File.from_reader(target, name)
    path = os.fspath(target)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if "://" not in path and not os.path.exists(path):
        raise FileNotFound(f"No such file or directory: {path}")
    return _native.File(path, backend, _storage(storage_options))


class safe_open:
    """Opens a model for reading tensors one at a time: a file (safetensors, zTensor, GGUF),
    a folder or index of safetensors shards, an http(s), s3:// (s3a://) or hf:// URL, or an
    open binary file object (anything with `read`, `seek` and `tell`: `open(...)`,
    `io.BytesIO`, fsspec and S3 files; one with a real descriptor is mapped through it).
    `storage_options` (a dict: key, secret, token, endpoint_url, region, profile, anon, and
    the aws_* spellings) sets credentials and endpoints for s3:// and hf:// URLs; unset ones
    come from the environment (AWS_*, ~/.aws, HF_TOKEN, HF_ENDPOINT). For every URL it also
    sets the transfers: max_concurrency (ranged GETs at once, 10), part_size ("8MiB"),
    max_attempts (5), timeout (seconds per GET, retries included, 60), connect_timeout (10).

    NumPy arrays are writable, as the reference's: views of a private copy-on-write map of a
    local file (a write copies the page it touches and never reaches the file), else owned.
    `readonly=True` (framework="np" only) gives read-only views of tensorsmith's shared map
    instead: no copy and no private pages, for readers that never write.
    A tensor whose file records its digest (`tensorsmith.digest`, zTensor checksums) is
    checked against it by `get_tensor` (a mismatch raises, naming the tensor);
    `check_digests=False` skips that. Slices are never checked (they read part of a tensor).
    `framework` takes the reference's names: "np" ("numpy"), "pt" ("torch", "pytorch"), and
    "tf" ("tensorflow"), "flax" ("jax"), "mlx", "paddle", whose tensors are converted from
    NumPy arrays; such a framework is imported when a tensor is made (when the file is
    opened for "paddle", as the reference does), so `keys()`, `metadata()` and slice shapes
    work without it.

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"w": np.eye(2, dtype=np.float32)}, "m.safetensors")
        >>> with tensorsmith.safe_open("m.safetensors", framework="np") as f:
        ...     f.keys(), f.get_tensor("w").shape, f.get_slice("w")[:1].shape
        (['w'], (2, 2), (1, 2))
    """

    def __init__(self, filename: Source, framework: str = "np", device: Any = "cpu",
                 backend: str = "mmap", storage_options: StorageOptions = None, *,
                 readonly: bool = False, check_digests: bool = True) -> None:
        self._framework = _framework(framework)
        self._check_digests = check_digests
        self._torch = self._device = self._np = None
        if self._framework != "pt" and device not in ("cpu", None):
            raise OptionError(f"device applies to framework='pt'; {framework} tensors are "
                              f"made on the CPU, not {device!r}")
        if readonly and self._framework != "np":
            raise OptionError("readonly=True applies to framework='np'")
        # A missing file is told first, as the reference tells it.
        self._native = _open_native(filename, backend, storage_options)
        if not readonly:
            self._np = _numpy.Reader(self._native, backend)
        if self._framework == "paddle":
            import paddle  # noqa: F401 - the reference imports it on opening
        if self._framework == "pt":
            from . import _torch

            self._device = _torch.parse_device(device)
            self._torch = _torch.Reader(self._native, backend)

    @property
    def _f(self):
        if self._native is None:
            raise TensorsmithError("File is closed")
        return self._native

    def __enter__(self) -> safe_open:
        return self

    def __exit__(self, *exc: object) -> None:
        self._native = self._torch = self._np = None
        return False

    def _pt(self, names, dequantize=False):
        """PyTorch tensors of `names` on this file's device: CPU views of the map (or owned
        reads), through the pinned pipeline onto CUDA, else moved by torch."""
        self._f  # noqa: B018 - raises once closed
        reader, dev = self._torch, self._device
        if dev.type == "cuda":
            from ._loading import cuda as _torch_cuda

            return _torch_cuda.load(self._native, names, dev,
                                    lambda n: reader.tensor(n, dequantize))
        out = reader.tensors(names, dequantize)
        if dev.type != "cpu":
            out = {n: t.to(dev) for n, t in out.items()}
        return out

    @property
    def format(self) -> str:
        """`(name, version)`: ("safetensors", None), ("ztensor", "2"), ("gguf", "3")."""
        return self._f.format()

    def keys(self) -> list[str]:
        """Tensor names, sorted: `f.keys()` -> `["a", "b"]`."""
        return sorted(self._f.names())

    def offset_keys(self) -> list[str]:
        """Tensor names in the order of their data in the file: `f.offset_keys()`."""
        return self._f.names()

    def metadata(self) -> dict[str, str] | None:
        """The file's metadata (strings for safetensors, typed values for zTensor and GGUF:
        ints, floats, including NaN and ±inf as floats, bools, lists, dicts), or None:
        `f.metadata()` -> `{"format": "pt"}`."""
        return self._f.metadata()

    def get_shape(self, name: str) -> list[int]:
        """A tensor's shape, without reading it: `f.get_shape("w")` -> `[2, 2]`."""
        return list(self._f.info_of(name)[1])

    def get_dtype(self, name: str) -> str:
        """A tensor's safetensors dtype name: `f.get_dtype("w")` -> `"F32"`."""
        return self._f.info_of(name)[0]

    def get_tensor(self, name: str, dequantize: bool = False) -> Any:
        """One tensor (a copy-on-write view of the map where possible, or with `readonly=True`
        a read-only view of the shared map): `f.get_tensor("w")`.
        A GGUF block-quantized tensor (layout `ggml:q4_k` …) comes back as its stored blocks
        (a flat uint8 array) unless `dequantize=True`, which gives its values as float32 in the
        tensor's shape, bit-identical to `gguf.quants.dequantize` (types it cannot dequantize,
        such as q8_k, raise). For every other tensor `dequantize` changes nothing."""
        if self._check_digests:
            self._f.check_digests(name)
        return self._get(name, dequantize)

    def _get(self, name, dequantize):
        """`get_tensor` after its digest check."""
        if self._framework == "pt":
            return self._pt([name], dequantize)[name]
        dtype, shape, layout = self._f.info_of(name)
        if dequantize and layout.startswith("ggml:"):
            arr = np.empty(self._f.value_shape(name), dtype=np.float32)
            self._f.dequantize_into(name, arr)
            return _out(arr, self._framework, "F32")

        def shared():
            return _array(self._f.tensor_bytes(name), dtype, shape, layout)

        arr = shared() if self._np is None else self._np.array(name, shared)
        return _out(arr, self._framework, dtype)

    def get_tensors(self, dequantize: bool = False) -> dict[str, Any]:
        """Every tensor as a dict, name -> array, in file order: `f.get_tensors()` (`dequantize` as in
        `get_tensor`)."""
        # In the order of the data in the file, as the reference gives them.
        names = self.offset_keys()
        if self._check_digests:
            for k in names:
                self._f.check_digests(k)
        if self._framework == "pt":
            return self._pt(names, dequantize)
        read = self._np.read_many(names) if self._np is not None else {}
        return {k: _out(read[k], self._framework, self._f.info_of(k)[0]) if k in read
                else self._get(k, dequantize) for k in names}

    def prefetch(self, plan: dict[str, slice | None] | None = None, *, device: Any = None,
                 threads: int = 8) -> Any:
        """Starts loading the planned tensors in the background and returns a
        `PrefetchLoader` (safetensors 0.9's API, framework="pt" only): `take(name)` or
        iterate `(name, tensor)` pairs, each tensor once; `close()`, or use it in a `with`.
        `plan`: tensor name -> None (the whole tensor) or a step-1 slice of its first
        dimension (a rank's rows; Python's slice rules); None: every tensor whole. Only the
        planned byte spans are read (see `tensorsmith.torch.load_sharded`). `device`: any
        torch device (0.9: CUDA only), by default this handle's; `threads`: the pinned
        ring's workers onto CUDA. Tensors are handed out once the whole plan has landed."""
        if self._framework != "pt":
            raise OptionError("prefetch makes PyTorch tensors: open with framework='pt'")
        from ._loading import prefetch as _prefetch
        from ._torch import parse_device

        dev = self._device if device is None else parse_device(device)
        return _prefetch.prefetch(self._f, plan, dev, threads)

    def get_slice(self, name: str, dequantize: bool = False) -> _Slice:
        """A tensor to index; only the selected bytes are copied: `f.get_slice("w")[:, :2]`.
        With framework="pt" any index torch takes, with torch's rules (as the reference):
        slices are clamped to the shape (`[16001:32002]` of 32,001 rows gives the last 16,000),
        index lists, `None` and masks work. Otherwise the reference's rules for NumPy: ints,
        slices with a positive step, `...`, tuples of those, `[]`; out-of-range indexes are
        errors, never clamped. An index of ints, slices and `...` reads only the part it
        keeps (its rows, or its runs of a later dimension; see `tensorsmith.torch.load_sharded`
        for the rule): with the pread backend, a URL or a file object, by the part's byte
        spans; from a mapped file, as views of the map (the kernel reads only the pages
        touched). A GGUF block tensor is sliced as
        its stored blocks (U8, shape `[rows, bytes per row]`, as `get_shape` says), or with
        `dequantize=True` as its float32 values (rows of the tensor's own shape)."""
        return _Slice(self, name, dequantize)


class _Slice:
    """A tensor to index (`f.get_slice(name)[0:2, :]`); only the bytes the index selects are
    read (by span) or copied out of the map."""

    def __init__(self, f: safe_open, name: str, dequantize: bool = False):
        # The native file, not `f`: a slice stays usable after `f` is closed.
        self._file, self._framework, self._name = f._f, f._framework, name
        self._torch, self._device = f._torch, f._device
        self._dtype, shape, self._layout = self._file.info_of(name)
        self._shape = list(shape)
        self._dequantize = dequantize and self._layout.startswith("ggml:")
        if self._dequantize:
            self._dtype, self._shape = "F32", list(self._file.value_shape(name))

    def get_shape(self) -> list[int]:
        """The tensor's shape: `f.get_slice("w").get_shape()` -> `[2, 2]`."""
        return list(self._shape)

    def get_dtype(self) -> str:
        """The tensor's dtype name: `f.get_slice("w").get_dtype()` -> `"F32"`."""
        return self._dtype

    def _dequantized(self):
        """The values made whole (dequantized), to select from."""
        full = np.empty(self._shape, dtype=np.float32)
        self._file.dequantize_into(self._name, full)
        return full

    def _plain(self):
        """Whether the tensor's part can be read by span (stored as one raw run, a dtype of
        whole bytes, not a GGUF block tensor): then only the bytes an index keeps are read."""
        return (not self._dequantize and not self._layout.startswith("ggml:")
                and self._dtype not in _rank_plan.PACKED
                and self._file.raw_range(self._name) is not None)

    def _read_part(self, part, empty):
        """The part's bytes read into `empty(shape)` (a new array or tensor), then `post`."""
        out, addr, nbytes = empty(part.shape)
        if nbytes:
            self._file.read_part_into(self._name, part.cut, addr, nbytes)
        return out if part.post is None else out[part.post]

    def _mapped(self):
        """Whether PyTorch tensors of this tensor are views of a local file's map (then a
        slice is a view too, or a copy of the elements it keeps: the kernel reads only the
        pages they lie on)."""
        rng = self._file.raw_range(self._name)
        return (self._torch.mapped and rng is not None
                and self._file.local_file(rng[0]) is not None)

    def _pt(self, index):
        """torch's indexing, as the reference: of the part the index keeps (read alone) when
        the index is ints, slices and `...` and the file is not mapped (pread, URLs, file
        objects); else of the whole tensor (a view of the map)."""
        import torch

        from . import _torch

        torch_index = (_rank_plan.torch_index(index, self._shape)
                       if self._plain() and not self._mapped() else None)
        if torch_index is not None:
            dtype = _torch.torch_dtype(self._dtype)

            def empty(shape):
                t = torch.empty(shape, dtype=dtype)
                return t, t.data_ptr(), t.numel() * t.element_size()

            part = self._read_part(torch_index, empty)
            if not part.is_contiguous():
                part = part.contiguous()
            return part if self._device.type == "cpu" else part.to(self._device)
        if self._dequantize:
            full = torch.from_numpy(self._dequantized())
        else:
            full = self._torch.tensor(self._name)
        part = full[index]
        if self._dequantize:
            part = part.clone(memory_format=torch.contiguous_format)  # not the whole tensor's
        elif not part.is_contiguous():
            part = part.contiguous()
        return part if self._device.type == "cpu" else part.to(self._device)

    def __getitem__(self, index: Any) -> Any:
        if self._framework == "pt":
            return self._pt(index)
        np_index = _slicing.to_numpy_index(_slicing.parse(index, self._shape), self._shape)
        if self._dequantize:
            return _out(np.array(self._dequantized()[np_index], copy=True), self._framework,
                        "F32")
        if self._plain():
            dt = _numpy.dtype_of(self._dtype, self._layout)

            def empty(shape):
                a = np.empty(shape, dtype=dt)
                return a, a.ctypes.data, a.nbytes

            part = _rank_plan.from_indexers(np_index, self._shape)
            arr = self._read_part(part, empty)
            if part.post is not None:
                arr = np.array(arr, copy=True)  # owned, C order, 0-d kept
            return _out(arr, self._framework, self._dtype)
        full = _array(self._file.tensor_bytes(self._name), self._dtype, self._shape, self._layout)
        part = np.array(full[np_index], copy=True)  # owned, C order, 0-d kept
        return _out(part, self._framework, self._dtype)


class _safe_open_handle(safe_open):
    """`safe_open` of an open file object, under the reference package's private name:
    `_safe_open_handle(f, framework="np")`."""

    def __init__(self, f, framework="np", device="cpu", *, backend="mmap", readonly=False):
        if not (hasattr(f, "read") and hasattr(f, "seek")):
            raise TypeError(f"expected a file object, not {type(f).__name__}")
        super().__init__(f, framework, device, backend, readonly=readonly)


def load_file(filename: Source, framework: str = "np", backend: str = "mmap",
              device: Any = "cpu", storage_options: StorageOptions = None, *,
              readonly: bool = False, check_digests: bool = True) -> dict[str, Any]:
    """Every tensor of a file as a dict (name -> array; with framework="pt", tensors on
    `device`: CPU tensors are views of a private mapping of the file, CUDA ones are read
    through a pinned pipeline straight into their device memory). NumPy arrays are writable
    views of a private copy-on-write map (`sd["w"] *= 2` works and never reaches the file);
    `readonly=True` gives read-only views of the shared map instead (see `safe_open`).

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"a": np.arange(3)}, "a.safetensors")
        >>> tensorsmith.load_file("a.safetensors")["a"].tolist()
        [0, 1, 2]
    """
    with safe_open(filename, framework=framework, backend=backend, device=device,
                   storage_options=storage_options, readonly=readonly,
                   check_digests=check_digests) as f:
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


def _digest(digest):
    return "xxh3" if digest is True else (digest or None)


def save(tensors: Tensors, metadata: Metadata = None, *, digest: bool | str = False) -> bytes:
    """A dict of NumPy arrays as safetensors bytes (as the reference writes them). With
    `digest=True` (XXH3-64; or "sha256", "crc32c") each tensor's digest is recorded in the
    metadata under "tensorsmith.digest", for `tensorsmith verify`.

        >>> import numpy as np, tensorsmith
        >>> data = tensorsmith.save({"a": np.zeros(2, np.float32)})
        >>> tensorsmith.load(data)["a"].tolist()
        [0.0, 0.0]
    """
    return _native.serialize(_flatten(tensors), metadata, _digest(digest))


def save_file(tensors: Tensors, filename: PathOrUrl, metadata: Metadata = None, *,
              digest: bool | str = False, storage_options: StorageOptions = None) -> None:
    """Writes a dict of NumPy arrays as a safetensors file, atomically (a temporary file
    renamed into place). `filename` may be an s3:// (s3a://), az:// (abfs(s)://) or gs://
    URL: the file streams up in parts and becomes the object only once complete (a failed
    write leaves no object), with credentials, endpoint, part_size and max_concurrency from
    `storage_options` (a dict, as `safe_open` takes) or the environment. `digest=True` records each tensor's content digest under the
    metadata key "tensorsmith.digest" (tensor bytes unchanged; the reference reads the file as
    any other); `tensorsmith verify FILE` then names any tensor whose bytes changed.

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"a": np.arange(3)}, "a.safetensors", digest=True)
        >>> sorted(tensorsmith.safe_open("a.safetensors").metadata())
        ['tensorsmith.digest']
    """
    _native.serialize_file(_flatten(tensors), os.fspath(filename), metadata, _digest(digest),
                           _storage(storage_options))


def load(data: bytes, framework: str = "np", *, readonly: bool = False) -> dict[str, Any]:
    """Tensors of safetensors bytes, as owned, writable arrays (one copy, as the reference):
    nothing loaded changes when `data` is reused. With `readonly=True` (framework="np") the
    arrays are read-only views of `data` when it is immutable (`bytes`), no copy; a mutable
    buffer (`bytearray`, a writable memoryview) is then copied once, never aliased.

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.load(tensorsmith.save({"a": np.arange(2)}))["a"].tolist()
        [0, 1]
    """
    fw = _framework(framework)
    if readonly and fw != "np":
        raise OptionError("readonly=True applies to framework='np'")
    view = memoryview(data)
    if readonly and not isinstance(view.obj, bytes):
        data = bytes(view)  # the views must not see later writes to the caller's buffer
        view = memoryview(data)
    out = {}
    if fw == "pt":
        from ._torch import from_bytes

        return {name: from_bytes(view[begin:end], dtype, shape)
                for name, dtype, shape, begin, end in _native.parse_bytes(data)}
    for name, dtype, shape, begin, end in _native.parse_bytes(data):
        arr = _array(view[begin:end], dtype, shape)
        out[name] = _out(arr if readonly else np.array(arr, copy=True), fw, dtype)
    return out


def inspect(target: Source, backend: str = "mmap",
            storage_options: StorageOptions = None) -> dict[str, Any]:
    """What `tensorsmith inspect --json` prints (schema "tensorsmith.inspect/1"), as a dict.

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"a": np.arange(3)}, "a.safetensors")
        >>> tensorsmith.inspect("a.safetensors")["format"]["name"]  # doctest: +SKIP
        'safetensors'
    """
    return json.loads(_native.inspect_json(os.fspath(target), backend,
                                           _storage(storage_options)))


def hash(target: Source, content: bool = False, compat: str | None = None,  # noqa: A001
         backend: str = "mmap", storage_options: StorageOptions = None) -> dict[str, Any]:
    """The format-neutral structural ID (`ts1-...`), with `content=True` also the content
    digest (`tc1-...`); with `compat="weight-inspect"` weight-inspect's hash and short ID.

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"a": np.arange(3)}, "a.safetensors")
        >>> h = tensorsmith.hash("a.safetensors", content=True)
        >>> h["structural_id"][:4], h["content_digest"][:4]
        ('ts1-', 'tc1-')
    """
    a, b = _native.hash(os.fspath(target), content, compat, backend,
                        _storage(storage_options))
    if compat is not None:
        return {"structural_hash": a, "id": b}
    out = {"structural_id": a}
    if b is not None:
        out["content_digest"] = b
    return out


def diff(a: Source, b: Source, values: bool = False, all: bool = False,  # noqa: A002
         rename: Sequence[str] = (), name_map: str = "auto", html: PathOrUrl | None = None,
         storage_options: StorageOptions = None) -> dict[str, Any]:
    """What differs between two models (schema "tensorsmith.diff/1"); `values=True` compares
    the values of tensors present in both, with RMSE, relative RMSE, cosine and SNR per pair.
    Tensors pair by name after `rename` ("FROM=TO" rules for A's names, `*` and `{N}`
    captures) and the llama name map (`name_map`: "auto", "llama" or "none"). With
    `values=True`, `html` writes the self-contained diff page to that path.
    `storage_options` serves both models (URLs of one store).

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"a": np.arange(3)}, "a.safetensors")
        >>> tensorsmith.save_file({"a": np.arange(3), "b": np.ones(1)}, "b.safetensors")
        >>> d = tensorsmith.diff("a.safetensors", "b.safetensors")  # added: b
    """
    page = None if html is None else os.fspath(html)
    return json.loads(_native.diff_json(os.fspath(a), os.fspath(b), values, all,
                                        list(rename), name_map, page,
                                        _storage(storage_options)))


def report(target: Source, output: PathOrUrl, title: str | None = None,
           stats: Mapping[str, Any] | None = None, backend: str = "mmap",
           storage_options: StorageOptions = None) -> int:
    """Writes `tensorsmith report`'s self-contained HTML page about a model to `output` and
    returns its length in bytes. `stats`, a dict from tensor name to that tensor's statistics
    (a dict of `tensorsmith.stats/1`'s keys, as `tensorsmith.stats` returns), adds statistics
    columns to the table; `stats=True` measures every tensor first (the CLI's `--stats`).

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"a.w": np.ones((2, 2), np.float32)}, "a.safetensors")
        >>> n = tensorsmith.report("a.safetensors", "a.html", title="a")
    """
    if stats is True:
        doc = json.loads(_native.stats_json(os.fspath(target), [], backend,
                                            _storage(storage_options)))
        stats = {t["name"]: t for t in doc["tensors"]}
    stats_json = None if stats is None or stats is False else json.dumps(dict(stats))
    return _native.report(os.fspath(target), os.fspath(output), title, stats_json, backend,
                          _storage(storage_options))
def stats(target: Source, tensors: Names = None, backend: str = "mmap",
          storage_options: StorageOptions = None) -> dict[str, Any]:
    """Value statistics of every tensor, read once with all cores: a dict from tensor name to
    a dict of the keys of `tensorsmith stats --json` (schema "tensorsmith.stats/1"): count,
    min, max, mean, std (population, over the finite values), nan, pos_inf, neg_inf, zeros,
    subnormals, exponents, overflow and flush (fractions per F16/BF16/FP8 type), histogram
    (integer tensors); None where a statistic has no value. `tensors`: a name pattern (`*`,
    `?`, `[a-z]`) or a list of them selecting the tensors measured.

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"w": np.array([1, -2, np.nan], np.float32)}, "w.safetensors")
        >>> s = tensorsmith.stats("w.safetensors")["w"]
        >>> s["min"], s["max"], s["nan"], s["mean"]
        (-2.0, 1.0, 1, -0.5)
    """
    if tensors is None:
        tensors = []
    elif isinstance(tensors, (str, os.PathLike)):
        tensors = [os.fspath(tensors)]
    doc = json.loads(_native.stats_json(os.fspath(target), list(tensors), backend,
                                        _storage(storage_options)))
    return {t["name"]: t for t in doc["tensors"]}


def convert(src: PathOrUrl, dst: PathOrUrl, *, dtype: str | None = None,
            rounding: str = "nearest", zt_version: str | float | None = None,
            compress: int | bool | None = None, digest: str | None = None,
            densify: bool = False, drop_metadata: bool = False,
            shard_size: int | str | None = None, append: bool = False,
            quantize: str | None = None, gguf_set: Sequence[str] | None = None,
            split_max_tensors: int | None = None, split_small_first: bool = False,
            onnx_template: PathOrUrl | None = None, external_data: bool = False,
            allow_extra: bool = False, storage_options: StorageOptions = None,
            mix: bool = False, imatrix: PathOrUrl | None = None,
            pre_tokenizer: str | None = None, keep_names: bool = False,
            outtype: str | None = None) -> list[str]:
    """Converts any model to safetensors (or shards, with `shard_size` in bytes or "5GB"), or
    to zTensor (`dst` ending in .zt, or `zt_version` "0.1", "1.1", "2"). `compress` is a zstd
    level; `digest` ("xxh3", "sha256", "crc32c") is recorded per part (zTensor) or per tensor
    (safetensors: `tensorsmith.digest`). `append=True` adds the tensors to the existing
    zTensor v2 file `dst` (names already in it are refused; a crash leaves the old file or the
    new one). `dst` ending in .gguf writes GGUF v3: `quantize` ("Q4_0", "Q8_0", "MXFP4", ...,
    "Q4_K", "IQ4_XS": the types `quantize` takes) makes float tensors of 2+ dims whose rows are
    whole blocks ggml blocks (bit-identical to gguf-py, and to ggml for the K and IQ4 types).
    A llama-quantize mix ("Q4_K_M", "Q3_K_L", "Q5_K_S", ...; any of its names with `mix=True`,
    e.g. "Q6_K") chooses each tensor's type as llama-quantize does, for a GGUF `src` with
    llama.cpp's tensor names: the output equals llama-quantize's byte for byte; `imatrix`, the
    path of llama-imatrix's file (GGUF or legacy .dat), quantizes with it as
    `llama-quantize --imatrix` does (and allows the "Q2_K_S" mix). A Hugging Face model
    folder `src` (local, "hf://ORG/REPO[@REV]" or a store URL ending in "/"; config.json, a
    BPE tokenizer.json or a SentencePiece tokenizer.model, safetensors; Llama, Mistral,
    Mixtral, Qwen2, Qwen3 and their MoE) to a .gguf `dst` is written as llama.cpp's
    convert_hf_to_gguf.py writes it (`outtype` "f32", "f16", "bf16", "q8_0", "tq1_0", "tq2_0"
    or "auto", its default: bf16 or f16 as the checkpoint is; `dtype` "F32", "F16", "BF16" the
    same for those three), and with `quantize` as llama-quantize then makes it, byte for byte; `pre_tokenizer` names llama.cpp's pre-tokenizer where tokenizer.json's is
    not recognised, and `keep_names=True` writes the checkpoint's tensors as they are. `gguf_set` is
    a list of "KEY=TYPE:VALUE" metadata assignments. GGUF output is
    split into parts as gguf-py's GGUFWriter splits it with `shard_size` (tensor bytes per part,
    its `split_max_size`), `split_max_tensors` and `split_small_first` (its
    `small_first_shard`). A part of a split GGUF as `src` converts the whole model. `dst`
    ending in .onnx writes the graph of the ONNX model `onnx_template` with `src`'s tensors
    (tensors over 1,024 bytes, or all with `external_data`, in `dst` + ".data";
    `allow_extra` leaves out tensors the template lacks). `src` may be a URL, and `dst` an
    s3://, az:// (abfs(s)://) or gs:// URL (one safetensors, GGUF or zTensor file: uploaded as it is written, a zTensor
    file spooled to a local temporary file first; visible only once complete), with
    `storage_options` for both. Returns the paths written.

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.save_file({"a": np.arange(3.0)}, "a.safetensors")
        >>> tensorsmith.convert("a.safetensors", "a.zt", zt_version="2", digest="xxh3")
        ['a.zt']
    """
    if isinstance(shard_size, str):
        shard_size = _native.parse_size(shard_size)
    if compress is True:
        compress = 3
    files = _native.convert(os.fspath(src), os.fspath(dst), dtype, rounding,
                            None if zt_version is None else str(zt_version),
                            compress or None, digest, densify, drop_metadata, shard_size,
                            append, quantize, list(gguf_set or []), split_max_tensors,
                            split_small_first,
                            None if onnx_template is None else os.fspath(onnx_template),
                            external_data, allow_extra, _storage(storage_options), mix,
                            None if imatrix is None else os.fspath(imatrix), pre_tokenizer,
                            keep_names, outtype)
    dst = os.fspath(dst)
    if "://" in dst:
        # One object, named as given (a path type would fold "s3://" into "s3:/").
        return [dst]
    return [os.fspath(p) for p in files]


def quantize(values: Any, qtype: str, imatrix: Any = None) -> np.ndarray:
    """Quantizes float values to a ggml block type: a uint8 array of shape
    `(*values.shape[:-1], bytes per row)`; the last dimension is the row and must be whole
    blocks. "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4" come out
    bit-identical to `gguf.quants.quantize`; the K-quants "Q2_K", "Q3_K", "Q4_K", "Q5_K",
    "Q6_K" and "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_S", "IQ2_S" (and, with `imatrix` only,
    "IQ2_XXS", "IQ2_XS") bit-identical to ggml's `ggml_quantize_chunk` (llama.cpp as
    llama-cpp-python 0.3.36 vendors it), which these and "Q4_0", "Q4_1", "Q5_0", "Q5_1" take
    an importance matrix for (bit-identical to ggml with it too): `imatrix`, one positive
    weight per position of a row (llama-imatrix's per-tensor values).

        >>> import numpy as np, tensorsmith
        >>> tensorsmith.quantize(np.ones((2, 32), np.float32), "Q8_0").shape
        (2, 34)
        >>> tensorsmith.quantize(np.ones((3, 512), np.float32), "Q4_K",
        ...                      imatrix=np.ones(512, np.float32)).shape
        (3, 288)
    """
    values = np.ascontiguousarray(values, dtype=np.float32)
    if values.ndim == 0:
        raise InvalidInput("cannot quantize a scalar")
    if imatrix is not None:
        imatrix = np.ascontiguousarray(imatrix, dtype=np.float32).reshape(-1)
    n_per_row = values.shape[-1]
    blocks = np.frombuffer(
        _native.quantize(values.reshape(-1), str(qtype), n_per_row, imatrix), dtype=np.uint8)
    rows = int(np.prod(values.shape[:-1]))
    return blocks.reshape((*values.shape[:-1], blocks.size // rows if rows else 0))


def write_dataset(data: Any, path: PathOrUrl, *, mode: str = "error", threads: int = 0,
                  retain: float | None = None, lock_timeout: float | None = None,
                  storage_options: StorageOptions = None, **options: Any) -> dict[str, Any]:
    """Writes Arrow data as a dataset in the safetensors-spark layout. Data in memory (a
    pyarrow Table, a RecordBatch, a list of batches) is split between `threads` tasks (0: one
    per core). A stream (a RecordBatchReader, anything else with `__arrow_c_stream__`, an
    iterator or generator of RecordBatches) is pulled batch by batch, never collected: memory
    stays at the shards in flight (KV mode: plus the key lists), whatever its length. A stream
    is written by one thread, since its batches arrive one at a time and in order and shard
    names follow that order: `threads` > 1 is refused for it.
    Options take the connector's names: batch_size or name_col, dtype, columns, shapes,
    tail_strategy, duplicates_strategy (or duplicatesStrategy), target_shard_size_mb,
    generate_index, kv_separator, f16_rounding, digest. `mode` is "error", "overwrite" or
    "append". The write commits the dataset's next version under its commit lock
    (`lock_timeout` seconds of waiting, default 600), then removes versions and retired shards
    older than `retain` seconds (default a day; 0: now). Returns the manifest.
    `path` may be `s3://bucket/prefix` (or `s3a://`), with `storage_options` (a dict: key,
    secret, token, endpoint_url, region, profile, max_concurrency, part_size…; unset ones
    from the environment and ~/.aws): shards are uploaded to their final names, then the
    version is committed with a conditional put (a store has no rename or lock).
    `data` may also be files: a path or URL, or a list of them, of Parquet or Arrow IPC files
    (read in order by Rust, Parquet pages copied or decoded straight into shards where they
    can be). URLs (`s3://`, `s3a://`, `az://`, `gs://`, `hf://`, `http(s)://`, read by range
    with `storage_options`, never downloaded whole) and local paths may be mixed; a folder,
    or an `s3://` prefix ending with `/`, gives its files in name order, names starting with
    `_` or `.` skipped.

        >>> import pyarrow as pa, tensorsmith
        >>> t = pa.table({"x": pa.array([[1.0, 2.0]] * 4, pa.list_(pa.float32()))})
        >>> m = tensorsmith.write_dataset(t, "ds", batch_size=2, dtype="F32", mode="overwrite")
        >>> len(tensorsmith.Dataset("ds"))
        4
    """
    data, stream, pulled = _arrow_input(data)
    try:
        text = _native.write_dataset(data, os.fspath(path), option_texts(options), mode,
                                     threads, retain, lock_timeout, stream,
                                     _storage(storage_options))
    except TensorsmithError as e:
        if pulled is not None and pulled.error is not None:
            raise pulled.error from e  # the generator's own exception, not Arrow's wrapping
        raise
    return json.loads(text)


class _Pulled:
    """A generator's batches, remembering the exception it raised."""

    def __init__(self, it):
        self.it, self.error = it, None

    def __iter__(self):
        try:
            yield from self.it
        except Exception as e:
            self.error = e
            raise


def _arrow_input(data):
    """(Arrow data, or a list of input files and URLs; whether it is a one-pass stream; the
    generator wrapper or None)."""
    import pyarrow as pa

    if isinstance(data, (str, os.PathLike)):
        return [os.fspath(data)], False, None
    if (isinstance(data, (list, tuple)) and data
            and all(isinstance(d, (str, os.PathLike)) for d in data)):
        return [os.fspath(d) for d in data], False, None
    if isinstance(data, pa.Table):
        return data, False, None
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]), False, None
    if isinstance(data, (list, tuple)):
        if not data:
            raise InvalidInput("no record batches given")
        return pa.Table.from_batches(list(data)), False, None
    if hasattr(data, "__arrow_c_stream__"):
        return data, True, None
    if hasattr(data, "__next__"):
        first = next(data, None)
        if first is None:
            raise InvalidInput("no record batches given")
        if not isinstance(first, pa.RecordBatch):
            raise InvalidInput(f"expected an iterator of RecordBatches, got a "
                               f"{type(first).__name__}")
        pulled = _Pulled(itertools.chain([first], data))
        return pa.RecordBatchReader.from_batches(first.schema, iter(pulled)), True, pulled
    raise InvalidInput(f"expected Arrow data, not {type(data).__name__}")


class Dataset:
    """A dataset in the safetensors-spark layout, map-style: `len(ds)` and `ds[i]` (PyTorch's
    DataLoader can use it as it is).

    Batch mode: `ds[i]` is sample i, a dict column -> array; `ds[a:b]` a batch of samples;
    `ds.batches(256, shuffle=seed)` iterates over batches. Arrays are read-only NumPy views
    of the shards' memory maps (no copy; bf16 and the 8-bit floats through ml_dtypes), except
    where a batch spans shards or is shuffled, which gathers it into a new array.

    KV mode: `ds[i]` is {"key": key, "tensor": array} for the i-th key in sorted order, and
    `ds["key"]` the tensor of that key.

        ds = tensorsmith.Dataset("out/")
        x = ds[0]["x"]                       # a view into the shard's map
        for batch in ds.batches(256, shuffle=0):
            train(batch["x"])

    A dataset reads the version it opened (`ds.version`) to the end, even while other
    processes overwrite or append: their commits retire shards rather than delete them, for
    24 hours by default. `Dataset(path, version=N)` opens an older version while `dataset
    clean` keeps it. Pickled (DataLoader workers started by spawn), it reopens its version.
    `columns` (batch mode) reads those columns only.

    `path` may be `s3://bucket/prefix`, `az://…` or `gs://…` (with `storage_options`): each
    shard's header is read when the shard is first needed, then the columns asked for, by
    ranged requests pinned to the shard's version (`columns=["x"]` moves column x's bytes,
    not the shards'; a read of most of a shard fetches it whole in one download). What was
    read is kept in an unlinked sparse temporary file per shard, mapped: arrays are views of
    it, as of a local shard, and nothing is fetched twice.
    """

    def __init__(self, path: PathOrUrl, framework: str = "np", version: int | None = None,
                 storage_options: StorageOptions = None, columns: Names = None) -> None:
        self._path = os.fspath(path)
        self._framework = _framework(framework)
        self._storage_options = storage_options
        self._r = _native.DatasetReader(self._path, version, _storage(storage_options))
        self._len = len(self._r)
        self._keys = self._r.keys() if self._r.mode == "kv" else []
        self._columns = None
        if columns is not None:
            if self._r.mode != "batch":
                raise OptionError("columns: a KV dataset's tensors are read by key")
            self._columns = [columns] if isinstance(columns, str) else list(columns)
            have = list(json.loads(self._r.manifest_json())["schema"])
            missing = [c for c in self._columns if c not in have]
            if missing:
                raise OptionError(f"columns: {missing} not in the dataset (it has {have})")
        if self._r.mode == "batch":
            self._starts = self._r.shard_starts()
            self._shards = [None] * len(self._starts)

    @property
    def mode(self) -> str:
        """"batch" or "kv"."""
        return self._r.mode

    @property
    def version(self) -> int | None:
        """The version read (0: a dataset written before versions)."""
        return self._r.version

    def __reduce__(self):
        # Workers reopen the same version, not whatever is current when they start.
        return (Dataset, (self._path, self._framework, self._r.version, self._storage_options,
                          self._columns))

    def manifest(self) -> dict[str, Any]:
        """`dataset_manifest.json` as a dict: `ds.manifest()["total_samples"]`."""
        return json.loads(self._r.manifest_json())

    def keys(self) -> list[str]:
        """KV mode: the tensor keys, sorted (batch mode: empty)."""
        return list(self._keys)

    def __len__(self) -> int:
        return self._len

    def _one(self, item):
        name, dtype, shape, buf = item
        return name, _out(_array(buf, dtype, shape), self._framework, dtype)

    def _shard(self, k):
        """Shard k's columns as whole-shard NumPy views (mapped once, then cached)."""
        cols = self._shards[k]
        if cols is None:
            cols = self._shards[k] = {
                name: (dtype, _array(buf, dtype, shape))
                for name, dtype, shape, buf in self._r.shard(k, self._columns)
            }
        return cols

    def _locate(self, i):
        k = bisect.bisect_right(self._starts, i) - 1
        return k, i - self._starts[k]

    def _index(self, i):
        i = int(i)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"index {i} out of range for a dataset of {self._len}")
        return i

    def _batch(self, a, b):
        """Samples a..b as {column: array}: views within a shard, gathered across shards."""
        if a >= b:
            return {name: _out(_array(buf, dtype, shape), self._framework, dtype)
                    for name, dtype, shape, buf in self._r.rows(a, b, self._columns)}
        k, row = self._locate(a)
        end = self._starts[k + 1] if k + 1 < len(self._starts) else self._len
        if b <= end:
            return {name: _out(arr[row:row + (b - a)], self._framework, dtype)
                    for name, (dtype, arr) in self._shard(k).items()}
        return dict(self._one(t) for t in self._r.rows(a, b, self._columns))

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, str):
            if self.mode != "kv":
                raise TypeError("tensors by key are for KV-mode datasets")
            return self._one(self._r.tensor(i))[1]
        if isinstance(i, slice):
            if self.mode != "batch":
                raise TypeError("slices are for batch-mode datasets")
            a, b, step = i.indices(self._len)
            if step != 1:
                return self._gather(np.arange(a, b, step))
            return self._batch(a, max(a, b))
        pos = _slicing.positions(i)
        if isinstance(pos, list):
            if self.mode != "batch":
                raise TypeError("index lists are for batch-mode datasets")
            return self._gather([self._index(p) for p in pos])
        i = self._index(pos)
        if self.mode == "kv":
            key = self._keys[i]
            return {"key": key, "tensor": self._one(self._r.tensor(key))[1]}
        k, row = self._locate(i)
        if self._framework == "np":
            return {name: arr[row] for name, (_, arr) in self._shard(k).items()}
        return {name: _out(arr[row], self._framework, dtype)
                for name, (dtype, arr) in self._shard(k).items()}

    def _gather(self, idx):
        """Samples `idx` (any order) as {column: new array}, one fancy index per shard."""
        idx = np.asarray(idx, dtype=np.int64)
        shard_of = np.searchsorted(self._starts, idx, side="right") - 1
        out = None
        for k in np.unique(shard_of):
            sel = shard_of == k
            local = idx[sel] - self._starts[k]
            cols = self._shard(int(k))
            if out is None:
                out = {name: (dtype, np.empty((len(idx),) + arr.shape[1:], arr.dtype))
                       for name, (dtype, arr) in cols.items()}
            for name, (dtype, arr) in cols.items():
                out[name][1][sel] = arr[local]
        if out is None:
            return self._batch(0, 0)
        return {name: _out(arr, self._framework, dtype) for name, (dtype, arr) in out.items()}

    def batches(self, batch_size: int, shuffle: int | None = None,
                drop_last: bool = False) -> Iterator[dict[str, Any]]:
        """Batches of `batch_size` samples (batch mode), as {column: array}. In order, a batch
        within one shard is a view of its map; one that spans shards is gathered. With
        `shuffle=seed`, samples come in the order of NumPy's `default_rng(seed).permutation`,
        gathered one fancy index per shard."""
        if self.mode != "batch":
            raise TypeError("batches are for batch-mode datasets")
        batch_size = int(batch_size)
        if batch_size < 1:
            raise OptionError(f"batch_size must be at least 1, not {batch_size}")
        n = self._len
        stop = n - n % batch_size if drop_last else n
        if shuffle is None:
            for a in range(0, stop, batch_size):
                yield self._batch(a, min(a + batch_size, n))
            return
        order = np.random.default_rng(shuffle).permutation(n)
        for a in range(0, stop, batch_size):
            yield self._gather(order[a:a + batch_size])


__all__ = [
    "safe_open", "load_file", "save_file", "load", "save", "inspect", "hash", "diff", "convert", "report",
    "stats",
    "quantize", "write_dataset", "Dataset", "TensorsmithError", "SafetensorError", "TensorSpec", "serialize",
    "serialize_file", "deserialize", "validate", "verify", "dataset_info", "dataset_verify",
    "dataset_clean", "dataset_export",
]
