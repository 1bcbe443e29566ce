"""One adapter per reference `ztensor` generation, behind the same small interface, so the
tests in this folder are written once and run inside each venv (.venv-zt01, .venv-zt11,
.venv-zt2; see scripts/ztensor-venvs).

Tensors travel as {name: (safetensors dtype, shape, storage-bits array)} (see stfile.py).
The APIs used here, and their pitfalls, are recorded in tests/data/ztensor/NOTES.md §5.
"""

import importlib.metadata

import numpy as np

import stfile

# ---------------------------------------------------------------------------------------------


def installed_generation():
    """('0.1' | '1.1' | '2', package version) of the ztensor package in this interpreter."""
    version = importlib.metadata.version("ztensor")
    for prefix, gen in (("0.1.", "0.1"), ("1.1.", "1.1"), ("2.", "2")):
        if version.startswith(prefix):
            return gen, version
    raise RuntimeError(f"ztensor {version}: not a generation this suite knows (0.1.x, 1.1.x, 2.x)")


def make(gen):
    return CLASSES[gen]()


def storage_view(dtype, arr):
    """A reference's array (ml_dtypes bf16, numpy bool, ...) -> the storage-bits array."""
    dt, _ = stfile.ST_STORAGE[dtype]
    a = np.ascontiguousarray(arr)
    if a.dtype == dt:
        return a
    assert a.dtype.itemsize == dt.itemsize, (dtype, a.dtype)
    return a.view(dt)


# ---------------------------------------------------------------------------------------------
# 0.1.4 and 1.1.1: a cffi-driven native library with a thin Python wrapper


# Names as the 0.1.x and 1.1.1 Python APIs report them (1.1.1 reports v0.1 names even for
# v1.1 files), and the v1.1 names, to safetensors names.
LEGACY_NAMES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8",
    "uint64": "U64", "uint32": "U32", "uint16": "U16", "uint8": "U8", "bool": "BOOL",
}
V11_NAMES = {
    "f64": "F64", "f32": "F32", "f16": "F16", "bf16": "BF16", "i64": "I64", "i32": "I32",
    "i16": "I16", "i8": "I8", "u64": "U64", "u32": "U32", "u16": "U16", "u8": "U8",
    "bool": "BOOL",
}
ST_TO_LEGACY = {v: k for k, v in LEGACY_NAMES.items()}


class _Legacy:
    """What 0.1.4 and 1.1.1 share."""

    dense_dtypes = ["F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8",
                    "U64", "U32", "U16", "U8", "BOOL"]
    # Dtypes the reference can read back from files tensorsmith writes: the same 13.
    read_dtypes = dense_dtypes

    def __init__(self):
        import ml_dtypes
        import ztensor
        from ztensor import ffi, lib

        self.zt, self.ffi, self.lib = ztensor, ffi, lib
        self.bf16 = np.dtype(ml_dtypes.bfloat16)

    def numpy_array(self, dtype, arr):
        """Storage bits -> the array the reference's writer wants."""
        if dtype == "BF16":
            return np.ascontiguousarray(arr).view(self.bf16)
        return np.ascontiguousarray(arr)

    def last_error(self):
        p = self.lib.ztensor_last_error_message()
        return self.ffi.string(p).decode() if p != self.ffi.NULL else "?"

    def _ffi_add_scalar(self, w, name, dtype, arr, level):
        """The Python wrapper turns a 0-d array into shape [1] (NOTES.md §5); call the
        native writer directly, as generate.py does, for a true shape []."""
        a = np.ascontiguousarray(self.numpy_array(dtype, arr).reshape(1))
        dummy = np.zeros(1, np.uint64)
        args = [w._ptr, name.encode(), self.ffi.cast("uint64_t*", dummy.ctypes.data), 0,
                ST_TO_LEGACY[dtype].encode(), self.ffi.cast("unsigned char*", a.ctypes.data),
                a.nbytes]
        if level is not None:
            args.append(level)
        st = self.lib.ztensor_writer_add_tensor(*args)
        assert st == 0, self.last_error()

    def location(self, path, name):
        m = self.zt.Reader(str(path)).get_metadata(name)
        return m.offset, m.size

    def dense_info(self, path):
        """{name: {"dtype": reported name, "encoding": ..., "checksum": ...}}."""
        r = self.zt.Reader(str(path))
        out = {}
        for name in self._names(r):
            m = r.get_metadata(name)
            out[name] = {"dtype": m.dtype_str, "encoding": m.encoding, "checksum": m.checksum,
                         "layout": m.layout, "shape": tuple(m.shape)}
        return out


