"""Builds the seed corpora of the fuzz targets from the test vectors in tests/data.

fuzz/seeds/<target>/ is rewritten each run; fuzz/corpus/<target>/ (what libFuzzer learns)
is left alone. Called by scripts/fuzz.
"""
import pathlib
import shutil
import struct

root = pathlib.Path(__file__).resolve().parent.parent
seeds = root / "fuzz" / "seeds"
shutil.rmtree(seeds, ignore_errors=True)


def put(target, name, data):
    d = seeds / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


for f in sorted((root / "tests" / "data" / "safetensors").glob("*.safetensors")):
    data = f.read_bytes()
    put("safetensors_file", f.name, data)
    if len(data) >= 8:
        (n,) = struct.unpack("<Q", data[:8])
        if n <= len(data) - 8:
            rest = len(data) - 8 - n
            if rest < 65536:
                put("safetensors_header", f.name, struct.pack("<H", rest) + data[8 : 8 + n])

for f in sorted((root / "tests" / "data" / "gguf").glob("*.gguf")):
    if f.stat().st_size < 65536:
        put("gguf", f.name, f.read_bytes())

for f in sorted((root / "tests" / "data" / "ztensor").glob("*/*.zt")):
    if f.stat().st_size < 65536:
        put("ztensor", f"{f.parent.name}_{f.name}", f.read_bytes())

# Dataset metadata: a selector byte (even: manifest JSON, odd: index Parquet) then the bytes.
for f in sorted((root / "tests" / "data" / "dataset").glob("manifest_*.json")):
    put("dataset", f.name, b"\0" + f.read_bytes())
for f in sorted((root / "tests" / "data" / "dataset").glob("index_*.parquet")):
    put("dataset", f.name, b"\1" + f.read_bytes())

# Batch-mode writes of Parquet input (both ways: from pages and through the reader).
for f in sorted((root / "tests" / "data" / "dataset").glob("input_*.parquet")):
    put("dataset_write", f.name, f.read_bytes())

# Casts: a selector byte then float bits of every kind (normal, subnormal, ties, inf, nan).
specials = [0.0, -0.0, 1.0, 65504.0, 65520.0, 5.960464477539063e-08, 2.9802322387695312e-08,
            1e-40, float("inf"), float("-inf"), float("nan"), 3.3895313892515355e38, 1.00048828125]
f32 = b"".join(struct.pack("<f", x) for x in specials)
f64 = b"".join(struct.pack("<d", x) for x in specials)
for sel in range(32):
    src = sel & 3
    body = {0: f64, 1: f32, 2: f32[: len(f32) // 2 * 2], 3: f32[: len(f32) // 2 * 2]}[src]
    put("cast", f"sel{sel:02d}", bytes([sel]) + body)

# ggml block dequantization: a type selector byte (an index into the ggml table) then blocks;
# the block tensors of the GGUF test vectors, and patterned blocks for every selector.
for sel in range(64):
    body = bytes((i * 37 + sel * 11 + 5) & 255 for i in range(4 * 292))
    put("ggml_dequant", f"sel{sel:02d}", bytes([sel]) + body[: (sel % 8 + 1) * 144])

# ONNX: two bytes giving the external data file's length, the data, then the model.
onnx_dir = root / "tests" / "data" / "onnx"
for f in sorted(onnx_dir.glob("*.onnx")):
    put("onnx", f.name, struct.pack("<H", 0) + f.read_bytes())
ext = onnx_dir / "external"
if (ext / "m.onnx").exists():
    data = (ext / "m.onnx.data").read_bytes()
    put("onnx", "external.onnx", struct.pack("<H", len(data)) + data + (ext / "m.onnx").read_bytes())
mnist = root.parent / "shared" / "data" / "onnx" / "mnist.onnx"
if mnist.exists():
    put("onnx", "mnist.onnx", struct.pack("<H", 0) + mnist.read_bytes())
