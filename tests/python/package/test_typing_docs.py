"""The package's typing and docs: the `_native` stub matches the extension, `py.typed` ships,
every public name has a docstring, and the examples in them run (doctest)."""

import ast
import doctest
import pathlib

import tensorsmith
import tensorsmith._lowlevel
from tensorsmith import _native

PKG = pathlib.Path(tensorsmith.__file__).parent


def test_the_native_stub_names_what_the_extension_has():
    tree = ast.parse((PKG / "_native.pyi").read_text())
    stub = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    real = {n for n in dir(_native) if not n.startswith("_")}
    assert stub == real
    assert (PKG / "py.typed").exists()


def test_every_public_name_has_a_docstring_with_an_example():
    for name in tensorsmith.__all__:
        obj = getattr(tensorsmith, name)
        if name in ("TensorsmithError", "SafetensorError"):
            continue
        doc = obj.__doc__ or ""
        assert ">>>" in doc or "    " in doc, name
    assert "safe_open" in tensorsmith.__doc__ and "verify" in tensorsmith.__doc__


def test_the_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for mod in (tensorsmith, tensorsmith._lowlevel):
        r = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert r.failed == 0, mod.__name__
        assert r.attempted > 0
