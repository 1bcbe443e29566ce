#!/usr/bin/env python3
"""Re-implementation of weight-inspect's "structural hash" (las7/weight-inspect).

structural_hash = hex(sha256(serde_json::to_string(&Artifact)))

Artifact is serialized by serde_json in *struct declaration order* (not sorted):
  {"format":F[,"gguf_version":V],"metadata":{...},"tensors":{...}}
metadata / tensors are BTreeMap<String,_>  -> keys sorted byte-wise (UTF-8).
Each tensor is a struct -> fields in declaration order:
  {"name":N,"dtype":D,"shape":[...],"byte_length":L}
Every metadata value is a JSON *string* that holds an inner text encoding.

Usage:
  python3 wi_hash.py                 # self-test: published vector
  python3 wi_hash.py FILE [...]      # hash .gguf / .safetensors files
  python3 wi_hash.py --json FILE     # also print the canonical JSON
Flag --old-escape: use the older escape rule (non-ASCII -> \\uXXXX) found in
earlier revisions; default is the latest revision (non-ASCII kept raw).
"""
import hashlib
import json
import math
import struct
import sys

OLD_ESCAPE = False  # set by --old-escape

# --------------------------------------------------------------------------
# outer JSON (serde_json compact) helpers
# --------------------------------------------------------------------------

def jstr(s):
    """serde_json string literal: escapes " \\ \\b \\f \\n \\r \\t and other
    0x00-0x1F as \\u00xx (lower-case hex); 0x7F and non-ASCII left raw.
    Python's json.dumps(ensure_ascii=False) does exactly the same."""
    return json.dumps(s, ensure_ascii=False)


def utf8_sorted(keys):
    # Rust String Ord == byte-wise UTF-8 order (== code point order)
    return sorted(keys, key=lambda k: k.encode("utf-8"))

# --------------------------------------------------------------------------
# inner metadata value encoding (CanonicalSerializer::serialize_value)
# values are tagged tuples: ("null",), ("bool", b), ("int", i),
# ("float", u64_bits), ("f32", f64_bits_of_widened_value), ("str", s),
# ("array", [values...])
# --------------------------------------------------------------------------