class Ref01(_Legacy):
    gen = "0.1"
    # 0.1.4's Python API writes raw only (no compression, checksum or sparse).
    encodings = ["raw"]
    sparse_kinds = []
    digests = ["crc32c", "sha256"]  # tensorsmith --digest values valid for v0.1
    checked_digests = ["crc32c"]  # the ones this reference verifies (others: warning, ignored)
    native_dtype = staticmethod(lambda st: ST_TO_LEGACY[st])

    def _names(self, r):
        return r.get_tensor_names()

    def write_dense(self, path, tensors, encoding="raw"):
        assert encoding == "raw", "0.1.4's Python API cannot compress"
        w = self.zt.Writer(str(path))
        for name, (dtype, shape, arr) in tensors.items():
            if shape == ():
                self._ffi_add_scalar(w, name, dtype, arr, None)
            else:
                w.add_tensor(name, self.numpy_array(dtype, arr))
        w.finalize()

    def read_dense(self, path, verify=True):
        """Every tensor via Reader.read_tensor, which checks crc32c checksums in 0.1.4."""
        r = self.zt.Reader(str(path))
        out = {}
        for name in self._names(r):
            m = r.get_metadata(name)
            dtype = LEGACY_NAMES[m.dtype_str]
            view = r.read_tensor(name)
            out[name] = (dtype, tuple(m.shape), storage_view(dtype, np.array(view, copy=True)))
            del view
        return out


    def rejection(self, path, name):
        """The error the reference raises reading `name` with its checks on, or None."""
        try:
            self.zt.Reader(str(path)).read_tensor(name)
        except self.zt.ZTensorError as e:
            return str(e)
        return None


