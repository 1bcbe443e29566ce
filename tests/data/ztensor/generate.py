#!/usr/bin/env python3
"""Generate zTensor test vectors with the reference `ztensor` package from PyPI.

Run once per generation, each time inside a venv holding that generation:

    /tmp/zt01/bin/python generate.py v0.1   # ztensor==0.1.4
    /tmp/zt11/bin/python generate.py v1.1   # ztensor==1.1.1
    /tmp/zt2/bin/python  generate.py v2     # ztensor==2.1.2

Each venv also needs: numpy ml_dtypes zstandard xxhash
(`pip install ztensor==X numpy ml_dtypes zstandard xxhash`).

Output: ./v0.1/, ./v1.1/ or ./v2/ next to this script, holding *.zt files and an
expected.json (schema described in NOTES.md). The folder is emptied first.

Where the files come from (`origin` in expected.json):
  reference      written by the package's public Python API
  reference-ffi  written by the package's own native library through its cffi
                 handle, bypassing the Python wrapper (0.1.4/1.1.1 only; used for
                 true scalars, because the wrapper's np.ascontiguousarray turns a
                 0-d array into shape [1])
  synthesized    assembled by this script where the Python API cannot produce the
                 variant (zstd/checksums in 0.1.4, digests in 1.1.1, sha256/no digest
                 in 2.1.2, ...). The encoder is first checked to reproduce every
                 reference manifest byte for byte; each synthesized file is then
                 read back with the reference reader and the outcome recorded.

Everything is deterministic: running the same package versions again gives the
same bytes.
"""

import hashlib
import importlib.metadata
import json
import math
import os
import platform
import struct
import sys

import numpy as np
import zstandard
import xxhash

HERE = os.path.dirname(os.path.abspath(__file__))
HEX_LIMIT = 4096  # decoded components larger than this are recorded by sha256


# ---------------------------------------------------------------------------
# CBOR: a small order-preserving codec, enough to reproduce what the three
# reference writers emit (serde_cbor for 0.1/1.1, ztensor's own deterministic
# encoder for v2).
# ---------------------------------------------------------------------------

class IndefMap(dict):
    """A map that is (or is to be) encoded with indefinite length (0xBF..0xFF)."""


class IndefList(list):
    """An array that is (or is to be) encoded with indefinite length (0x9F..0xFF)."""


def _head(major, arg):
    if arg < 24:
        return bytes([(major << 5) | arg])
    for ai, n in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if arg < (1 << (8 * n)):
            return bytes([(major << 5) | ai]) + arg.to_bytes(n, "big")
    raise ValueError("integer too large")


def _float_shortest(x):
    if math.isnan(x):
        return b"\xf9\x7e\x00"
    if math.isinf(x):
        return b"\xf9" + struct.pack(">e", x)
    with np.errstate(over="ignore"):
        h = float(np.float16(x))
    if h == x:
        return b"\xf9" + struct.pack(">e", x)
    with np.errstate(over="ignore"):
        f = float(np.float32(x))
    if f == x:
        return b"\xfa" + struct.pack(">f", x)
    return b"\xfb" + struct.pack(">d", x)


