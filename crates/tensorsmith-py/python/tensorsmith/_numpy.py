"""NumPy arrays of an opened model (framework="np" and the frameworks converted from NumPy),
and their conversion to TensorFlow, JAX, MLX and Paddle tensors as the reference converts them.

By default an array of a local file read with the mmap backend is a writable view of a private,
copy-on-write mapping of the file (`mmap.ACCESS_COPY`, MAP_PRIVATE), one per file and
`safe_open`, kept alive by the arrays that use it: no up-front copy, and a write copies the
page it touches without reaching the file (as the PyTorch path and the reference's arrays
behave). Each read is independent, as the reference's copies are: a tensor read again through
the same `safe_open` is read afresh from the file (owned), so it never sees writes made to the
first array through the shared private map. Other arrays (the pread backend, file objects,
URLs) are owned: read by Rust straight into the array's memory, one copy; decoded ones (zstd,
big-endian, sparse) are copied once from the decoded bytes. `readonly=True` (see `safe_open`)
keeps the zero-copy read-only views of tensorsmith's own shared map instead.
"""

import mmap
import threading

import numpy as np

from ._dtypes import to_numpy


def dtype_of(dtype: str, layout: str) -> np.dtype:
    """The NumPy dtype of a tensor's bytes (a GGUF block tensor's: its stored bytes)."""
    return np.dtype(np.uint8) if layout.startswith("ggml:") else to_numpy(dtype)


class Reader:
    """Writable NumPy arrays of one native `File`: copy-on-write views where possible, else
    owned."""

    def __init__(self, native, backend: str):
        self.native = native
        self.mapped = backend == "mmap"
        self.maps = {}
        self.viewed = set()  # tensors handed out as views of a map: later reads are owned
        self.lock = threading.Lock()

    def _map(self, i: int):
        if i in self.maps:
            return self.maps[i]
        m = None
        loc = self.native.local_file(i)
        if loc is not None:
            path, length = loc
            try:
                with open(path, "rb") as fh:
                    m = mmap.mmap(fh.fileno(), length, access=mmap.ACCESS_COPY)
            except (OSError, ValueError):
                m = None  # a file that cannot be mapped is read instead
        self.maps[i] = m
        return m

    def array(self, name: str, decoded) -> np.ndarray:
        """Tensor `name` as a writable array; `decoded()` gives the read-only array of its
        decoded bytes when they are not stored raw."""
        dtype, shape, layout = self.native.info_of(name)
        dt = dtype_of(dtype, layout)
        rng = self.native.raw_range(name)
        if rng is None:
            return np.array(decoded(), copy=True)
        i, start, end = rng
        if end == start:
            return np.zeros(shape, dtype=dt)
        with self.lock:
            first = name not in self.viewed
            m = self._map(i) if self.mapped and first else None
            if m is not None:
                self.viewed.add(name)
        if m is not None:
            count = int(np.prod(shape, dtype=np.int64))
            return np.frombuffer(m, dtype=dt, count=count, offset=start).reshape(shape)
        out = np.empty(shape, dtype=dt)
        self.native.read_into(i, start, end - start, out.ctypes.data)
        return out

    def read_many(self, names) -> dict:
        """Owned arrays of the raw tensors among `names` that are read rather than mapped
        (the pread backend, file objects, URLs), all in one native call so that their reads
        share one queue: a URL keeps `max_concurrency` requests in flight across tensors.
        The others (mapped, decoded, GGUF blocks, empty) are left to `array`."""
        out, batch = {}, []
        for name in names:
            dtype, shape, layout = self.native.info_of(name)
            rng = self.native.raw_range(name)
            if rng is None or rng[2] == rng[1] or layout.startswith("ggml:"):
                continue
            if self.mapped:
                with self.lock:
                    if self._map(rng[0]) is not None:
                        continue
            arr = np.empty(shape, dtype=dtype_of(dtype, layout))
            out[name] = arr
            batch.append((name, [], arr.ctypes.data, rng[2] - rng[1]))
        if batch:
            self.native.read_parts_into(batch)
        return out


def to_framework(arr: np.ndarray, framework: str):
    """A NumPy array as a tensor of "tf", "flax" (JAX), "mlx" or "paddle", converted as the
    reference converts it; that framework's own ImportError when it is not installed."""
    if framework == "flax":
        try:
            import flax  # noqa: F401 - as the reference: registers its dtypes when present
        except ImportError:
            pass
        import jax

        return jax.numpy.array(arr)
    if framework == "tf":
        import tensorflow

        return tensorflow.convert_to_tensor(arr)
    if framework == "mlx":
        import mlx.core

        return mlx.core.array(arr)
    if framework == "paddle":
        import paddle

        return paddle.to_tensor(arr, place="cpu")
    raise ValueError(f"framework {framework} is invalid")
