"""Writes the ONNX test vectors with the reference `onnx` package (PyPI, 1.23.2) and
expected.json: each model's tensors (dtype code, dims, SHA-256 of the packed little-endian
bytes `numpy_helper.from_array(to_array(t))` holds) as onnx reads them. Small on purpose: they
are also the `onnx` fuzz target's seeds.

Run from the repository root:  .venv/bin/python tests/data/onnx/generate.py
"""
import hashlib
import json
import pathlib
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = pathlib.Path(__file__).resolve().parent
rng = np.random.default_rng(20261125)


def arrays():
    """One small array per dtype onnx supports (odd counts: sub-byte types pad)."""
    out = []
    for name, code in TensorProto.DataType.items():
        if code in (TensorProto.UNDEFINED, TensorProto.STRING):
            continue
        dt = helper.tensor_dtype_to_np_dtype(code)
        if code == TensorProto.BOOL:
            a = rng.integers(0, 2, 5).astype(bool)
        elif code in (TensorProto.UINT4, TensorProto.UINT2, TensorProto.INT4, TensorProto.INT2):
            a = rng.integers(0, 2, 5).astype(dt)
        elif np.dtype(dt).kind in "iu":
            a = rng.integers(0, 100, 5).astype(dt)
        elif code == TensorProto.FLOAT8E8M0:
            a = np.array([1, 2, 4, 0.5, 8], dtype=np.float32).astype(dt)
        else:
            a = rng.standard_normal(5).astype(np.float32).astype(dt)
        out.append((name.lower(), code, a))
    return out


def model(inits):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y], inits)
    return helper.make_model(g, producer_name="tensorsmith-vectors")


def describe(path):
    m = onnx.load(str(path))
    return {
        t.name: {
            "data_type": t.data_type,
            "dims": list(t.dims),
            "sha256": hashlib.sha256(
                numpy_helper.from_array(numpy_helper.to_array(t)).raw_data).hexdigest(),
        }
        for t in m.graph.initializer
    }


items = arrays()
raw = model([numpy_helper.from_array(a, f"t_{n}") for n, _, a in items])
typed = model([helper.make_tensor(f"t_{n}", c, a.shape, a.flatten()) for n, c, a in items])
expected = {"onnx": onnx.__version__}
onnx.save_model(raw, str(here / "raw.onnx"))
onnx.save_model(typed, str(here / "typed.onnx"))
ext = here / "external"
shutil.rmtree(ext, ignore_errors=True)
ext.mkdir()
onnx.save_model(raw, str(ext / "m.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="m.onnx.data", size_threshold=0)
for name in ("raw.onnx", "typed.onnx", "external/m.onnx"):
    expected[name] = describe(here / name)
(here / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
