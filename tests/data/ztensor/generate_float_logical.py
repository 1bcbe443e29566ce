"""Writes v2/float_logical.zt with the reference `ztensor` 2.1.2: float tensors stored as the
unsigned integer of their width with the float's name as logical type (`dtype: u16, type:
bf16`), as 2.1.2's `Writer.add(..., "u16", logical="bf16")` writes them. Readers must decode
the logical type: 1.0 in bf16 is 1.0, not 16256.

Run with the 2.1.2 venv (see NOTES.md §0):  /tmp/zt2/bin/python generate_float_logical.py
"""
import pathlib

import ml_dtypes
import numpy as np
import ztensor

here = pathlib.Path(__file__).resolve().parent
path = here / "v2" / "float_logical.zt"

bf = np.array([1.0, 2.0, -3.5], dtype=ml_dtypes.bfloat16)
h = np.array([1.0, -2.0], dtype=np.float16)
f = np.array([0.5, -0.25], dtype=np.float32)
with ztensor.Writer(str(path), canonical=False, align=4096) as w:
    w.add("bf16_on_u16", bf.view(np.uint8), [3], "u16", logical="bf16")
    w.add("f16_on_u16", h.view(np.uint8), [2], "u16", logical="f16")
    w.add("f32_on_u32", f.view(np.uint8), [2], "u32", logical="f32")

r = ztensor.open(str(path))
t = r["bf16_on_u16"]
assert (t.dtype, t.logical) == ("u16", "bf16"), (t.dtype, t.logical)
print("wrote", path.name, path.stat().st_size, "bytes")