def escape_inner(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == '\\':
            out.append('\\\\')
        elif ch == '\n':
            out.append('\\n')
        elif ch == '\r':
            out.append('\\r')
        elif ch == '\t':
            out.append('\\t')
        elif o < 0x20 or o == 0x7F:          # char::is_ascii_control
            out.append('\\u%04x' % o)
        elif OLD_ESCAPE and o > 0x7E:         # older revisions only
            out.append('\\u%04x' % o)         # NB: {:04x} -> 5+ digits above U+FFFF
        else:
            out.append(ch)
    return ''.join(out)


def encode_value(v):
    tag = v[0]
    if tag == "null":
        return "null"
    if tag == "bool":
        return "true" if v[1] else "false"
    if tag == "int":                      # all integer kinds, already i64
        return str(v[1])
    if tag == "float":                    # f64 -> decimal of to_bits() (u64)
        return str(v[1])
    if tag == "f32":                      # f32 widened to f64 -> "f32:" + bits
        return "f32:" + str(v[1])
    if tag == "str":
        return '"' + escape_inner(v[1]) + '"'
    if tag == "array":
        return "[" + ",".join(encode_value(x) for x in v[1]) + "]"
    raise ValueError(tag)


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f32bits_to_f64bits(b32):
    """Rust `f32 -> f64` (From/as) on x86_64/aarch64: exact for non-NaN;
    NaN: sign kept, payload shifted left 29, quiet bit forced."""
    sign = b32 >> 31
    exp = (b32 >> 23) & 0xFF
    man = b32 & 0x7FFFFF
    if exp == 0xFF and man != 0:
        return (sign << 63) | (0x7FF << 52) | (1 << 51) | (man << 29)
    return f64_bits(struct.unpack("<f", struct.pack("<I", b32))[0])


def to_i64(u):
    u &= 0xFFFFFFFFFFFFFFFF
    return u - (1 << 64) if u >= (1 << 63) else u

# --------------------------------------------------------------------------
# canonical JSON of the Artifact
# --------------------------------------------------------------------------

def canonical_json(fmt, gguf_version, metadata, tensors):
    """fmt: 'gguf' | 'safetensors' | 'onnx'; gguf_version: int or None;
    metadata: {key: tagged value}; tensors: {name: (dtype, shape, byte_length)}"""
    parts = ['{"format":', jstr(fmt)]
    if gguf_version is not None:               # skip_serializing_if is_none
        parts += [',"gguf_version":', str(gguf_version)]
    parts.append(',"metadata":{')
    parts.append(",".join(jstr(k) + ":" + jstr(encode_value(metadata[k]))
                          for k in utf8_sorted(metadata)))
    parts.append('},"tensors":{')
    items = []
    for name in utf8_sorted(tensors):
        dtype, shape, blen = tensors[name]
        items.append(jstr(name) + ':{"name":' + jstr(name) + ',"dtype":' + jstr(dtype)
                     + ',"shape":[' + ",".join(str(d) for d in shape) + ']'
                     + ',"byte_length":' + str(blen) + '}')
    parts.append(",".join(items))
    parts.append('}}')
    return "".join(parts)


def structural_hash(canon):
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def short_id(fmt, gguf_version, h):
    # main.rs `id`: wi:{format lower}:{gguf_version or 0}:{first 8 hex}
    return "wi:%s:%d:%s" % (fmt, gguf_version if gguf_version is not None else 0, h[:8])

# --------------------------------------------------------------------------
# GGUF
# --------------------------------------------------------------------------

GGUF_DTYPES = {
    0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0",
    9: "q8_1", 10: "q2_k", 11: "q3_k", 12: "q4_k", 13: "q5_k", 14: "q6_k",
    15: "q8_k", 16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s",
    20: "iq4_nl", 21: "iq3_s", 22: "iq2_s", 23: "iq4_xs", 24: "i8", 25: "i16",
    26: "i32", 27: "i64", 28: "f64", 29: "iq1_m", 30: "bf16", 34: "tq1_0",
    35: "tq2_0", 39: "mxfp4",
}
# only these have a byte_length; every other type id (quantized/unknown) -> 0
GGUF_ELEM_SIZE = {0: 4, 26: 4, 1: 2, 25: 2, 30: 2, 24: 1, 27: 8, 28: 8}
U64 = 0xFFFFFFFFFFFFFFFF


def gguf_dtype_str(t):
    return GGUF_DTYPES.get(t, "unknown_%d" % t)


def gguf_byte_length(shape, t):
    elements = 1
    for d in shape:
        elements = elements * d
        if elements > U64:          # checked_mul(..).unwrap_or(0)
            elements = 0
    size = GGUF_ELEM_SIZE.get(t)
    if size is None:
        return 0
    return (elements * size) & U64  # release build: wrapping multiply


class GGUFError(Exception):
    pass


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, n):
        if self.p + n > len(self.d):
            raise GGUFError("unexpected EOF")
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def u(self, fmt):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        n = self.u("Q")
        if n == 0:
            return ""
        if n > 1_000_000:
            raise GGUFError("string too long")
        try:
            return self.take(n).decode("utf-8")  # strict UTF-8
        except UnicodeDecodeError:
            raise GGUFError("invalid UTF-8")


def gguf_scalar(r, t):
    if t == 0: return ("int", r.u("B"))
    if t == 1: return ("int", r.u("b"))
    if t == 2: return ("int", r.u("H"))
    if t == 3: return ("int", r.u("h"))
    if t == 4: return ("int", r.u("I"))
    if t == 5: return ("int", r.u("i"))
    if t == 6: return ("f32", f32bits_to_f64bits(r.u("I")))
    if t == 7: return ("bool", r.u("B") != 0)
    if t == 8: return ("str", r.string())
    return None


def parse_gguf(data):
    r = Reader(data)
    if r.u("I") != 0x46554747:
        raise GGUFError("invalid magic")
    version = r.u("I")
    if version > 4:
        raise GGUFError("unsupported version")
    n_tensors = r.u("Q")
    if n_tensors > 100_000:
        raise GGUFError("too many tensors")
    n_kv = r.u("Q")
    if n_kv > 10_000:
        raise GGUFError("too many kv")
    metadata = {}
    for _ in range(n_kv):
        key = r.string()
        t = r.u("I")
        v = gguf_scalar(r, t)
        if v is None:
            if t == 9:
                et = r.u("I")
                n = r.u("Q")
                if n > 100_000:
                    raise GGUFError("array too large")
                arr = []
                for _ in range(n):
                    x = gguf_scalar(r, et)   # only element types 0..8 accepted
                    if x is None:
                        raise GGUFError("unsupported array element type %d" % et)
                    arr.append(x)
                v = ("array", arr)
            elif t == 10:
                v = ("int", to_i64(r.u("Q")))   # u64 wraps to negative i64
            elif t == 11:
                v = ("int", r.u("q"))
            elif t == 12:
                v = ("float", r.u("Q"))         # raw f64 bits
            else:
                raise GGUFError("bad value type %d" % t)
        metadata[key] = v                        # duplicate key: last wins
    tensors = {}
    for _ in range(n_tensors):
        name = r.string()
        nd = r.u("I")
        if nd > 32:
            raise GGUFError("too many dims")
        shape = [r.u("Q") for _ in range(nd)]   # file order, not reversed
        t = r.u("I")
        r.u("Q")                                 # offset, ignored
        tensors[name] = (gguf_dtype_str(t), shape, gguf_byte_length(shape, t))
    return "gguf", version, metadata, tensors

