"""Calls a typed API must refuse: `mypy --strict` has to report each line marked `# wrong`
(test_typing_docs.py checks that it does, so the check above cannot pass vacuously)."""

from __future__ import annotations

import tensorsmith

tensorsmith.save_file({"w": 1}, 42)  # wrong: a filename is a path or a URL
tensorsmith.convert("a.safetensors", "b.gguf", quantize=8)  # wrong: a type name
n: str = tensorsmith.report("a.safetensors", "a.html")  # wrong: report returns a count
tensorsmith.Dataset("ds").batches("4")  # wrong: a batch size is an int
