"""PyTorch tensors of an opened model, without NumPy (only imported when PyTorch is used).

CPU tensors of a local file read with the mmap backend are views of a private, copy-on-write
mapping of the file (`torch.UntypedStorage.from_file(path, shared=False)`), one per file and
`safe_open`, kept alive by the tensors that use it: writable, and a write copies the page it
touches without reaching the file. Other tensors (the pread backend, file objects, URLs) are
owned: read by Rust straight into the tensor's storage, one copy. Decoded tensors (zstd,
big-endian, sparse zTensor parts) are copied once from the decoded bytes. A mapped file
truncated in place under live tensors is out of scope, as with the reference: the kernel
raises SIGBUS on access. A file replaced by a rename keeps serving the old bytes.
"""

import warnings

import torch

from .errors import InvalidInput, OptionError, Unsupported

# safetensors dtype name -> torch dtype, for those this torch has.
TORCH = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool, "C64": torch.complex64,
}
for _name, _attr in (("U16", "uint16"), ("U32", "uint32"), ("U64", "uint64"),
                     ("F8_E4M3", "float8_e4m3fn"), ("F8_E4M3FNUZ", "float8_e4m3fnuz"),
                     ("F8_E5M2", "float8_e5m2"), ("F8_E5M2FNUZ", "float8_e5m2fnuz"),
                     ("F8_E8M0", "float8_e8m0fnu"), ("F4", "float4_e2m1fn_x2"),
                     ("C128", "complex128")):
    if hasattr(torch, _attr):
        TORCH[_name] = getattr(torch, _attr)
FROM_TORCH = {v: k for k, v in TORCH.items()}
# torch packs two F4 values in one element (float4_e2m1fn_x2): a safetensors F4 tensor of
# last dimension 2n is a torch tensor of last dimension n.
_F4 = TORCH.get("F4")