# --------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------

def ryu_fmt(x):
    """serde_json 1.0.149's f64 text (zmij, shortest round-trip digits):
    fixed notation while -5 < decimal-point position <= 16, else d.ddde+XX /
    d.ddde-XX (explicit '+', no zero padding); integral values end in '.0'."""
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    s = repr(abs(x))                      # shortest round-trip digits
    mant, _, e = s.partition("e")
    e = int(e) if e else 0
    ip, _, fp = mant.partition(".")
    # value = int(ip+fp) * 10**(e - len(fp)); strip to digits d * 10**k
    all_digits = ip + fp
    exp10 = e - len(fp)
    all_digits = all_digits.lstrip("0")
    while all_digits.endswith("0"):
        all_digits = all_digits[:-1]
        exp10 += 1
    d, k = all_digits, exp10
    n = len(d)
    kk = n + k
    sign = "-" if x < 0 else ""
    if 0 <= k and kk <= 16:
        out = d + "0" * k + ".0"
    elif 0 < kk <= 16:
        out = d[:kk] + "." + d[kk:]
    elif -5 < kk <= 0:
        out = "0." + "0" * (-kk) + d
    else:
        ex = kk - 1
        out = d[0] + ("." + d[1:] if n > 1 else "") + "e" + ("+" if ex >= 0 else "-") + str(abs(ex))
    return sign + out


class _Num:
    """keeps the literal so we can mimic serde_json's number classes"""
    __slots__ = ("lit",)
    def __init__(self, lit):
        self.lit = lit


POW10 = [float("1e%d" % i) for i in range(309)]


def _ovf(a, b, c):
    # serde_json's overflow!(a * 10 + b, c)
    return a >= c // 10 and (a > c // 10 or b > c % 10)


def _f64_from_parts(positive, significand, exponent):
    """serde_json (default features, no float_roundtrip) -- NOT correctly
    rounded; emulated operation by operation with IEEE doubles."""
    f = float(significand)
    while True:
        idx = abs(exponent)
        if idx < len(POW10):
            if exponent >= 0:
                f *= POW10[idx]
                if math.isinf(f):
                    raise ValueError("number out of range")
            else:
                f /= POW10[idx]
            break
        if f == 0.0:
            break
        if exponent >= 0:
            raise ValueError("number out of range")
        f /= 1e308
        exponent += 308
    return f if positive else -f


def _serde_number(lit):
    """-> ('u', int) | ('i', int) | ('f', float), following serde_json 1.0.149's
    number parser exactly (integers fitting u64 / i64 stay integers; "-0"
    becomes f64 -0.0; floats use its fast, not-always-correctly-rounded path)."""
    p = 0
    positive = True
    if lit[0] == "-":
        positive = False
        p = 1
    sig = 0
    exp = 0
    n = len(lit)
    # integer part
    while p < n and lit[p].isdigit():
        d = ord(lit[p]) - 48
        if _ovf(sig, d, U64):
            # parse_long_integer: drop further integer digits, count them
            while p < n and lit[p].isdigit():
                exp += 1
                p += 1
            break
        sig = sig * 10 + d
        p += 1
    if p == n and exp == 0:
        if positive:
            return ("u", sig)
        if sig == 0 or sig > (1 << 63):
            return ("f", -float(sig))
        return ("i", -sig)
    if p < n and lit[p] == ".":
        p += 1
        overflowed = False   # checked afresh per digit (parse_decimal)
        while p < n and lit[p].isdigit():
            d = ord(lit[p]) - 48
            if not overflowed and _ovf(sig, d, U64):
                overflowed = True
            if not overflowed:
                sig = sig * 10 + d
                exp -= 1
            p += 1
    if p < n and lit[p] in "eE":
        p += 1
        pos_exp = True
        if lit[p] in "+-":
            pos_exp = lit[p] == "+"
            p += 1
        e = 0
        while p < n:
            d = ord(lit[p]) - 48
            if _ovf(e, d, 2**31 - 1):
                if sig != 0 and pos_exp:
                    raise ValueError("number out of range")
                return ("f", 0.0 if positive else -0.0)
            e = e * 10 + d
            p += 1
        exp = exp + e if pos_exp else exp - e
        exp = max(-(2**31), min(2**31 - 1, exp))     # saturating
    return ("f", _f64_from_parts(positive, sig, exp))


def _load_json(text):
    def _bad(c):
        raise ValueError("non-JSON constant " + c)   # serde_json rejects NaN/Infinity
    return json.loads(text, parse_int=_Num, parse_float=_Num, parse_constant=_bad)


