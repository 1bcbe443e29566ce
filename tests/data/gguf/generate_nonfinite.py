"""Writes nonfinite_meta.gguf with the reference `gguf` package (PyPI, 0.19.0): float metadata
that JSON cannot hold (NaN, +inf, -inf, alone and inside arrays), which every output must keep.

Run from the repository root:  .venv/bin/python tests/data/gguf/generate_nonfinite.py
"""
import math
import pathlib

import numpy as np
from gguf import GGUFWriter, GGUFReader, GGUFValueType as V

here = pathlib.Path(__file__).resolve().parent
path = here / "nonfinite_meta.gguf"

w = GGUFWriter(str(path), "llama")
w.add_key_value("t.nan32", math.nan, V.FLOAT32)
w.add_key_value("t.inf32", math.inf, V.FLOAT32)
w.add_key_value("t.ninf64", -math.inf, V.FLOAT64)
w.add_key_value("t.nan64", math.nan, V.FLOAT64)
w.add_key_value("t.half32", 0.5, V.FLOAT32)
w.add_key_value("t.arr_f32", [0.0, -math.inf, -1.0], V.ARRAY, sub_type=V.FLOAT32)
w.add_key_value("t.arr_f64", [math.nan, math.inf, 1.5], V.ARRAY, sub_type=V.FLOAT64)
w.add_tensor("w", np.arange(4, dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

# The reference reader sees the values written.
r = GGUFReader(str(path))
f = r.fields
assert math.isnan(f["t.nan32"].contents()) and f["t.inf32"].contents() == math.inf
assert f["t.ninf64"].contents() == -math.inf and math.isnan(f["t.nan64"].contents())
assert f["t.arr_f32"].contents() == [0.0, -math.inf, -1.0]
print("wrote", path.name)