class Ref11(_Legacy):
    gen = "1.1"
    encodings = ["raw", "zstd", "zstd:1"]
    sparse_kinds = ["csr", "coo"]
    sparse_index_dtypes = ["u64"]  # the Python API casts indices to u64
    digests = ["crc32c", "sha256"]
    checked_digests = ["crc32c", "sha256"]
    native_dtype = staticmethod(lambda st: ST_TO_LEGACY[st])

    def _names(self, r):
        return r.tensor_names

    @staticmethod
    def _level(encoding):
        if encoding in ("raw", "zstd"):
            return {"raw": 0, "zstd": 3}[encoding]
        return int(encoding.split(":")[1])

    def write_dense(self, path, tensors, encoding="raw"):
        level = self._level(encoding)
        w = self.zt.Writer(str(path))
        for name, (dtype, shape, arr) in tensors.items():
            if shape == ():
                self._ffi_add_scalar(w, name, dtype, arr, level)
            else:
                w.add_tensor(name, self.numpy_array(dtype, arr),
                             compress=True if level == 3 else level)
        w.finalize()

    def _native_read(self, r, name):
        vp = self.lib.ztensor_reader_read_tensor(r._ptr, name.encode(), 1)
        assert vp != self.ffi.NULL, self.last_error()
        try:
            return bytes(self.ffi.buffer(vp.data, vp.len))
        finally:
            self.lib.ztensor_free_tensor_view(vp)

    def read_dense(self, path, verify=True, mixed=False):
        """Dense tensors through Reader.read_tensor (zero-copy for raw), checked against the
        native read with digest verification on (read_tensor skips it for raw data, NOTES §2).
        mixed: leave out non-dense objects instead of failing on them."""
        r = self.zt.Reader(str(path))
        out = {}
        for name in r.tensor_names:
            m = r.metadata(name)
            if mixed and m.layout != "dense":
                continue
            assert m.layout == "dense", (name, m.layout)
            dtype = LEGACY_NAMES[m.dtype_str]
            view = r.read_tensor(name)
            # Copy while `view` (which owns the native buffer) is alive: ascontiguousarray
            # of the ndarray subclass drops its owner and the buffer is freed under it.
            arr = storage_view(dtype, np.array(view, copy=True))
            del view
            if verify:
                assert self._native_read(r, name) == arr.tobytes(), name
            out[name] = (dtype, tuple(m.shape), arr)
        if verify and out:
            batch = r.read_tensors(list(out), verify_checksum=True)
            for name, a in zip(out, batch):
                assert np.array(a, copy=True).tobytes() == out[name][2].tobytes(), name
            del batch
        return out

    def rejection(self, path, name):
        r = self.zt.Reader(str(path))
        vp = self.lib.ztensor_reader_read_tensor(r._ptr, name.encode(), 1)
        if vp == self.ffi.NULL:
            return self.last_error()
        self.lib.ztensor_free_tensor_view(vp)
        return None

    def component(self, r, name, role):
        vp = self.lib.ztensor_reader_read_tensor_component(r._ptr, name.encode(), role.encode())
        assert vp != self.ffi.NULL, f"{name}/{role}: {self.last_error()}"
        try:
            return bytes(self.ffi.buffer(vp.data, vp.len))
        finally:
            self.lib.ztensor_free_tensor_view(vp)

    def write_sparse(self, path, objects, encoding="raw", dense=None):
        """objects: {name: SparseObject}. 1.1.1 writes sparse components raw, indices as u64;
        `dense` tensors ({name: (dtype, shape, array)}, not scalars) go first, with `encoding`."""
        w = self.zt.Writer(str(path))
        level = self._level(encoding)
        for name, (dtype, shape, arr) in (dense or {}).items():
            w.add_tensor(name, self.numpy_array(dtype, arr), compress=True if level == 3 else level)
        for name, o in objects.items():
            vals = self.numpy_array(o.dtype, o.values)
            if o.kind == "csr":
                w.add_sparse_csr(name, vals, o.indices, o.indptr, o.shape)
            else:
                w.add_sparse_coo(name, vals, o.coords.reshape(len(o.shape), -1), o.shape)
        w.finalize()

    def read_sparse(self, path):
        """{name: (layout, shape, values dtype, {role: (index dtype or None, bytes)})}; every
        component read verifies its digest, if any."""
        r = self.zt.Reader(str(path))
        out = {}
        for name in r.tensor_names:
            m = r.metadata(name)
            if m.layout == "dense":
                continue
            roles = {"sparse_csr": ["values", "indices", "indptr"],
                     "sparse_coo": ["values", "coords"]}[m.layout]
            parts = {role: ("u64" if role != "values" else None, self.component(r, name, role))
                     for role in roles}
            out[name] = ({"sparse_csr": "csr", "sparse_coo": "coo"}[m.layout], tuple(m.shape),
                         LEGACY_NAMES[m.dtype_str], parts)
        return out


# ---------------------------------------------------------------------------------------------
# 2.1.2: a PyO3 extension

# safetensors dtype -> (v2 storage dtype, logical type)
V2_TYPES = {
    "F64": ("f64", None), "F32": ("f32", None), "F16": ("f16", None), "BF16": ("bf16", None),
    "I64": ("i64", None), "I32": ("i32", None), "I16": ("i16", None), "I8": ("i8", None),
    "U64": ("u64", None), "U32": ("u32", None), "U16": ("u16", None), "U8": ("u8", None),
    "BOOL": ("u8", "bool"),
    "F8_E4M3": ("u8", "f8_e4m3fn"), "F8_E5M2": ("u8", "f8_e5m2"),
    "F8_E4M3FNUZ": ("u8", "f8_e4m3fnuz"), "F8_E5M2FNUZ": ("u8", "f8_e5m2fnuz"),
    "F8_E8M0": ("u8", "f8_e8m0"), "F4": ("u8", "f4_e2m1"), "C64": ("f32", "complex64"),
}
V2_TO_ST = {v: k for k, v in V2_TYPES.items()}
SEEKABLE = "zt.zstd-seekable/1"


