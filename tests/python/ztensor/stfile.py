"""safetensors in pure Python (no `safetensors` package in the ztensor venvs), and the test
data shared by the zTensor interop suite.

Arrays are kept as their *storage bits*: BF16 as uint16, the F8 types as uint8, F4 as packed
uint8 (two elements per byte, low nibble first), C64 as complex64, BOOL as numpy bool. Comparing
`tobytes()` of such arrays is a bit-exact comparison (NaN payloads included).
"""

import json
import zlib

import numpy as np

# safetensors dtype -> numpy dtype of its storage bits (little-endian), elements per storage item.
ST_STORAGE = {
    "BOOL": (np.dtype(np.bool_), 1),
    "U8": (np.dtype("u1"), 1),
    "I8": (np.dtype("i1"), 1),
    "I16": (np.dtype("<i2"), 1),
    "U16": (np.dtype("<u2"), 1),
    "F16": (np.dtype("<f2"), 1),
    "BF16": (np.dtype("<u2"), 1),
    "I32": (np.dtype("<i4"), 1),
    "U32": (np.dtype("<u4"), 1),
    "F32": (np.dtype("<f4"), 1),
    "C64": (np.dtype("<c8"), 1),
    "F64": (np.dtype("<f8"), 1),
    "I64": (np.dtype("<i8"), 1),
    "U64": (np.dtype("<u8"), 1),
    "F8_E4M3": (np.dtype("u1"), 1),
    "F8_E5M2": (np.dtype("u1"), 1),
    "F8_E4M3FNUZ": (np.dtype("u1"), 1),
    "F8_E5M2FNUZ": (np.dtype("u1"), 1),
    "F8_E8M0": (np.dtype("u1"), 1),
    "F4": (np.dtype("u1"), 2),
}

# The reference writer's order (safetensors 0.8 `Dtype` declaration order); files are written
# with tensors sorted by descending dtype, then by name (bytewise), like the reference.
ST_ORDER = [
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64",
    "F64", "I64", "U64",
]

# Tensors written for every dtype: matrices, a scalar, zero-size tensors, an odd-length vector.
SHAPES = {
    "matrix": (3, 4),
    "cube": (2, 3, 5),
    "scalar": (),
    "empty": (0, 5),
    "empty2": (4, 0),
    "vector": (7,),
}


def shapes_for(dtype):
    """SHAPES, except that F4 needs an even element count (whole bytes in safetensors)."""
    if dtype != "F4":
        return dict(SHAPES)
    return {"matrix": (3, 4), "cube": (2, 3, 6), "empty": (0, 5), "vector": (8,)}


def seed(*parts):
    return zlib.crc32(repr(parts).encode())


def nelem(shape):
    return int(np.prod(shape, dtype=np.int64))


def stored_nbytes(dtype, shape):
    dt, per = ST_STORAGE[dtype]
    return -(-nelem(shape) // per) * dt.itemsize


def random_bits(rng, dtype, shape):
    """Any bit pattern (NaNs, infinities, subnormals) for numbers; 0/1 for BOOL; F4 packed."""
    dt, per = ST_STORAGE[dtype]
    n = nelem(shape)
    if dtype == "BOOL":
        return rng.integers(0, 2, size=n).astype(bool).reshape(shape)
    if per == 2:
        assert n % 2 == 0
        return rng.integers(0, 256, size=n // 2, dtype=np.uint8)
    raw = rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def sample_tensors(dtype, salt=""):
    """{name: (dtype, shape, storage array)} for one dtype."""
    rng = np.random.default_rng(seed(dtype, salt))
    return {
        name: (dtype, shape, random_bits(rng, dtype, shape))
        for name, shape in shapes_for(dtype).items()
    }


# ---------------------------------------------------------------------------------------------
# writing and reading


def write_safetensors(path, tensors, metadata=None):
    """{name: (dtype, shape, array)} -> a file laid out exactly as the reference writes it:
    tensors sorted by descending dtype then name, compact JSON with `__metadata__` first,
    the header padded with spaces to a multiple of 8. Returns the bytes."""
    items = sorted(
        tensors.items(), key=lambda kv: (-ST_ORDER.index(kv[1][0]), kv[0].encode())
    )
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, arr) in items:
        data = np.ascontiguousarray(arr).tobytes()
        assert len(data) == stored_nbytes(dtype, shape), name
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    h += b" " * (-len(h) % 8)
    blob = len(h).to_bytes(8, "little") + h + b"".join(blobs)
    with open(path, "wb") as f:
        f.write(blob)
    return blob


def read_safetensors(path):
    """-> (metadata or None, {name: (dtype, shape, storage array)}), checking the layout."""
    blob = open(path, "rb").read()
    n = int.from_bytes(blob[:8], "little")
    assert 8 + n <= len(blob)
    header = json.loads(blob[8:8 + n])
    assert n % 8 == 0, "header length is a multiple of 8"
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", None)
    out, end = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        dtype, shape = info["dtype"], tuple(info["shape"])
        a, b = info["data_offsets"]
        assert a == end, f"{name}: tensors are contiguous"
        assert b - a == stored_nbytes(dtype, shape), name
        end = b
        dt, per = ST_STORAGE[dtype]
        arr = np.frombuffer(data[a:b], dtype=dt)
        out[name] = (dtype, shape, arr if per == 2 else arr.reshape(shape))
    assert end == len(data), "no bytes after the last tensor"
    return metadata, out


def assert_same(got, want):
    """Both {name: (dtype, shape, array)}: same names, dtypes, shapes and bytes."""
    assert sorted(got) == sorted(want)
    for name, (dtype, shape, arr) in want.items():
        gd, gs, ga = got[name]
        assert (gd, tuple(gs)) == (dtype, tuple(shape)), name
        assert np.ascontiguousarray(ga).tobytes() == np.ascontiguousarray(arr).tobytes(), name


# ---------------------------------------------------------------------------------------------
# sparse objects


class SparseObject:
    """A sparse tensor and the dense array it stands for (storage bits, zero elsewhere).

    csr: rank 2; `indices` (column of each value) and `indptr` (row starts, R + 1 entries).
    coo: any rank; `coords` structure-of-arrays, all dim-0 indices first, then dim-1, ...
    """

    def __init__(self, kind, dtype, shape, rng, density=0.4, index_dtype="u64"):
        self.kind, self.dtype, self.shape, self.index_dtype = kind, dtype, tuple(shape), index_dtype
        st, per = ST_STORAGE[dtype]
        assert per == 1, "packed dtypes are not used as sparse values here"
        mask = rng.random(self.shape) < density
        if kind == "csr":
            assert len(self.shape) == 2
            mask[1, :] = False  # an empty row
        nz = np.argwhere(mask)  # row-major order: what CSR and sorted COO both use
        self.values = random_bits(rng, dtype, (len(nz),))
        self.dense = np.zeros(self.shape, dtype=st)
        if len(nz):
            self.dense[tuple(nz.T)] = self.values
        if kind == "csr":
            self.indices = nz[:, 1].astype(np.uint64)
            counts = mask.sum(axis=1)
            self.indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.uint64)
        else:
            self.coords = np.ascontiguousarray(nz.T).reshape(-1).astype(np.uint64)

    def index_parts(self):
        """{role: uint64 array} of the index components."""
        if self.kind == "csr":
            return {"indices": self.indices, "indptr": self.indptr}
        return {"coords": self.coords}