def serde_to_string(v):
    """serde_json::Value::to_string (compact; object keys sorted, since the
    crate does not enable preserve_order)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, _Num):
        kind, x = _serde_number(v.lit)
        return str(x) if kind in ("i", "u") else ryu_fmt(x)
    if isinstance(v, str):
        return jstr(v)
    if isinstance(v, list):
        return "[" + ",".join(serde_to_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(jstr(k) + ":" + serde_to_string(v[k])
                              for k in utf8_sorted(v)) + "}"
    raise TypeError(type(v))


class STError(Exception):
    pass


def _as_u64(v):
    if isinstance(v, _Num):
        kind, x = _serde_number(v.lit)
        if kind == "u":
            return x
        if kind == "i" and x >= 0:
            return x
    return None


def parse_safetensors(data):
    if len(data) < 8:
        raise STError("EOF")
    n = struct.unpack("<Q", data[:8])[0]
    if n > 100 * 1024 * 1024:
        raise STError("header too large")
    if len(data) < 8 + n:
        raise STError("EOF")
    try:
        obj = _load_json(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise STError("invalid safetensors JSON header")
    if not isinstance(obj, dict):
        raise STError("invalid safetensors JSON header")
    metadata, tensors = {}, {}
    for key, value in obj.items():
        if key == "__metadata__":
            if isinstance(value, dict):
                for mk, mv in value.items():
                    if isinstance(mv, str):
                        cv = ("str", mv)
                    elif isinstance(mv, _Num):
                        kind, x = _serde_number(mv.lit)
                        if kind in ("i", "u") and -(1 << 63) <= x < (1 << 63):
                            cv = ("int", x)          # as_i64()
                        else:
                            cv = ("float", f64_bits(float(x)))  # as_f64()
                    elif mv is True or mv is False:
                        cv = ("bool", mv)
                    elif mv is None:
                        cv = ("null",)
                    else:                             # array / object
                        cv = ("str", serde_to_string(mv))
                    metadata[mk] = cv
        elif isinstance(value, dict):
            dt = value.get("dtype")
            if not isinstance(dt, str):
                raise STError("missing dtype")
            sh = value.get("shape")
            if not isinstance(sh, list):
                raise STError("missing shape")
            shape = []
            for x in sh:
                u = _as_u64(x)
                if u is None:
                    raise STError("invalid shape")
                shape.append(u)
            off = value.get("data_offsets")
            if not isinstance(off, list) or len(off) < 2:
                raise STError("missing data_offsets")
            a, b = _as_u64(off[0]), _as_u64(off[1])
            if a is None or b is None:
                raise STError("bad data_offsets")
            if b <= a:
                raise STError("invalid byte length")
            tensors[key] = (dt.lower(), shape, b - a)
        # any other non-object top-level value is ignored
    return "safetensors", None, metadata, tensors

# --------------------------------------------------------------------------

def hash_bytes(data):
    if data[:4] == b"GGUF":
        art = parse_gguf(data)
    else:
        art = parse_safetensors(data)
    canon = canonical_json(*art)
    h = structural_hash(canon)
    return art, canon, h


def published_vector_file():
    """Byte-identical to scripts/create_test_fixtures.py::create_minimal_gguf
    (tests/fixtures/tiny.gguf)."""
    b = bytearray(b"GGUF")
    b += struct.pack("<IQQ", 3, 1, 1)
    b += struct.pack("<Q", 20) + b"general.architecture"
    b += struct.pack("<I", 8) + struct.pack("<Q", 5) + b"llama"
    name = b"test.weight.0"
    b += struct.pack("<Q", len(name)) + name
    b += struct.pack("<I", 2) + struct.pack("<QQ", 64, 128)
    b += struct.pack("<I", 0) + struct.pack("<Q", 0)
    return bytes(b)


EXPECTED = "d775e08a3e69f1edce0f3230ecc28841dd1c871f467529a0a8e7aa361b671202"


def main(argv):
    global OLD_ESCAPE
    show_json = "--json" in argv
    OLD_ESCAPE = "--old-escape" in argv
    files = [a for a in argv if not a.startswith("--")]
    if not files:
        art, canon, h = hash_bytes(published_vector_file())
        print(canon)
        print(h)
        print(short_id(art[0], art[1], h))
        assert h == EXPECTED, "MISMATCH"
        print("OK: matches published vector")
        return
    for f in files:
        with open(f, "rb") as fh:
            art, canon, h = hash_bytes(fh.read())
        if show_json:
            print(canon)
        print(h, short_id(art[0], art[1], h), f)


if __name__ == "__main__":
    main(sys.argv[1:])