def u8(arr):
    """2.1.2 takes a u8 buffer (an f32 ndarray raises BufferError)."""
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def insertion_key(name):
    """The order the canonical 2.1.2 Writer wants names added in: bytewise on UTF-8 (it
    refuses "c64.cube" after "u8.cube"), not the length-first CBOR key order."""
    return name.encode()


class Ref2:
    gen = "2"
    dense_dtypes = list(V2_TYPES)
    read_dtypes = dense_dtypes
    # "raw" and "zstd" through a non-canonical writer (align 4096, as the vectors);
    # "canonical" is the default Writer: 64 KiB placement, sorted names, xxh3 on every part.
    encodings = ["raw", "zstd", "canonical"]
    sparse_kinds = ["csr", "coo"]
    sparse_index_dtypes = ["u32", "u64"]
    digests = ["xxh3", "sha256"]
    checked_digests = ["xxh3", "sha256"]
    native_dtype = staticmethod(lambda st: V2_TYPES[st])

    def __init__(self):
        import ztensor

        self.zt = ztensor

    def writer(self, path, encoding):
        if encoding == "canonical":
            return self.zt.Writer(str(path))
        return self.zt.Writer(str(path), canonical=False, align=4096)

    def write_dense(self, path, tensors, encoding="raw"):
        items = list(tensors.items())
        if encoding == "canonical":
            items.sort(key=lambda kv: insertion_key(kv[0]))
        with self.writer(path, encoding) as w:
            for name, (dtype, shape, arr) in items:
                dt, logical = V2_TYPES[dtype]
                w.add(name, u8(arr), list(shape), dt, logical=logical,
                      encoding=SEEKABLE if encoding == "zstd" else None)

    def read_dense(self, path, verify=True, mixed=False):
        out = {}
        with self.zt.open(str(path)) as src:
            for name in src.keys():
                t = src[name]
                if mixed and t.layout != "dense":
                    continue
                assert t.layout == "dense", (name, t.layout)
                dtype = V2_TO_ST[(t.dtype, t.logical)]
                st, per = stfile.ST_STORAGE[dtype]
                arr = np.frombuffer(t.tobytes(), dtype=st)
                if per == 1:
                    arr = arr.reshape(tuple(t.shape))
                if verify and t.caps.verify:  # verify() is False for a part without digest
                    assert t.verify() is True, name
                out[name] = (dtype, tuple(t.shape), arr.copy())
        return out

    def verification(self, path):
        v = self.zt.verify(str(path))
        return v.checked, v.undigested

    def rejection(self, path, name):
        try:
            with self.zt.open(str(path)) as src:
                ok = src[name].verify()
        except ValueError as e:
            return str(e)
        return None if ok else "verify() returned False"

    def location(self, path, name):
        with self.zt.open(str(path)) as src:
            loc = src[name].location
            return loc.offset, loc.nbytes

    def dense_info(self, path):
        out = {}
        with self.zt.open(str(path)) as src:
            for name in src.keys():
                t = src[name]
                out[name] = {"dtype": t.dtype, "logical": t.logical, "layout": t.layout,
                             "shape": tuple(t.shape), "map": t.caps.map}
        return out

    def write_sparse(self, path, objects, encoding="raw", dense=None):
        with self.writer(path, encoding) as w:
            for name, (dtype, shape, arr) in (dense or {}).items():
                dt, logical = V2_TYPES[dtype]
                w.add(name, u8(arr), list(shape), dt, logical=logical,
                      encoding=SEEKABLE if encoding == "zstd" else None)
            for name, o in objects.items():
                dt, logical = V2_TYPES[o.dtype]
                vals = {"dtype": dt, "data": u8(o.values), "logical": logical}
                if encoding == "zstd":
                    vals["encoding"] = SEEKABLE
                idt = np.dtype("<u4" if o.index_dtype == "u32" else "<u8")
                if o.kind == "csr":
                    parts = {"values": vals,
                             "indices": {"dtype": o.index_dtype, "data": u8(o.indices.astype(idt))},
                             "indptr": {"dtype": o.index_dtype, "data": u8(o.indptr.astype(idt))}}
                    layout = "zt.sparse_csr/1"
                else:
                    parts = {"values": vals,
                             "coords": {"dtype": o.index_dtype, "data": u8(o.coords.astype(idt))}}
                    layout = "zt.sparse_coo/1"
                w.add_object(name, list(o.shape), parts, layout=layout)

    def read_sparse(self, path):
        out = {}
        with self.zt.open(str(path)) as src:
            for name in src.keys():
                t = src[name]
                if t.layout == "dense":
                    continue
                kind = {"zt.sparse_csr/1": "csr", "zt.sparse_coo/1": "coo"}[t.layout]
                parts = {}
                for role in t.parts:
                    p = t[role]
                    if p.caps.verify:
                        assert p.verify() is True, (name, role)
                    parts[role] = (None if role == "values" else p.dtype, p.tobytes())
                v = t["values"]
                out[name] = (kind, tuple(t.shape), V2_TO_ST[(v.dtype, v.logical)], parts)
        return out

    def read_objects(self, path):
        """Any layout: {name: (layout, shape, attributes, {part: (dtype, logical, bytes)})}."""
        out = {}
        with self.zt.open(str(path)) as src:
            for name in src.keys():
                t = src[name]
                parts = {p: (t[p].dtype, t[p].logical, t[p].tobytes()) for p in t.parts}
                out[name] = (t.layout, tuple(t.shape), parts)
        return out


