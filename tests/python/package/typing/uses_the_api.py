"""A program a user might write against the public API, type-checked by `mypy --strict` in
test_typing_docs.py: every call must type-check against the package's annotations (py.typed),
and the values it gets back must have the types it gives them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import tensorsmith
from tensorsmith import Dataset, TensorSpec, safe_open


def model(folder: Path) -> list[str]:
    path = folder / "m.safetensors"
    tensorsmith.save_file({"w": np.ones((4, 32), np.float32)}, path, metadata={"k": "v"})
    data: bytes = tensorsmith.save({"w": np.zeros(3, np.float32)}, digest="xxh3")
    back: dict[str, Any] = tensorsmith.load(data)
    with safe_open(path, framework="np", backend="pread") as f:
        names: list[str] = f.keys()
        shape: list[int] = f.get_shape("w")
        dtype: str = f.get_dtype("w")
        meta: dict[str, str] | None = f.metadata()
        part = f.get_slice("w")[:2, :16]
    info: dict[str, Any] = tensorsmith.inspect(path)
    ident: dict[str, Any] = tensorsmith.hash(path, content=True)
    blocks: np.ndarray = tensorsmith.quantize(np.ones((2, 32), np.float32), "Q8_0")
    written: list[str] = tensorsmith.convert(path, folder / "m.gguf", quantize="Q8_0",
                                             gguf_set=["general.name=str:demo"])
    changes: dict[str, Any] = tensorsmith.diff(path, folder / "m.gguf", values=True)
    valid: dict[str, Any] = tensorsmith.validate(path)
    checked: dict[str, Any] = tensorsmith.verify(str(path))
    pages: int = tensorsmith.report(path, folder / "m.html", title="m")
    spec = TensorSpec(dtype="float32", shape=[2], data_ptr=0, data_len=0)
    raw: bytes = tensorsmith.serialize({}, metadata=None)
    del back, part, blocks, changes, valid, checked, pages, spec, raw, ident, info
    return names + [dtype, str(shape), str(meta)] + written


def dataset(folder: Path, inputs: list[str]) -> int:
    manifest: dict[str, Any] = tensorsmith.write_dataset(inputs, folder / "ds", batch_size=4,
                                                         dtype="F32", mode="overwrite")
    ds = Dataset(folder / "ds", columns=["v"])
    n: int = len(ds)
    for batch in ds.batches(4, shuffle=0):
        assert "v" in batch
    rows: int = tensorsmith.dataset_export(folder / "ds", folder / "out.parquet")
    report: dict[str, Any] = tensorsmith.dataset_verify(folder / "ds", version=ds.version)
    del manifest, report
    return n + rows
