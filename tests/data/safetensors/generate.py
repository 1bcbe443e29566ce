"""Regenerates the safetensors test vectors in this folder with the reference `safetensors`
package (PyPI, pinned in tests/python/requirements.txt).

    python tests/data/safetensors/generate.py

Each `.safetensors` file is written by the reference writer; `expected.json` records, per
file, the metadata and each tensor's name, header dtype, shape and bytes (hex), so the Rust
tests can check that we read the same values and that our writer reproduces the same bytes.
"""

import ctypes
import json
import pathlib

import numpy as np
import safetensors
from safetensors import TensorSpec, serialize

HERE = pathlib.Path(__file__).resolve().parent

# Reference dtype string -> bytes per storage element. float4_e2m1fn_x2 stores two F4 values
# per byte and the reference doubles the last dimension in the header.
DTYPES = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float16": 2, "float32": 4, "float64": 8, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1, "float4_e2m1fn_x2": 1, "complex64": 8,
}


def tensor_bytes(rng, dtype, shape):
    n = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype]
    raw = rng.integers(0, 256, size=n, dtype=np.uint8)
    if dtype == "bool":
        raw = raw % 2
    return raw.tobytes()


def write(name, tensors, metadata=None):
    """tensors: list of (tensor name, reference dtype, storage shape, bytes)."""
    keep = []
    specs = {}
    for tname, dtype, shape, data in tensors:
        buf = ctypes.create_string_buffer(data, len(data) or 1)
        keep.append(buf)
        specs[tname] = TensorSpec(
            dtype=dtype, shape=list(shape), data_ptr=ctypes.addressof(buf), data_len=len(data)
        )
    blob = serialize(specs, metadata)
    (HERE / name).write_bytes(blob)
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + n])
    out = []
    for tname, _dtype, _shape, data in tensors:
        h = header[tname]
        assert h["data_offsets"][1] - h["data_offsets"][0] == len(data)
        out.append({"name": tname, "dtype": h["dtype"], "shape": h["shape"], "hex": data.hex()})
    return {
        "file": name,
        "metadata": metadata,
        "tensors": out,
        # The reference writes metadata keys in hash-map order: bytes only match for <= 1 key.
        "byte_identical": metadata is None or len(metadata) <= 1,
    }


def main():
    rng = np.random.default_rng(20261122)
    cases = []
    for dtype in DTYPES:
        tensors = [
            ("matrix", dtype, (3, 4), None),
            ("scalar", dtype, (), None),
            ("empty", dtype, (0, 5), None),
            ("vector", dtype, (6,), None),
        ]
        if dtype == "float4_e2m1fn_x2":
            tensors[1] = ("scalar", dtype, (1,), None)
        tensors = [(n, d, s, tensor_bytes(rng, d, s)) for n, d, s, _ in tensors]
        cases.append(write(f"dtype_{dtype}.safetensors", tensors))

    mixed = [
        ("model.layers.0.weight", "float32", (4, 4)),
        ("model.layers.0.bias", "float32", (4,)),
        ("model.layers.10.weight", "bfloat16", (2, 3)),
        ("model.layers.2.weight", "float16", (2, 3)),
        ("ids", "int64", (5,)),
        ("mask", "bool", (7,)),
        ("z", "uint8", (0,)),
        ("z2", "uint8", (0,)),
    ]
    mixed = [(n, d, s, tensor_bytes(rng, d, s)) for n, d, s in mixed]
    cases.append(write("mixed_meta1.safetensors", mixed, {"format": "pt"}))
    cases.append(
        write(
            "mixed_meta3.safetensors",
            mixed,
            {"format": "pt", "note": "quote \" backslash \\ tab \t é", "config": '{"a": [1, 2]}'},
        )
    )
    one = [("t", "uint8", (1,), b"\x07")]
    cases.append(write("empty_meta.safetensors", one, {}))
    # A reference bug kept as a vector: zero tensors with an empty metadata map serialize to
    # the invalid header `{},"__metadata__":{}}`. Readers (theirs and ours) must reject it.
    (HERE / "reference_invalid_empty_meta.safetensors").write_bytes(serialize({}, {}))
    cases.append(write("empty.safetensors", []))
    odd = [
        ("名前.重み", "float32", (2,)),
        ('quote"back\\slash', "int8", (3,)),
        ("ctrl\x01\x1f\n\ttab", "uint8", (1,)),
        ("slash/and space", "int16", (2,)),
        ("", "uint8", (1,)),
    ]
    odd = [(n, d, s, tensor_bytes(rng, d, s)) for n, d, s in odd]
    cases.append(write("odd_names.safetensors", odd))

    manifest = {"generator": f"safetensors {safetensors.__version__}", "cases": cases}
    (HERE / "expected.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
