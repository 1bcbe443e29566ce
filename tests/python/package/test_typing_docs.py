"""The package's typing and docs: the `_native` stub matches the extension, `py.typed` ships,
every public name has a docstring, and the examples in them run (doctest)."""

import ast
import doctest
import pathlib
import re
import subprocess
import sys

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


TYPING = pathlib.Path(__file__).parent / "typing"


def mypy_strict(tmp_path, source):
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", str(tmp_path / "mypy-cache"), str(TYPING / source)],
        capture_output=True, text=True)


def test_mypy_strict_accepts_a_program_that_uses_the_api(tmp_path):
    # The public functions and classes are annotated (py.typed ships them): a strictly typed
    # program calls them without "untyped call" errors, and their results have the types it
    # gives them.
    p = mypy_strict(tmp_path, "uses_the_api.py")
    assert p.returncode == 0, p.stdout + p.stderr


def test_mypy_strict_refuses_wrong_calls(tmp_path):
    p = mypy_strict(tmp_path, "misuses_the_api.py")
    wrong = {i + 1 for i, line in enumerate((TYPING / "misuses_the_api.py").read_text()
                                            .splitlines()) if "  # wrong:" in line}
    flagged = {int(m) for m in re.findall(r"misuses_the_api\.py:(\d+): error", p.stdout)}
    assert wrong and wrong <= flagged, p.stdout


def test_the_typed_program_runs(tmp_path):
    # What mypy accepted also works: the annotations describe the functions as they behave.
    sys.path.insert(0, str(TYPING))
    try:
        import uses_the_api
    finally:
        sys.path.remove(str(TYPING))
    written = uses_the_api.model(tmp_path)
    assert written[0] == "w" and written[-1].endswith("m.gguf")
    data = pathlib.Path(__file__).resolve().parents[2] / "data/dataset/input_snappy_dict_v1.parquet"
    assert uses_the_api.dataset(tmp_path, [str(data)]) > 0
