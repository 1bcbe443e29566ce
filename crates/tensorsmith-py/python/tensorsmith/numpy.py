"""`safetensors.numpy`'s functions, backed by tensorsmith: swap the import and keep the code."""

from . import load, load_file, save, save_file  # noqa: F401

__all__ = ["load", "load_file", "save", "save_file"]