CLASSES = {"0.1": Ref01, "1.1": Ref11, "2": Ref2}


# ---------------------------------------------------------------------------------------------
# Manifests read straight from the bytes (what the Python APIs do not expose: file attributes
# in 1.1.1, object attributes in 2.1.2). A small CBOR decoder: definite and indefinite lengths,
# no tags.


def cbor_decode(b):
    v, i = _cbor(b, 0)
    assert i == len(b), "trailing bytes after the CBOR item"
    return v


def _cbor(b, i):
    import struct

    ib = b[i]
    mt, ai = ib >> 5, ib & 31
    i += 1
    if mt == 7:
        simple = {20: False, 21: True, 22: None}
        if ai in simple:
            return simple[ai], i
        n, fmt = {25: (2, ">e"), 26: (4, ">f"), 27: (8, ">d")}[ai]
        return float(struct.unpack(fmt, b[i:i + n])[0]), i + n
    if ai < 24:
        arg = ai
    elif ai < 28:
        n = 1 << (ai - 24)
        arg, i = int.from_bytes(b[i:i + n], "big"), i + n
    else:
        assert ai == 31, "reserved additional information"
        arg = None
    if mt == 0:
        return arg, i
    if mt == 1:
        return -1 - arg, i
    if mt in (2, 3):
        raw = bytes(b[i:i + arg])
        return (raw if mt == 2 else raw.decode()), i + arg
    if mt == 4:
        out = []
        while (arg is None and b[i] != 0xFF) or (arg is not None and len(out) < arg):
            x, i = _cbor(b, i)
            out.append(x)
        return out, i + (arg is None)
    if mt == 5:
        out, count = {}, 0
        while (arg is None and b[i] != 0xFF) or (arg is not None and count < arg):
            k, i = _cbor(b, i)
            out[k], i = _cbor(b, i)
            count += 1
        return out, i + (arg is None)
    raise AssertionError("CBOR tags are not expected in a zTensor manifest")


def manifest(path):
    """The decoded manifest of a v1.1 or v2 file (root map)."""
    import struct

    data = open(path, "rb").read()
    if data[:8] == b"ZTEN1000":
        n = struct.unpack("<Q", data[-16:-8])[0]
        return cbor_decode(data[len(data) - 16 - n:len(data) - 16])
    assert data[-8:] == b"\x89ZT2\r\n\x1a\n", "not a v1.1 or v2 file"
    off, length = struct.unpack("<QQ", data[-40:-24])
    return cbor_decode(data[off:off + length])