def cbor_encode(v, sort=False):
    """Encode `v`. Maps keep insertion order unless sort=True (RFC 8949 core
    deterministic order: bytewise on the encoded keys)."""
    if isinstance(v, bool):
        return b"\xf5" if v else b"\xf4"
    if v is None:
        return b"\xf6"
    if isinstance(v, int):
        return _head(0, v) if v >= 0 else _head(1, -1 - v)
    if isinstance(v, float):
        return _float_shortest(v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        return _head(3, len(b)) + b
    if isinstance(v, (bytes, bytearray)):
        return _head(2, len(v)) + bytes(v)
    if isinstance(v, IndefList):
        return b"\x9f" + b"".join(cbor_encode(x, sort) for x in v) + b"\xff"
    if isinstance(v, (list, tuple)):
        return _head(4, len(v)) + b"".join(cbor_encode(x, sort) for x in v)
    if isinstance(v, dict):
        pairs = [(cbor_encode(k, sort), cbor_encode(x, sort)) for k, x in v.items()]
        if sort:
            pairs.sort(key=lambda p: p[0])
        body = b"".join(k + x for k, x in pairs)
        if isinstance(v, IndefMap):
            return b"\xbf" + body + b"\xff"
        return _head(5, len(pairs)) + body
    raise TypeError(type(v))


def cbor_decode(b):
    v, i = _dec(b, 0)
    if i != len(b):
        raise ValueError("trailing bytes after CBOR item")
    return v


def _dec(b, i):
    ib = b[i]
    mt, ai = ib >> 5, ib & 31
    i += 1
    if mt == 7:
        if ai == 20:
            return False, i
        if ai == 21:
            return True, i
        if ai == 22:
            return None, i
        if ai == 25:
            return float(struct.unpack(">e", b[i:i + 2])[0]), i + 2
        if ai == 26:
            return float(struct.unpack(">f", b[i:i + 4])[0]), i + 4
        if ai == 27:
            return struct.unpack(">d", b[i:i + 8])[0], i + 8
        raise ValueError("unsupported simple value %d" % ai)
    if ai < 24:
        arg = ai
    elif ai in (24, 25, 26, 27):
        n = 1 << (ai - 24)
        arg = int.from_bytes(b[i:i + n], "big")
        i += n
    elif ai == 31:
        arg = None
    else:
        raise ValueError("reserved additional info")
    if mt == 0:
        return arg, i
    if mt == 1:
        return -1 - arg, i
    if mt in (2, 3):
        if arg is None:
            raise ValueError("indefinite strings not expected")
        raw = bytes(b[i:i + arg])
        return (raw if mt == 2 else raw.decode("utf-8")), i + arg
    if mt == 4:
        out = IndefList() if arg is None else []
        if arg is None:
            while b[i] != 0xFF:
                x, i = _dec(b, i)
                out.append(x)
            return out, i + 1
        for _ in range(arg):
            x, i = _dec(b, i)
            out.append(x)
        return out, i
    if mt == 5:
        out = IndefMap() if arg is None else {}
        if arg is None:
            while b[i] != 0xFF:
                k, i = _dec(b, i)
                x, i = _dec(b, i)
                out[k] = x
            return out, i + 1
        for _ in range(arg):
            k, i = _dec(b, i)
            x, i = _dec(b, i)
            out[k] = x
        return out, i
    raise ValueError("tags not expected")


def plain(v):
    """IndefMap/IndefList -> dict/list, bytes -> hex (for JSON)."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, bytes):
        return {"bytes_hex": v.hex()}
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return repr(v)
    return v


# ---------------------------------------------------------------------------
# checksums and zstd
# ---------------------------------------------------------------------------

def _crc32c_table():
    tab = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        tab.append(c)
    return tab


_CRC_TAB = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for byte in data:
        c = _CRC_TAB[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def zstd_stream(data, level, checksum=False):
    """One zstd frame as the Rust `zstd` crate's streaming Encoder writes it
    (no content size in the header). Verified byte-identical to 1.1.1 and 2.1.2."""
    co = zstandard.ZstdCompressor(level=level, write_checksum=checksum).compressobj()
    return co.compress(data) + co.flush()


def zstd_decompress(frames):
    out = b""
    d = zstandard.ZstdDecompressor()
    pos = 0
    while pos < len(frames):
        obj = d.decompressobj()
        chunk = obj.decompress(frames[pos:])
        out += chunk
        used = len(frames) - pos - len(obj.unused_data)
        if used <= 0:
            raise ValueError("zstd made no progress")
        pos += used
    return out


SKIPPABLE_MAGIC = 0x184D2A5E
SEEKABLE_MAGIC = 0x8F92EAB1


def seekable_encode(data, chunk=1 << 20, level=3):
    """zt.zstd-seekable/1 exactly as ztensor 2.x writes it."""
    out, entries = b"", []
    for i in range(0, len(data), chunk):
        part = data[i:i + chunk]
        frame = zstd_stream(part, level, checksum=True)
        entries.append((len(frame), len(part)))
        out += frame
    table = b"".join(struct.pack("<II", c, d) for c, d in entries)
    table += struct.pack("<IB", len(entries), 0) + struct.pack("<I", SEEKABLE_MAGIC)
    return out + struct.pack("<II", SKIPPABLE_MAGIC, len(table)) + table


def seekable_decode(stored, decoded_length):
    n = len(stored)
    assert n >= 17 and struct.unpack("<I", stored[-4:])[0] == SEEKABLE_MAGIC
    desc = stored[-5]
    assert desc & 0x7F == 0
    esize = 12 if desc & 0x80 else 8
    frames_n = struct.unpack("<I", stored[-9:-5])[0]
    content_len = frames_n * esize + 9
    tstart = n - 8 - content_len
    assert struct.unpack("<II", stored[tstart:tstart + 8]) == (SKIPPABLE_MAGIC, content_len)
    pos, fpos, out, frames = tstart + 8, 0, b"", []
    for _ in range(frames_n):
        c, d = struct.unpack("<II", stored[pos:pos + 8])
        pos += esize
        dec = zstandard.ZstdDecompressor().decompressobj().decompress(stored[fpos:fpos + c])
        assert len(dec) == d, "frame decoded size"
        frames.append({"compressed": c, "decompressed": d})
        out += dec
        fpos += c
    assert fpos == tstart and len(out) == decoded_length
    return out, frames


# ---------------------------------------------------------------------------
# deterministic sample data
# ---------------------------------------------------------------------------

def np_dtype(name):
    if name in ("bfloat16", "bf16"):
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"f64": "float64", "f32": "float32", "f16": "float16",
                     "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8",
                     "u64": "uint64", "u32": "uint32", "u16": "uint16", "u8": "uint8",
                     "bool": "bool"}.get(name, name))


def sample(dtype_name, shape):
    """Deterministic values that exercise sign, extremes and float specials."""
    dt = np_dtype(dtype_name)
    n = int(np.prod(shape)) if len(shape) else 1
    if dt == np.dtype(bool):
        vals = [(i * 5 + 1) % 3 != 0 for i in range(n)]
        return np.array(vals, dtype=bool).reshape(shape)
    if dt.kind == "f" or dt.name == "bfloat16":
        base = [1.0, -2.5, 0.0, -0.0, float("inf"), float("nan"), 0.1, -65504.0, 3.140625, 1e-3]
        vals = [base[i % len(base)] for i in range(n)]
        return np.array(vals, dtype=np.float64).astype(dt).reshape(shape)
    info = np.iinfo(dt)
    if dt.kind == "i":
        base = [0, 1, -1, int(info.min), int(info.max), 42, -100 if info.bits > 8 else -100, 7]
    else:
        base = [0, 1, 2, int(info.max), int(info.max) - 1, 42, 200, 7]
    vals = [base[i % len(base)] for i in range(n)]
    return np.array(vals, dtype=dt).reshape(shape)


def compressible(n_bytes):
    """Bytes with a short period, so zstd shrinks them a lot."""
    return bytes((i * 7 + (i // 64)) % 16 for i in range(n_bytes))


def hexrec(decoded):
    if len(decoded) <= HEX_LIMIT:
        return {"decoded_length": len(decoded), "hex": decoded.hex()}
    return {"decoded_length": len(decoded), "sha256": hashlib.sha256(decoded).hexdigest(),
            "hex_prefix": decoded[:64].hex()}


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def err_text(e):
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return "%s: %s" % (type(e).__name__, msg.replace(HERE + os.sep, ""))


def run(fn):
    """('ok', value) or ('error', message)."""
    try:
        return "ok", fn()
    except BaseException as e:  # the reference may raise anything, even SystemExit-like
        if isinstance(e, KeyboardInterrupt):
            raise
        return "error", err_text(e)


# ---------------------------------------------------------------------------
# generation-independent bookkeeping
# ---------------------------------------------------------------------------

class Output:
    def __init__(self, gen):
        self.gen = gen
        self.dir = os.path.join(HERE, gen)
        os.makedirs(self.dir, exist_ok=True)
        for f in os.listdir(self.dir):
            if f.endswith(".zt") or f == "expected.json" or f.endswith(".partial"):
                os.remove(os.path.join(self.dir, f))
        self.files = {}

    def path(self, name):
        return os.path.join(self.dir, name)

    def record(self, name, entry):
        p = self.path(name)
        entry = dict(entry)
        entry["file_size"] = os.path.getsize(p)
        entry["sha256"] = sha256_file(p)
        self.files[name] = entry

    def save(self, extra):
        doc = {"format": self.gen}
        doc.update(extra)
        doc["files"] = dict(sorted(self.files.items()))
        with open(self.path("expected.json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=False)
            f.write("\n")
        total = sum(v["file_size"] for v in self.files.values())
        print("%s: %d files, %d bytes of .zt" % (self.gen, len(self.files), total))


def versions():
    out = {"python": platform.python_version()}
    for pkg in ("ztensor", "numpy", "ml_dtypes", "zstandard", "xxhash"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


# ===========================================================================
# v0.1  (ztensor 0.1.4)
# ===========================================================================

V01_DTYPES = ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
              "uint64", "uint32", "uint16", "uint8", "bool"]
V01_WIDTH = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int16": 2, "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1}


def v01_parse(data):
    """Independent v0.1 parser -> (entries, manifest bytes)."""
    assert data[:8] == b"ZTEN0001", "magic"
    n = struct.unpack("<Q", data[-8:])[0]
    man = data[len(data) - 8 - n:len(data) - 8]
    return cbor_decode(man), man


def v01_describe(data):
    entries, man = v01_parse(data)
    objs = []
    for e in entries:
        stored = data[e["offset"]:e["offset"] + e["size"]]
        dec = zstd_decompress(stored) if e["encoding"] == "zstd" else stored
        w = V01_WIDTH[e["dtype"]]
        if e.get("data_endianness") == "big" and e["encoding"] == "raw" and w > 1:
            dec = b"".join(dec[i:i + w][::-1] for i in range(0, len(dec), w))
        comp = {"dtype": e["dtype"], "encoding": e["encoding"], "offset": e["offset"],
                "stored_length": e["size"], "data_endianness": e.get("data_endianness"),
                "checksum": e.get("checksum")}
        comp.update(hexrec(dec))
        objs.append({"name": e["name"], "dtype": e["dtype"], "shape": list(e["shape"]),
                     "layout": e.get("layout"), "components": {"data": comp}})
    return objs, man


def v01_build(path, tensors):
    """Assemble a v0.1 file the way the 0.1.x Rust writer lays it out.
    tensors: list of (meta dict in key order, stored blob)."""
    out = bytearray(b"ZTEN0001")
    metas = []
    for meta, blob in tensors:
        pad = (-len(out)) % 64
        out += b"\0" * pad
        m = IndefMap()
        for k, v in meta.items():
            m[k] = v
        m["offset"] = len(out)
        m["size"] = len(blob)
        out += blob
        metas.append(m)
    man = cbor_encode(metas)
    out += man + struct.pack("<Q", len(man))
    with open(path, "wb") as f:
        f.write(out)


def v01_meta(name, dtype, shape, encoding="raw", endianness="default", checksum=None):
    """Key order of the 0.1.x TensorMetadata struct (serde field order)."""
    m = IndefMap(name=name, offset=0, size=0, dtype=dtype, layout="dense", shape=list(shape),
                 encoding=encoding)
    if endianness == "default":
        endianness = "little" if encoding == "raw" and V01_WIDTH[dtype] > 1 else None
    if endianness is not None:
        m["data_endianness"] = endianness
    if checksum is not None:
        m["checksum"] = checksum
    return m


def gen_v01():
    import ztensor
    from ztensor import ffi, lib

    out = Output("v0.1")

    def reference_read(path):
        """Read every tensor back with the 0.1.4 reader; compare to our parse."""
        def go():
            r = ztensor.Reader(path)
            res = {}
            for m in r:
                arr = r.read_tensor(m.name)
                res[m.name] = {"dtype": m.dtype_str, "shape": list(m.shape), "layout": m.layout,
                               "encoding": m.encoding, "endianness": m.endianness,
                               "checksum": m.checksum, "bytes": arr.tobytes()}
            return res
        return run(go)

    def finish(name, origin, description, valid=True, check=True):
        p = out.path(name)
        data = open(p, "rb").read()
        entry = {"origin": origin, "description": description, "valid": valid}
        st, res = reference_read(p)
        if valid:
            objs, man = v01_describe(data)
            # our encoder must reproduce the manifest exactly
            assert cbor_encode(cbor_decode(man)) == man, name
            entry["objects"] = objs
            if st == "ok":
                for o in objs:
                    got = res[o["name"]]
                    want = o["components"]["data"]
                    if "hex" in want and check:
                        assert got["bytes"].hex() == want["hex"], (name, o["name"])
                entry["reference_read"] = "ok"
            else:
                entry["reference_read"] = res
        else:
            entry["reference_read"] = res if st == "error" else "ok (accepted!)"
        out.record(name, entry)
        return entry

    shape = [2, 3]

    # --- every dtype, raw, through the public API -------------------------
    for dt in V01_DTYPES:
        name = "dtype_%s.zt" % dt
        with ztensor.Writer(out.path(name)) as w:
            w.add_tensor("t", sample(dt, shape))
        finish(name, "reference", "one dense raw %s tensor, shape %s" % (dt, shape))

    # --- zero-size, scalar, empty, multi ----------------------------------
    with ztensor.Writer(out.path("zero_size.zt")) as w:
        w.add_tensor("empty_rows", np.zeros((0, 3), np.float32))
        w.add_tensor("after", np.arange(3, dtype=np.int32))
        w.add_tensor("empty_1d", np.zeros((0,), np.uint8))
    finish("zero_size.zt", "reference",
           "zero-element tensors: size 0, offset = next aligned offset, shared with the next blob")

    w = ztensor.Writer(out.path("scalar.zt"))
    for tname, dt, val in (("s_f32", "float32", 1.5), ("s_i64", "int64", -3), ("s_bool", "bool", True)):
        a = np.ascontiguousarray(np.array([val], dtype=np_dtype(dt)))
        dummy = np.zeros(1, np.uint64)
        st = lib.ztensor_writer_add_tensor(w._ptr, tname.encode(), ffi.cast("uint64_t*", dummy.ctypes.data),
                                          0, dt.encode(), ffi.cast("unsigned char*", a.ctypes.data), a.nbytes)
        assert st == 0
    w.finalize()
    finish("scalar.zt", "reference-ffi",
           "true scalars (shape []); the Python wrapper cannot write these (it writes [1])")

    with ztensor.Writer(out.path("scalar_via_python.zt")) as w:
        w.add_tensor("s", np.array(7, dtype=np.int16))
    finish("scalar_via_python.zt", "reference",
           "np.array(7) through Writer.add_tensor: stored with shape [1], not []")

    with ztensor.Writer(out.path("empty.zt")) as w:
        pass
    finish("empty.zt", "reference", "no tensors: magic, 0x80, u64 1 (17 bytes)")

    with ztensor.Writer(out.path("multi.zt")) as w:
        w.add_tensor("layer.0/weight", sample("float32", [3, 4]))
        w.add_tensor("one_byte", np.array([5], np.uint8))
        w.add_tensor("bf", sample("bfloat16", [5]))
        w.add_tensor("ünïcödé ✓", sample("int64", [2, 1, 2]))
        w.add_tensor("mask", sample("bool", [7]))
    finish("multi.zt", "reference", "five tensors of mixed dtypes, odd sizes (padding), a UTF-8 name")

    # --- synthesized: what the Rust 0.1.x writer can do but 0.1.4's Python API cannot
    # self-check: the builder reproduces a reference file byte for byte
    ref = open(out.path("multi.zt"), "rb").read()
    entries, _ = v01_parse(ref)
    rebuilt = []
    for e in entries:
        meta = IndefMap((k, v) for k, v in e.items())
        rebuilt.append((meta, ref[e["offset"]:e["offset"] + e["size"]]))
    v01_build("/tmp/_v01_selfcheck.zt", rebuilt)
    assert open("/tmp/_v01_selfcheck.zt", "rb").read() == ref, "v0.1 builder self-check"
    os.remove("/tmp/_v01_selfcheck.zt")

    big = np.arange(64, dtype=np.float32) % 5  # compressible
    raw = big.tobytes()
    z = zstd_stream(raw, 3)

    def crc(b):
        return "crc32c:0x%08X" % crc32c(b)

    specs = [
        ("zstd_float32.zt", [(v01_meta("t", "float32", [8, 8], "zstd"), z)],
         "encoding zstd (one frame, level 3, no content size, as zstd::encode_all(.., 0)); no data_endianness"),
        ("checksum_crc32c_raw.zt", [(v01_meta("t", "float32", [8, 8], checksum=crc(raw)), raw)],
         "raw + checksum crc32c:0x%08X over the stored bytes"),
        ("checksum_crc32c_zstd.zt", [(v01_meta("t", "float32", [8, 8], "zstd", checksum=crc(z)), z)],
         "zstd + checksum over the COMPRESSED bytes"),
        ("big_endian.zt", [(v01_meta("be_f32", "float32", [2, 3], endianness="big"),
                            sample("float32", [2, 3]).astype(">f4").tobytes()),
                           (v01_meta("be_i16", "int16", [4], endianness="big"),
                            sample("int16", [4]).astype(">i2").tobytes())],
         "data_endianness big: stored bytes are big-endian; decoded hex in expected.json is little-endian"),
        ("no_endianness_field.zt", [(v01_meta("t", "int32", [3], endianness=None),
                                     np.array([1, -2, 3], "<i4").tobytes())],
         "raw multi-byte tensor without data_endianness: little-endian by default"),
        ("no_layout_field.zt", [(IndefMap((k, v) for k, v in v01_meta("t", "int16", [2]).items() if k != "layout"),
                                 np.array([1, -2], "<i2").tobytes())],
         "no `layout` key: the v0.1 spec does not define one, the 0.1.x reference requires it"),
        ("custom_fields.zt", [(IndefMap(list(v01_meta("t", "uint8", [2]).items()) +
                                        [("author", "x"), ("scale", 0.5), ("tags", ["a", 1])]),
                               b"\x07\x08")],
         "extra custom keys after the standard ones (spec: readers must ignore unknown keys)"),
    ]
    for name, tensors, desc in specs:
        v01_build(out.path(name), tensors)
        finish(name, "synthesized", desc)

    # definite-length maps: the spec allows them, the reference writes indefinite
    raw6 = sample("uint16", [6]).tobytes()
    m = v01_meta("t", "uint16", [6])
    path = out.path("definite_maps.zt")
    v01_build(path, [(m, raw6)])
    data = open(path, "rb").read()
    entries, man = v01_parse(data)
    man2 = cbor_encode([dict(e) for e in entries])
    with open(path, "wb") as f:
        f.write(data[:len(data) - 8 - len(man)] + man2 + struct.pack("<Q", len(man2)))
    finish("definite_maps.zt", "synthesized", "tensor maps with definite length (0xA8) instead of 0xBF..0xFF")

    # --- invalid / edge files: what the 0.1.4 reader does ------------------
    bad = [(v01_meta("t", "float32", [8, 8], checksum="crc32c:0x%08X" % (crc32c(raw) ^ 1)), raw)]
    v01_build(out.path("invalid_checksum_mismatch.zt"), bad)
    finish("invalid_checksum_mismatch.zt", "synthesized", "crc32c does not match the stored bytes",
           valid=False)

    v01_build(out.path("invalid_size_mismatch.zt"), [(v01_meta("t", "float32", [2, 3]), raw[:20])])
    finish("invalid_size_mismatch.zt", "synthesized", "size 20 but shape [2,3] float32 needs 24",
           valid=False)

    p = out.path("invalid_misaligned.zt")
    v01_build(p, [(v01_meta("t", "uint8", [4]), b"\1\2\3\4")])
    data = bytearray(open(p, "rb").read())
    entries, man = v01_parse(bytes(data))
    entries[0]["offset"] = 72
    data[72:76] = b"\1\2\3\4"
    man2 = cbor_encode(entries)
    assert len(man2) == len(man)
    data[len(data) - 8 - len(man):len(data) - 8] = man2
    open(p, "wb").write(bytes(data))
    finish("invalid_misaligned.zt", "synthesized", "offset 72 is not a multiple of 64", valid=False)

    for lay in ("sparsecsr", "sparsecoo"):
        name = "layout_%s.zt" % lay
        m = v01_meta("t", "float32", [2, 3])
        m["layout"] = lay
        if lay == "sparsecsr":  # 0.1.x crate convention: indptr u64, indices u64, values
            blob = np.array([0, 2, 3], "<u8").tobytes() + np.array([0, 2, 1], "<u8").tobytes() + \
                np.array([1.5, 2.5, 3.5], "<f4").tobytes()
        else:  # per nnz: ndim u64 indices then the value
            blob = b"".join(np.array(ix, "<u8").tobytes() + np.array([v], "<f4").tobytes()
                            for ix, v in (([0, 0], 1.5), ([0, 2], 2.5), ([1, 1], 3.5)))
        m["data_endianness"] = "little"
        v01_build(out.path(name), [(m, blob)])
        finish(name, "synthesized",
               "layout %s (0.1.x crate blob convention); not defined by the spec: reject" % lay,
               valid=False)

    out.save({"generated_by": versions()})


# ===========================================================================
# v1.1  (ztensor 1.1.1)
# ===========================================================================

V11_DTYPES = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
              "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint64": "u64",
              "uint32": "u32", "uint16": "u16", "uint8": "u8", "bool": "bool"}
V11_WIDTH = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
             "u64": 8, "u32": 4, "u16": 2, "u8": 1, "bool": 1, "f8_e4m3": 1, "f8_e5m2": 1,
             "complex64": 8, "complex128": 16}


def v11_parse(data):
    assert data[:8] == b"ZTEN1000" and data[-8:] == b"ZTEN1000", "magic"
    n = struct.unpack("<Q", data[-16:-8])[0]
    start = len(data) - 16 - n
    man = data[start:len(data) - 16]
    return cbor_decode(man), man, start


def v11_describe(data):
    m, man, start = v11_parse(data)
    objs = []
    for name, o in m["objects"].items():
        comps = {}
        for role, c in o["components"].items():
            stored = data[c["offset"]:c["offset"] + c["length"]]
            enc = c.get("encoding", "raw")
            dec = zstd_decompress(stored) if enc == "zstd" else stored
            rec = {"dtype": c["dtype"], "encoding": enc, "encoding_field_present": "encoding" in c,
                   "offset": c["offset"], "stored_length": c["length"], "digest": c.get("digest")}
            for extra in ("type", "uncompressed_length"):
                if extra in c:
                    rec[extra] = c[extra]
            rec.update(hexrec(dec))
            comps[role] = rec
        obj = {"name": name, "shape": list(o["shape"]), "layout": o["format"],
               "attributes": plain(o.get("attributes")), "components": comps}
        if o["format"] == "dense":
            obj["dtype"] = o["components"]["data"]["dtype"]
        objs.append(obj)
    return {"version": m["version"], "attributes": plain(m.get("attributes")), "objects": objs,
            "manifest_offset": start, "manifest_length": len(man)}, man


def v11_rewrite(src_data, mutate, path):
    """Copy a reference file with its manifest re-encoded after `mutate(manifest)`."""
    m, man, start = v11_parse(src_data)
    mutate(m)
    man2 = cbor_encode(m)
    with open(path, "wb") as f:
        f.write(src_data[:start] + man2 + struct.pack("<Q", len(man2)) + b"ZTEN1000")


def v11_build(path, version, objects, attributes=None):
    """Assemble a v1.1 file. objects: list of (name, shape, format, attrs, [(role, comp, blob)]).
    Blobs are laid out in list order; manifest maps in serde/BTreeMap order."""
    out = bytearray(b"ZTEN1000")
    objs = {}
    for name, shape, fmt, attrs, comps in objects:
        cmap = {}
        for role, comp, blob in comps:
            out += b"\0" * ((-len(out)) % 64)
            c = {"dtype": comp["dtype"], "offset": len(out), "length": len(blob)}
            for k in ("encoding", "digest", "type", "uncompressed_length"):
                if k in comp:
                    c[k] = comp[k]
            cmap[role] = c
            out += blob
        o = {"shape": list(shape), "format": fmt}
        if attrs is not None:
            o["attributes"] = attrs
        o["components"] = dict(sorted(cmap.items(), key=lambda kv: kv[0].encode()))
        objs[name] = o
    root = {"version": version}
    if attributes is not None:
        root["attributes"] = dict(sorted(attributes.items(), key=lambda kv: kv[0].encode()))
    root["objects"] = dict(sorted(objs.items(), key=lambda kv: kv[0].encode()))
    man = cbor_encode(root)
    out += man + struct.pack("<Q", len(man)) + b"ZTEN1000"
    with open(path, "wb") as f:
        f.write(out)


def gen_v11():
    import ztensor
    from ztensor import ffi, lib

    out = Output("v1.1")

    def component_bytes(r, name, role):
        vp = lib.ztensor_reader_read_tensor_component(r._ptr, name.encode(), role.encode())
        if vp == ffi.NULL:
            raise RuntimeError(ffi.string(lib.ztensor_last_error_message()).decode())
        try:
            return bytes(ffi.buffer(vp.data, vp.len))
        finally:
            lib.ztensor_free_tensor_view(vp)

    def reference_read(path):
        def go():
            r = ztensor.Reader(path)
            res = {}
            for name in r.tensor_names:
                m = r.metadata(name)
                if m.layout == "dense":
                    # Reader.read_tensor(verify_checksum=True) skips the check on the
                    # zero-copy raw path; the native call with verify=1 does not.
                    vp = lib.ztensor_reader_read_tensor(r._ptr, name.encode(), 1)
                    if vp == ffi.NULL:
                        raise RuntimeError(ffi.string(lib.ztensor_last_error_message()).decode())
                    try:
                        b = bytes(ffi.buffer(vp.data, vp.len))
                    finally:
                        lib.ztensor_free_tensor_view(vp)
                    arr = r.read_tensor(name)
                    assert arr.tobytes() == b
                    res[name] = {"layout": "dense", "dtype": m.dtype_str, "shape": list(m.shape),
                                 "bytes": {"data": b}}
                else:
                    roles = {"sparse_csr": ["values", "indices", "indptr"],
                             "sparse_coo": ["values", "coords"],
                             "quantized_group": ["packed_weight", "scales", "zeros"]}[m.layout]
                    res[name] = {"layout": m.layout, "shape": list(m.shape),
                                 "bytes": {k: component_bytes(r, name, k) for k in roles}}
            return res
        return run(go)

    def finish(name, origin, description, valid=True, check=True):
        p = out.path(name)
        data = open(p, "rb").read()
        entry = {"origin": origin, "description": description, "valid": valid}
        st, res = reference_read(p)
        if valid:
            desc, man = v11_describe(data)
            if origin != "synthesized":
                assert cbor_encode(cbor_decode(man)) == man, name
            entry.update(desc)
            if st == "ok":
                if check:
                    for o in desc["objects"]:
                        for role, c in o["components"].items():
                            if "hex" in c:
                                assert res[o["name"]]["bytes"][role].hex() == c["hex"], (name, o["name"], role)
                entry["reference_read"] = "ok"
            else:
                entry["reference_read"] = res
        else:
            entry["reference_read"] = res if st == "error" else "ok (accepted!)"
        out.record(name, entry)

    shape = [2, 3]
    for dt in V01_DTYPES:
        name = "dtype_%s.zt" % V11_DTYPES[dt]
        with ztensor.Writer(out.path(name)) as w:
            w.add_tensor("t", sample(dt, shape))
        finish(name, "reference", "one dense raw %s tensor, shape %s" % (V11_DTYPES[dt], shape))

    zdata = (np.arange(256, dtype=np.int32) % 7).astype(np.float32)
    for level in (1, 3, 19):
        name = "zstd_level%d.zt" % level
        with ztensor.Writer(out.path(name)) as w:
            w.add_tensor("t", zdata.reshape(16, 16), compress=(True if level == 3 else level))
        finish(name, "reference",
               "zstd level %d (%s); one frame, no content size, no frame checksum"
               % (level, "compress=True" if level == 3 else "compress=%d" % level))

    with ztensor.Writer(out.path("zstd_dtypes.zt")) as w:
        for dt in ("bfloat16", "bool", "int8", "uint64"):
            w.add_tensor(dt, sample(dt, [4, 4]), compress=True)
    finish("zstd_dtypes.zt", "reference", "zstd for 1-, 2- and 8-byte dtypes")

    with ztensor.Writer(out.path("zero_size.zt")) as w:
        w.add_tensor("empty_rows", np.zeros((0, 3), np.float32))
        w.add_tensor("after", np.arange(3, dtype=np.int32))
        w.add_tensor("empty_zstd", np.zeros((0,), np.float64), compress=True)
    finish("zero_size.zt", "reference",
           "zero-element tensors, raw (length 0) and zstd (a 9-byte empty frame)")

    w = ztensor.Writer(out.path("scalar.zt"))
    for tname, dt, val, comp in (("s_f32", "float32", 1.5, 0), ("s_i64", "int64", -3, 0),
                                 ("s_bool", "bool", True, 0), ("s_zstd", "float64", 2.0, 3)):
        a = np.ascontiguousarray(np.array([val], dtype=np_dtype(dt)))
        dummy = np.zeros(1, np.uint64)
        st = lib.ztensor_writer_add_tensor(w._ptr, tname.encode(), ffi.cast("uint64_t*", dummy.ctypes.data),
                                          0, dt.encode(), ffi.cast("unsigned char*", a.ctypes.data),
                                          a.nbytes, comp)
        assert st == 0
    w.finalize()
    finish("scalar.zt", "reference-ffi", "true scalars (shape []); Writer.add_tensor would write [1]")

    with ztensor.Writer(out.path("empty.zt")) as w:
        pass
    finish("empty.zt", "reference", "no objects: version + empty objects map")

    vals = np.array([1.5, -2.0, 3.25, 4.0], np.float32)
    with ztensor.Writer(out.path("sparse_csr.zt")) as w:
        # [[1.5, 0, -2.0, 0], [0, 0, 0, 0], [0, 3.25, 0, 4.0]]
        w.add_sparse_csr("m", vals, np.array([0, 2, 1, 3]), np.array([0, 2, 2, 4]), (3, 4))
    finish("sparse_csr.zt", "reference",
           "sparse_csr 3x4, nnz 4, an empty row; indices/indptr always written as u64; "
           "blobs on disk in order values, indices, indptr")

    with ztensor.Writer(out.path("sparse_coo.zt")) as w:
        w.add_sparse_coo("m2", vals, np.array([[0, 0, 2, 2], [0, 2, 1, 3]]), (3, 4))
        w.add_sparse_coo("m3", np.array([7, 8, 9], np.int16),
                         np.array([[0, 1, 1], [2, 0, 1], [3, 3, 0]]), (2, 3, 4))
    finish("sparse_coo.zt", "reference",
           "sparse_coo rank 2 and rank 3; coords u64, structure-of-arrays (all dim-0 indices first)")

    with ztensor.Writer(out.path("multi.zt")) as w:
        w.add_tensor("layer.0/weight", sample("float32", [3, 4]))
        w.add_tensor("one_byte", np.array([5], np.uint8))
        w.add_tensor("compressed", np.tile(np.arange(8, dtype=np.int16), 16), compress=True)
        w.add_sparse_csr("sparse", np.array([1, 2], np.float64), np.array([1, 0]), np.array([0, 1, 2]), (2, 2))
        w.add_tensor("ünïcödé ✓", sample("bfloat16", [5]))
        w.add_tensor("a_first_by_name", sample("bool", [3]))
    finish("multi.zt", "reference",
           "mixed objects; blobs in insertion order, manifest objects sorted by name bytes")

    # --- synthesized ----------------------------------------------------
    # self-check: v11_build reproduces a reference file (dense + sparse, blob order = list order)
    ref = open(out.path("sparse_csr.zt"), "rb").read()
    m, _, _ = v11_parse(ref)
    objs = []
    for oname, o in m["objects"].items():
        order = {"values": 0, "indices": 1, "indptr": 2}
        comps = sorted(o["components"].items(), key=lambda kv: order.get(kv[0], 9))
        objs.append((oname, o["shape"], o["format"], o.get("attributes"),
                     [(role, c, ref[c["offset"]:c["offset"] + c["length"]]) for role, c in comps]))
    v11_build("/tmp/_v11_selfcheck.zt", m["version"], objs)
    assert open("/tmp/_v11_selfcheck.zt", "rb").read() == ref, "v1.1 builder self-check"
    os.remove("/tmp/_v11_selfcheck.zt")

    raw = zdata.tobytes()
    zb = zstd_stream(raw, 3)

    def dig(kind, b):
        return ("crc32c:0x%08X" % crc32c(b)) if kind == "crc32c" else "sha256:" + hashlib.sha256(b).hexdigest()

    for kind in ("crc32c", "sha256"):
        for enc in ("raw", "zstd"):
            blob = raw if enc == "raw" else zb
            comp = {"dtype": "f32", "digest": dig(kind, blob)}
            if enc == "zstd":
                comp["encoding"] = "zstd"
            name = "digest_%s_%s.zt" % (kind, enc)
            v11_build(out.path(name), "1.1.0", [("t", [16, 16], "dense", None, [("data", comp, blob)])])
            finish(name, "synthesized",
                   "digest %s over the STORED (%s) bytes, as the 1.1.x Rust writer computes it"
                   % (kind, "compressed" if enc == "zstd" else "raw"))

    v11_build(out.path("attributes.zt"), "1.1.0",
              [("t", [3], "dense", {"note": "object attrs are any CBOR", "n": 3},
                [("data", {"dtype": "u8"}, b"\1\2\3")])],
              attributes={"framework": "numpy", "license": "MIT", "ünï": "✓"})
    finish("attributes.zt", "synthesized",
           "root attributes (text->text in 1.1.1's model) and object attributes")

    # quantized_group per the spec (1.1.1 cannot write it; its Python reader cannot decode it)
    packed = np.array([0x76543210, 0xFEDCBA98, 0x01234567, 0x89ABCDEF], "<u4").view("<i4")
    v11_build(out.path("quantized_group.zt"), "1.1.0",
              [("q", [2, 16], "quantized_group", {"bits": 4, "group_size": 8, "packing": "8_per_i32"},
                [("packed_weight", {"dtype": "i32"}, packed.tobytes()),
                 ("scales", {"dtype": "f16"}, np.array([0.5, 1, 2, 4], "<f2").tobytes()),
                 ("zeros", {"dtype": "f16"}, np.array([8, 8, 7, 9], "<f2").tobytes())])])
    finish("quantized_group.zt", "synthesized",
           "quantized_group 4-bit, group 8: packed_weight i32 (8 codes per word), scales/zeros f16 per group")

    # version 1.2.0 style fields (type, uncompressed_length) that 1.2.x writes
    v11_build(out.path("v12_fields.zt"), "1.2.0",
              [("t", [8, 8], "dense", None,
                [("data", {"dtype": "f32", "encoding": "zstd", "uncompressed_length": len(raw[:256])},
                  zstd_stream(raw[:256], 3))]),
               ("f8", [4], "dense", None,
                [("data", {"dtype": "u8", "type": "f8_e4m3fn"}, bytes([0x38, 0x40, 0xB8, 0x00]))])])
    finish("v12_fields.zt", "synthesized",
           "version \"1.2.0\" with component fields type and uncompressed_length (unknown to 1.1.1)")

    # dtypes listed by the 1.1 spec that 1.1.1 does not know
    for dt, blob in (("f8_e4m3", bytes([0x38, 0x40, 0xB8, 0x7E])), ("f8_e5m2", bytes([0x3C, 0x40, 0xBC, 0x7B])),
                     ("complex64", np.array([1, 2, -3, 0.5], "<f4").tobytes()),
                     ("complex128", np.array([1, 2], "<f8").tobytes())):
        n = len(blob) // V11_WIDTH[dt]
        v11_build(out.path("spec_dtype_%s.zt" % dt), "1.1.0",
                  [("t", [n], "dense", None, [("data", {"dtype": dt}, blob)])])
        finish("spec_dtype_%s.zt" % dt, "synthesized",
               "dtype %s: in the 1.1 spec table, unknown to the 1.1.1 reader" % dt, check=False)

    # --- invalid --------------------------------------------------------
    base = open(out.path("dtype_f32.zt"), "rb").read()

    def put(name, data, desc):
        open(out.path(name), "wb").write(data)
        finish(name, "synthesized", desc, valid=False)

    v11_build(out.path("invalid_digest_mismatch.zt"), "1.1.0",
              [("t", [16, 16], "dense", None,
                [("data", {"dtype": "f32", "digest": "crc32c:0x%08X" % (crc32c(raw) ^ 1)}, raw)])])
    finish("invalid_digest_mismatch.zt", "synthesized", "crc32c digest off by one bit", valid=False)
    put("invalid_footer_magic.zt", base[:-8] + b"ZTEN0001", "footer magic is not ZTEN1000")
    put("invalid_manifest_size.zt", base[:-16] + struct.pack("<Q", (1 << 30) + 1) + b"ZTEN1000",
        "manifest size field > 1 GiB")
    put("invalid_truncated.zt", base[:-1], "last byte cut off")
    v11_build(out.path("invalid_zstd_short.zt"), "1.1.0",
              [("t", [16, 16], "dense", None,
                [("data", {"dtype": "f32", "encoding": "zstd"}, zstd_stream(raw[:512], 3))])])
    finish("invalid_zstd_short.zt", "synthesized",
           "zstd frame decodes to 512 bytes, shape needs 1024 (reference zero-fills)", valid=False)
    v11_build(out.path("invalid_raw_length.zt"), "1.1.0",
              [("t", [2, 3], "dense", None, [("data", {"dtype": "f32"}, raw[:20])])])
    finish("invalid_raw_length.zt", "synthesized", "raw length 20 for a [2,3] f32 tensor", valid=False)

    def overlap(m):
        m["objects"]["a_first_by_name"]["components"]["data"]["offset"] = \
            m["objects"]["layer.0/weight"]["components"]["data"]["offset"]
    v11_rewrite(open(out.path("multi.zt"), "rb").read(), overlap, out.path("invalid_overlap.zt"))
    finish("invalid_overlap.zt", "synthesized",
           "two components share bytes (same offset, different lengths)", valid=False)

    def misalign(m):
        m["objects"]["t"]["components"]["data"]["offset"] += 4
    v11_rewrite(base, misalign, out.path("invalid_misaligned.zt"))
    finish("invalid_misaligned.zt", "synthesized", "component offset 68", valid=False)

    # --- how 1.1.1 reads the v0.1 vectors (its legacy path) ---------------
    cross = {}
    legacy = os.path.join(HERE, "v0.1", "expected.json")
    if os.path.exists(legacy):
        doc = json.load(open(legacy))
        for fname, e in doc["files"].items():
            st, res = reference_read(os.path.join(HERE, "v0.1", fname))
            if st == "error":
                cross[fname] = "error: " + res
                continue
            if not e["valid"]:
                cross[fname] = "accepted; lists %s" % sorted(res)
                continue
            notes = []
            want = {o["name"]: o for o in e.get("objects", [])}
            for n in sorted(set(want) | set(res)):
                if n not in res:
                    notes.append("%s: not listed" % n)
                elif n not in want:
                    notes.append("%s: listed but not in v0.1 expectations" % n)
                else:
                    c = want[n]["components"]["data"]
                    got = res[n]["bytes"]["data"]
                    if "hex" in c and got.hex() != c["hex"]:
                        notes.append("%s: DIFFERENT bytes %s" % (n, got.hex()))
                    if res[n]["shape"] != want[n]["shape"] and not (want[n]["shape"] == [] and res[n]["shape"] == []):
                        notes.append("%s: shape %s" % (n, res[n]["shape"]))
            cross[fname] = "ok" if not notes else "; ".join(notes)
    out.save({"generated_by": versions(), "reads_v0.1_vectors": cross})


# ===========================================================================
# v2  (ztensor 2.1.2)
# ===========================================================================

V2_DTYPES = ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8"]
V2_WIDTH = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
            "u64": 8, "u32": 4, "u16": 2, "u8": 1}
MAGIC2 = bytes([0x89, 0x5A, 0x54, 0x32, 0x0D, 0x0A, 0x1A, 0x0A])


def v2_parse(data):
    assert data[:8] == MAGIC2 and data[-8:] == MAGIC2, "magic"
    off, length, h, ver, res = struct.unpack("<QQQII", data[-40:-8])
    man = data[off:off + length]
    assert xxhash.xxh3_64_intdigest(man) == h, "manifest hash"
    return cbor_decode(man), man, {"manifest_offset": off, "manifest_length": length,
                                   "manifest_hash": "%016x" % h, "version": ver, "reserved": res}


def v2_describe(data):
    m, man, footer = v2_parse(data)
    assert cbor_encode(m, sort=True) == man, "manifest is not deterministic CBOR"
    objs = []
    for name, o in m["objects"].items():
        parts = {}
        for pname, p in o["parts"].items():
            off, length = p["blob"]
            stored = data[off:off + length]
            rec = {"dtype": p["dtype"], "type": p.get("type"), "encoding": p.get("encoding"),
                   "blob": [off, length], "digest": p.get("digest")}
            if "encoding" in p:
                dec, frames = seekable_decode(stored, p["decoded_length"])
                rec["frames"] = frames
            else:
                dec = stored
            d = p.get("digest")
            if d:
                algo, hx = d.split(":")
                calc = ("%016x" % xxhash.xxh3_64_intdigest(dec)) if algo == "xxh3" else hashlib.sha256(dec).hexdigest()
                rec["digest_ok"] = calc == hx
            rec.update(hexrec(dec))
            parts[pname] = rec
        obj = {"name": name, "shape": list(o["shape"]), "layout": o["layout"],
               "attributes": plain(o.get("attributes")), "components": parts}
        if o["layout"] == "dense":
            obj["dtype"] = o["parts"]["data"]["dtype"]
            obj["type"] = o["parts"]["data"].get("type")
        objs.append(obj)
    return {"footer": footer, "attributes": plain(m.get("attributes")), "objects": objs}, man


def v2_rewrite(src_data, mutate, path, raw_manifest=None, footer_patch=None):
    """Copy a file with its manifest re-encoded (deterministically) after mutate(manifest)."""
    m, man, footer = v2_parse(src_data)
    if mutate:
        mutate(m)
    man2 = raw_manifest if raw_manifest is not None else cbor_encode(m, sort=True)
    off = footer["manifest_offset"]
    fields = [off, len(man2), xxhash.xxh3_64_intdigest(man2), 2, 0]
    if footer_patch:
        footer_patch(fields)
    with open(path, "wb") as f:
        f.write(src_data[:off] + man2 + struct.pack("<QQQII", *fields) + MAGIC2)


def gen_v2():
    import ztensor

    out = Output("v2")

    def reference_read(path):
        def go():
            res = {}
            with ztensor.open(path) as src:
                for name in src.keys():
                    t = src[name]
                    res[name] = {"layout": t.layout, "shape": list(t.shape), "parts": list(t.parts),
                                 "bytes": {p: t[p].tobytes() for p in t.parts},
                                 "verify": t.verify()}
                res["__attributes__"] = src.attributes
            res["__verify__"] = tuple(ztensor.verify(path))
            return res
        return run(go)

    def finish(name, origin, description, valid=True):
        p = out.path(name)
        data = open(p, "rb").read()
        entry = {"origin": origin, "description": description, "valid": valid}
        st, res = reference_read(p)
        if valid:
            desc, man = v2_describe(data)
            entry.update(desc)
            if st == "ok":
                for o in desc["objects"]:
                    for pn, c in o["components"].items():
                        if "hex" in c:
                            assert res[o["name"]]["bytes"][pn].hex() == c["hex"], (name, o["name"], pn)
                        else:
                            assert hashlib.sha256(res[o["name"]]["bytes"][pn]).hexdigest() == c["sha256"]
                checked, undigested = res["__verify__"]
                entry["reference_read"] = "ok"
                entry["reference_verify"] = {"checked": checked, "undigested": undigested}
            else:
                entry["reference_read"] = res
        else:
            entry["reference_read"] = res if st == "error" else "ok (accepted!)"
            entry["reference_stages"] = stages(p)
        out.record(name, entry)

    def stages(path):
        """Where the 2.1.2 reader notices: open, reading bytes, or verify."""
        r = {}
        st, src = run(lambda: ztensor.open(path))
        r["open"] = "ok" if st == "ok" else src
        if st == "ok":
            def read_all():
                for n in src.keys():
                    t = src[n]
                    for p in t.parts:
                        t[p].tobytes()
            st2, e2 = run(read_all)
            r["tobytes"] = "ok" if st2 == "ok" else e2
            st3, e3 = run(lambda: tuple(src.verify()))
            r["verify"] = ("ok %s" % (e3,)) if st3 == "ok" else e3
        return r

    def W(name, **kw):
        kw.setdefault("canonical", False)
        kw.setdefault("align", 4096)
        return ztensor.Writer(out.path(name), **kw)

    def u8(a):
        return np.ascontiguousarray(a).reshape(-1).view(np.uint8)

    shape = [2, 3]
    # One file per kind keeps v2 (4 KiB per blob) small: every storage type in
    # all_dtypes.zt, every registered logical type in logical_types.zt.
    with W("all_dtypes.zt") as w:
        for dt in V2_DTYPES:
            w.add(dt, u8(sample(dt, shape)), shape, dt)
    finish("all_dtypes.zt", "reference",
           "the 12 storage types, one dense raw object each (named by dtype), shape %s, align 4096" % shape)

    with W("single.zt") as w:
        w.add("t", u8(sample("f32", shape)), shape, "f32")
    finish("single.zt", "reference", "one dense f32 [2,3] tensor; the base of most invalid_* files")

    logicals = [
        ("bool", "u8", [2, 3], u8(sample("bool", [2, 3]))),
        ("f8_e4m3fn", "u8", [4], bytes([0x38, 0x40, 0xB8, 0x7E])),
        ("f8_e5m2", "u8", [4], bytes([0x3C, 0x40, 0xBC, 0x7B])),
        ("f8_e4m3fnuz", "u8", [4], bytes([0x40, 0x48, 0xC0, 0x80])),
        ("f8_e5m2fnuz", "u8", [4], bytes([0x40, 0x44, 0xC0, 0x80])),
        ("f8_e8m0", "u8", [4], bytes([0x7F, 0x80, 0x00, 0xFE])),
        ("f4_e2m1", "u8", [5], bytes([0x21, 0xA3, 0x07])),  # 5 nibbles, low nibble first, last high nibble 0
        ("complex64", "f32", [2], np.array([1, 2, -3, 0.5], "<f4").tobytes()),
        ("complex128", "f64", [1], np.array([1, -2], "<f8").tobytes()),
    ]
    with W("logical_types.zt") as w:
        for lt, dt, shp, data in logicals:
            w.add(lt, data, shp, dt, logical=lt)
    finish("logical_types.zt", "reference",
           "the 9 registered logical types (part field `type`), one dense object each, named by type")

    with W("scalar.zt") as w:
        w.add("s_f32", u8(np.array([1.5], np.float32)), [], "f32")
        w.add("s_i64", u8(np.array([-3], np.int64)), [], "i64")
        w.add("s_bool", b"\x01", [], "u8", logical="bool")
    finish("scalar.zt", "reference", "scalars: shape [] (one element)")

    with W("zero_size.zt") as w:
        w.add("empty_rows", b"", [0, 3], "f32")
        w.add("after", u8(np.arange(3, dtype=np.int32)), [3], "i32")
        w.add("empty_zstd", b"", [0], "f64", encoding="zt.zstd-seekable/1")
    finish("zero_size.zt", "reference",
           "zero-element parts: raw blob [off, 0] at the next aligned offset (shared with the next blob); "
           "seekable with zero frames is just the 17-byte seek table")

    zraw = compressible(4096)
    with W("zstd.zt") as w:
        w.add("t", zraw, [1024], "f32", encoding="zt.zstd-seekable/1")
    finish("zstd.zt", "reference", "zt.zstd-seekable/1, one frame (level 3, frame checksum), seek table")

    big = compressible(2 * (1 << 20) + 12345)
    with W("zstd_multiframe.zt") as w:
        w.add("t", big, [len(big)], "u8", encoding="zt.zstd-seekable/1")
    finish("zstd_multiframe.zt", "reference",
           "zt.zstd-seekable/1 over 2 MiB + 12345 bytes: frames of 1 MiB, 1 MiB, 12345")

    with W("sparse_csr.zt") as w:
        vals = np.array([1.5, -2.0, 3.25, 4.0], np.float32)
        w.add_object("m64", [3, 4], {"values": {"dtype": "f32", "data": u8(vals)},
                                     "indices": {"dtype": "u64", "data": u8(np.array([0, 2, 1, 3], np.uint64))},
                                     "indptr": {"dtype": "u64", "data": u8(np.array([0, 2, 2, 4], np.uint64))}},
                     layout="zt.sparse_csr/1")
        w.add_object("m32", [3, 4], {"values": {"dtype": "f32", "data": u8(vals),
                                                "encoding": "zt.zstd-seekable/1"},
                                     "indices": {"dtype": "u32", "data": u8(np.array([0, 2, 1, 3], np.uint32))},
                                     "indptr": {"dtype": "u32", "data": u8(np.array([0, 2, 2, 4], np.uint32))}},
                     layout="zt.sparse_csr/1")
    finish("sparse_csr.zt", "reference",
           "zt.sparse_csr/1 with u64 and u32 indices (one with a zstd-seekable values part); "
           "parts are written in part-name order: indices, indptr, values")

    with W("sparse_coo.zt") as w:
        w.add_object("m2", [3, 4], {"values": {"dtype": "f32", "data": u8(np.array([1.5, -2.0, 3.25, 4.0], np.float32))},
                                    "coords": {"dtype": "u64", "data": u8(np.array([0, 0, 2, 2, 0, 2, 1, 3], np.uint64))}},
                     layout="zt.sparse_coo/1")
        w.add_object("m3", [2, 3, 4], {"values": {"dtype": "i16", "data": u8(np.array([7, 8, 9], np.int16))},
                                       "coords": {"dtype": "u32", "data": u8(np.array([0, 1, 1, 2, 0, 1, 3, 3, 0], np.uint32))}},
                     layout="zt.sparse_coo/1")
    finish("sparse_coo.zt", "reference", "zt.sparse_coo/1 rank 2 (u64 coords) and rank 3 (u32 coords), SoA")

    qattrs = {"bits": 4, "group_size": 8, "axis": 1,
              "packing": {"word": "u32", "order": "lsb_first", "per_word": 8},
              "scale_form": "f16_factors", "zero_point": {"form": "tensor", "packing": "plain"}}
    with W("quant_group.zt") as w:
        w.add_object("q", [2, 16], {
            "data": {"dtype": "u32", "data": u8(np.array([0x76543210, 0xFEDCBA98, 0x01234567, 0x89ABCDEF], np.uint32))},
            "scales": {"dtype": "f16", "data": u8(np.array([0.5, 1, 2, 4], np.float16))},
            "zeros": {"dtype": "u8", "data": bytes([8, 8, 7, 9])}},
            layout="zt.quant_group/1", attributes=qattrs)
        w.add_object("q_implied", [2, 8], {
            "data": {"dtype": "u32", "data": u8(np.array([0x76543210, 0xFEDCBA98], np.uint32))},
            "scales": {"dtype": "f32", "data": u8(np.array([0.25, 0.5], np.float32))}},
            layout="zt.quant_group/1",
            attributes={"bits": 4, "group_size": 0, "axis": 1,
                        "packing": {"word": "u32", "order": "msb_first", "per_word": 8},
                        "scale_form": "f32_factors", "zero_point": {"form": "implied", "value": 8}})
    finish("quant_group.zt", "reference", "zt.quant_group/1: plain zeros part, and implied zero point")

    with W("mx.zt") as w:
        w.add_object("x", [64], {"data": {"dtype": "u8", "data": bytes(range(32)), "logical": "f4_e2m1"},
                                 "scales": {"dtype": "u8", "data": bytes([0x7F, 0x80]), "logical": "f8_e8m0"}},
                     layout="zt.mx/1", attributes={"block_size": 32})
    finish("mx.zt", "reference", "zt.mx/1 (reserved profile): f4_e2m1 data + f8_e8m0 scales per 32 block")

    with W("unknown_layout.zt") as w:
        w.add_object("thing", [4], {"blob": {"dtype": "u8", "data": b"abcd"}},
                     layout="acme.thing/1", attributes={"x": 1})
        w.add("unknown_type", b"\x05", [1], "u8", logical="acme_type")
    finish("unknown_layout.zt", "reference",
           "vendor layout and an unregistered logical type: the 2.1.2 writer accepts both, the reader "
           "exposes them structurally")

    with W("attributes.zt") as w:
        w.set_attributes({"framework": "numpy", "n": 3, "neg": -7, "pi": 3.140625, "big": 1e300,
                          "flag": True, "none": None, "list": [1, "x", [2.5]], "map": {"b": 1, "a": {"z": False}},
                          "ünï": "✓"})
        w.add_object("t", [3], {"data": {"dtype": "u8", "data": b"\1\2\3"}}, layout="dense",
                     attributes={"note": "object attributes", "shape_hint": [1, 3]})
    finish("attributes.zt", "reference",
           "file attributes of every permitted CBOR type (shortest floats, sorted keys) and object attributes")

    with W("multi.zt") as w:
        w.add("layer.0/weight", u8(sample("f32", [3, 4])), [3, 4], "f32")
        w.add("one_byte", b"\x05", [1], "u8")
        w.add("compressed", u8(np.tile(np.arange(8, dtype=np.int16), 16)), [128], "i16",
              encoding="zt.zstd-seekable/1")
        w.add("ünïcödé ✓", u8(sample("bf16", [5])), [5], "bf16")
        w.add("a_first_by_name", u8(sample("bool", [3])), [3], "u8", logical="bool")
        w.add("tied_copy", u8(sample("f32", [3, 4])), [12], "f32")
    finish("multi.zt", "reference",
           "mixed objects in insertion (non-sorted) order; tied_copy has the same bytes as layer.0/weight "
           "and the writer points both at one blob")

    with ztensor.Writer(out.path("canonical.zt")) as w:
        w.add("a", u8(np.arange(4, dtype=np.float32)), [4], "f32")
        w.add("b", u8(np.arange(4, dtype=np.float32)), [2, 2], "f32")
    finish("canonical.zt", "reference",
           "canonical form (default Writer): 64 KiB placement, sorted names, xxh3 digests; a and b "
           "have identical bytes and share one blob; manifest at the next 64 KiB boundary")

    with W("empty.zt") as w:
        pass
    finish("empty.zt", "reference", "no objects, align 4096: magic, zero pad, manifest {objects:{}}, footer")

    # --- synthesized ----------------------------------------------------
    base = open(out.path("multi.zt"), "rb").read()
    m, man, _ = v2_parse(base)
    assert cbor_encode(m, sort=True) == man, "v2 encoder self-check"
    assert seekable_encode(zraw) == open(out.path("zstd.zt"), "rb").read()[4096:4096 + len(seekable_encode(zraw))]

    def strip_digests(m):
        for o in m["objects"].values():
            for p in o["parts"].values():
                p.pop("digest", None)
    v2_rewrite(base, strip_digests, out.path("no_digest.zt"))
    finish("no_digest.zt", "synthesized", "multi.zt without any digest (optional field)")

    def sha_digests(m):
        for o in m["objects"].values():
            for p in o["parts"].values():
                off, length = p["blob"]
                dec = base[off:off + length]
                if "encoding" in p:
                    dec, _ = seekable_decode(dec, p["decoded_length"])
                p["digest"] = "sha256:" + hashlib.sha256(dec).hexdigest()
    v2_rewrite(base, sha_digests, out.path("digest_sha256.zt"))
    finish("digest_sha256.zt", "synthesized", "multi.zt with sha256 digests over the decoded bytes")

    # --- invalid --------------------------------------------------------
    small = open(out.path("single.zt"), "rb").read()

    def put(name, data, desc):
        open(out.path(name), "wb").write(data)
        finish(name, "synthesized", desc, valid=False)

    def bad(name, desc, mutate=None, raw_manifest=None, footer_patch=None, src=small):
        v2_rewrite(src, mutate, out.path(name), raw_manifest=raw_manifest, footer_patch=footer_patch)
        finish(name, "synthesized", desc, valid=False)

    mm, sman, sfoot = v2_parse(small)
    flipped = bytearray(small)
    flipped[sfoot["manifest_offset"] + 5] ^= 0x01
    put("invalid_manifest_hash.zt", bytes(flipped), "one manifest byte flipped; footer hash mismatch")
    bad("invalid_footer_version.zt", "footer version 3", footer_patch=lambda f: f.__setitem__(3, 3))
    v2_rewrite(small, None, out.path("footer_reserved_nonzero.zt"), footer_patch=lambda f: f.__setitem__(4, 7))
    finish("footer_reserved_nonzero.zt", "synthesized",
           "footer reserved u32 = 7: writers must write 0 but readers MUST ignore it, so this is valid")
    put("invalid_truncated.zt", small[:-1], "last byte missing")
    # non-deterministic CBOR
    bad("invalid_cbor_unsorted.zt", "manifest keys in insertion order, not sorted", raw_manifest=cbor_encode(
        {"objects": {"t": {"shape": [2, 3], "layout": "dense", "parts": {"data": {
            "dtype": "f32", "blob": mm["objects"]["t"]["parts"]["data"]["blob"],
            "digest": mm["objects"]["t"]["parts"]["data"]["digest"]}}}}}))
    indef = IndefMap(objects=mm["objects"])
    bad("invalid_cbor_indefinite.zt", "root map with indefinite length", raw_manifest=cbor_encode(indef, sort=True))
    nonshort = bytearray(sman)
    # re-encode shape [2,3] as [0x18 0x02, 3] (non-shortest head) by hand
    i = nonshort.find(b"\x65shape\x82\x02\x03")
    assert i >= 0
    nonshort[i:i + 9] = b"\x65shape\x82\x18\x02\x03"
    bad("invalid_cbor_nonshortest.zt", "integer 2 encoded as 0x18 0x02", raw_manifest=bytes(nonshort))

    def setp(path, value):
        def f(m):
            p = m["objects"]["t"]["parts"]["data"]
            if value is None:
                p.pop(path)
            else:
                p[path] = value
        return f
    blob = mm["objects"]["t"]["parts"]["data"]["blob"]
    bad("invalid_misaligned.zt", "blob offset 4100", setp("blob", [blob[0] + 4, blob[1]]))
    bad("invalid_blob_oob.zt", "blob end beyond the footer", setp("blob", [blob[0], 1 << 20]))
    bad("invalid_blob_arity.zt", "blob with 3 elements", setp("blob", [blob[0], blob[1], 0]))
    bad("invalid_dense_size.zt", "dense part 24 bytes but shape [2,3] f32 with type complex64 needs 48",
        setp("type", "complex64"))
    bad("invalid_dtype.zt", "dtype 'bool' is not a storage type in v2", setp("dtype", "bool"))
    bad("invalid_digest_mismatch.zt", "xxh3 digest of other bytes", setp("digest", "xxh3:0123456789abcdef"))
    bad("invalid_digest_uppercase.zt", "digest hex in upper case",
        setp("digest", mm["objects"]["t"]["parts"]["data"]["digest"].upper().replace("XXH3", "xxh3")))
    bad("invalid_encoding_unknown.zt", "encoding acme-zip/1 (unknown) with decoded_length",
        lambda m: m["objects"]["t"]["parts"]["data"].update({"encoding": "acme-zip/1", "decoded_length": 24}))
    bad("invalid_decoded_length_missing.zt", "encoding present, decoded_length absent",
        setp("encoding", "zt.zstd-seekable/1"))
    bad("invalid_shard_undeclared.zt", "part names shard '00001' with no shards table", setp("shard", "00001"))
    bad("invalid_empty_parts.zt", "object with no parts", lambda m: m["objects"]["t"].__setitem__("parts", {}))
    bad("invalid_empty_name.zt", "object name ''",
        lambda m: m.__setitem__("objects", {"": m["objects"]["t"]}))

    with ztensor.Writer("/tmp/_zt_bool.zt", canonical=False, align=4096) as w:
        w.add("t", u8(sample("bool", [2, 3])), [2, 3], "u8", logical="bool")
    bool_src = open("/tmp/_zt_bool.zt", "rb").read()
    os.remove("/tmp/_zt_bool.zt")
    bm, _, _ = v2_parse(bool_src)
    boff = bm["objects"]["t"]["parts"]["data"]["blob"][0]
    bb = bytearray(bool_src)
    bb[boff] = 2
    put("invalid_bool_value.zt", bytes(bb), "bool byte 0x02 (digest matches the original bytes: also a digest error)")

    def fix_bool_digest(m):
        p = m["objects"]["t"]["parts"]["data"]
        o, n = p["blob"]
        p["digest"] = "xxh3:%016x" % xxhash.xxh3_64_intdigest(bytes(bb[o:o + n]))
    bad("invalid_bool_value_digest_ok.zt", "bool byte 0x02 with a matching digest", fix_bool_digest,
        src=bytes(bb))

    # overlap: two parts partially overlapping
    def partial_overlap(m):
        o = m["objects"]
        b1 = o["layer.0/weight"]["parts"]["data"]["blob"]
        o["one_byte"]["parts"]["data"]["blob"] = [b1[0], 1]
    bad("invalid_partial_overlap.zt", "one_byte's blob is the first byte of layer.0/weight's blob",
        partial_overlap, src=base)

    zs = open(out.path("zstd.zt"), "rb").read()
    zm, _, _ = v2_parse(zs)
    zoff, zlen = zm["objects"]["t"]["parts"]["data"]["blob"]
    zb = bytearray(zs)
    zb[zoff + 10] ^= 0xFF
    put("invalid_zstd_corrupt_frame.zt", bytes(zb), "a byte inside the zstd frame flipped")
    bad("invalid_zstd_decoded_length.zt", "decoded_length 4095 but the seek table says 4096",
        lambda m: m["objects"]["t"]["parts"]["data"].__setitem__("decoded_length", 4095), src=zs)

    for legacy in ("v0.1", "v1.1"):
        lp = os.path.join(HERE, legacy, "dtype_%s.zt" % ("float32" if legacy == "v0.1" else "f32"))
        if os.path.exists(lp):
            name = "foreign_%s.zt" % legacy.replace(".", "")
            put(name, open(lp, "rb").read(), "a %s file: 2.1.2 does not read it" % legacy)

    out.save({"generated_by": versions()})


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("v0.1", "v1.1", "v2"):
        sys.exit(__doc__)
    gen = sys.argv[1]
    want = {"v0.1": "0.1.", "v1.1": "1.1.", "v2": "2."}[gen]
    have = importlib.metadata.version("ztensor")
    if not have.startswith(want):
        sys.exit("generation %s needs ztensor %sx in this interpreter, found %s" % (gen, want, have))
    {"v0.1": gen_v01, "v1.1": gen_v11, "v2": gen_v2}[gen]()


if __name__ == "__main__":
    main()