def torch_shape(dtype_name: str, shape):
    """The torch shape of a safetensors tensor of `shape` (F4: the last dimension halved)."""
    if dtype_name != "F4" or not shape:
        return shape
    if shape[-1] % 2:
        raise Unsupported(f"an F4 tensor of shape {list(shape)}: torch's float4_e2m1fn_x2 "
                          "holds pairs, so the last dimension must be even")
    return [*shape[:-1], shape[-1] // 2]


def torch_dtype(name: str):
    """The torch dtype of a safetensors dtype name; Unsupported naming it when this torch
    has none."""
    try:
        return TORCH[name]
    except KeyError:
        raise Unsupported(
            f"dtype {name} has no PyTorch equivalent in torch {torch.__version__}") from None


def parse_device(device):
    """A `torch.device` from what the reference accepts: "cpu", "cuda", "cuda:N", an int (a
    CUDA index), a `torch.device`, or any device name torch knows ("mps", "xpu", "meta").
    Malformed ones are refused as the reference refuses them ("device foo is invalid"); a
    CUDA device that is missing raises torch's own error, as with the reference."""
    if device is None:
        return torch.device("cpu")
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise OptionError(f"device {device} is invalid")
        dev = torch.device("cuda", device)
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except RuntimeError:
            raise OptionError(f"device {device} is invalid") from None
    else:
        raise OptionError(f"device {device!r} is invalid")
    if dev.type == "cuda":
        torch.cuda.init()  # no driver or no device: torch's error
        if (dev.index or 0) >= torch.cuda.device_count():
            torch.empty(0, device=dev)  # torch's error for a missing device index
    return dev


class Reader:
    """PyTorch CPU tensors of one native `File`: mapped views where possible, else owned."""

    def __init__(self, native, backend: str):
        self.native = native
        self.mapped = backend == "mmap"
        self.storages = {}

    def _storage(self, i: int):
        s = self.storages.get(i)
        if s is None:
            loc = self.native.local_file(i)
            if loc is None:
                return None
            path, length = loc
            s = torch.UntypedStorage.from_file(path, shared=False, nbytes=length)
            self.storages[i] = s
        return s

    def tensor(self, name: str, dequantize: bool = False):
        dtype_name, shape, layout = self.native.info_of(name)
        if layout.startswith("ggml:") and dequantize:
            return dequantized(self.native, name, self.native.value_shape(name))
        dtype = torch_dtype(dtype_name)
        shape = torch_shape(dtype_name, shape)
        rng = self.native.raw_range(name)
        if rng is None:
            return decoded(self.native, name, dtype, shape)
        i, start, end = rng
        if end == start:
            return torch.empty(shape, dtype=dtype)
        storage = self._storage(i) if self.mapped else None
        if storage is not None:
            # A storage sliced at the tensor's bytes keeps the whole mapping alive; its data
            # starts at offset 0, so any alignment views as any dtype.
            return (torch.empty(0, dtype=torch.uint8).set_(storage[start:end])
                    .view(dtype).reshape(shape))
        out = torch.empty(shape, dtype=dtype)
        self.native.read_into(i, start, end - start, out.data_ptr())
        return out

    def tensors(self, names, dequantize: bool = False):
        """`tensor` of each name, in order; the owned reads (pread, URLs, file objects) of
        all raw tensors in one native call, so their reads share one queue and a URL keeps
        `max_concurrency` requests in flight across tensors, not only within one."""
        out, batch = {}, []
        for name in names:
            dtype_name, shape, layout = self.native.info_of(name)
            rng = self.native.raw_range(name)
            if (rng is None or rng[2] == rng[1] or layout.startswith("ggml:")
                    or (self.mapped and self._storage(rng[0]) is not None)):
                out[name] = self.tensor(name, dequantize)
                continue
            t = torch.empty(torch_shape(dtype_name, shape), dtype=torch_dtype(dtype_name))
            out[name] = t
            batch.append((name, [], t.data_ptr(), rng[2] - rng[1]))
        if batch:
            self.native.read_parts_into(batch)
        return out


def decoded(native, name, dtype, shape):
    """A tensor whose bytes Rust decoded (zstd, byte-swapped, densified): copied once."""
    buf = native.tensor_bytes(name)
    if len(buf) == 0:
        return torch.empty(shape, dtype=dtype)
    with warnings.catch_warnings():
        # The decoded bytes are read-only to Python; the tensor copies them at once.
        warnings.simplefilter("ignore", UserWarning)
        flat = torch.frombuffer(buf, dtype=torch.uint8)
    return flat.clone().view(dtype).reshape(shape)


def dequantized(native, name, shape):
    """A GGUF block tensor's values as float32 (bit-identical to gguf-py)."""
    import numpy as np  # float32 only: no dtype of NumPy's beyond its own

    arr = np.empty(shape, dtype=np.float32)
    native.dequantize_into(name, arr)
    return torch.from_numpy(arr)


def spec(name, t):
    """A tensor's safetensors dtype and shape (F4: pairs counted as two values)."""
    if not isinstance(t, torch.Tensor):
        raise InvalidInput(f"Key `{name}` is invalid, expected torch.Tensor but received "
                           f"{type(t)}")
    if t.dtype not in FROM_TORCH:
        raise Unsupported(f"tensor {name!r}: PyTorch dtype {t.dtype} has no safetensors "
                          "equivalent")
    shape = list(t.shape)
    if t.dtype == _F4 and shape:
        shape[-1] *= 2  # two F4 values per element
    return FROM_TORCH[t.dtype], shape


def as_bytes(name, t):
    """A CPU tensor's safetensors dtype, shape and contiguous bytes (a uint8 tensor sharing
    its memory when it is already contiguous and on the CPU), for the writers."""
    dtype, shape = spec(name, t)
    t = t.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    t = t.contiguous()
    flat = t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)
    return dtype, shape, flat


def from_bytes(buf, dtype_name: str, shape):
    """An owned tensor of little-endian bytes (`load(data)`): one copy, no NumPy."""
    dtype = torch_dtype(dtype_name)
    shape = torch_shape(dtype_name, shape)
    if len(buf) == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(buf), dtype=torch.uint8).view(dtype).reshape(shape)


def to_torch(arr, dtype_name: str):
    """A NumPy array (a dataset sample) as an owned tensor of `dtype_name`: its bytes copied
    once, reinterpreted by torch."""
    import numpy as np

    dtype = torch_dtype(dtype_name)
    if arr.size == 0:
        return torch.empty(arr.shape, dtype=dtype)
    raw = bytearray(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(arr.shape)
