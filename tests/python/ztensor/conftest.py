"""Live zTensor interop suite: run inside one venv per reference generation.

    scripts/ztensor-venvs
    cargo build -p tensorsmith-cli
    for v in zt01:0.1 zt11:1.1 zt2:2; do
        ZT_GENERATION=${v#*:} TENSORSMITH_BIN=target/debug/tensorsmith \
            .venv-${v%:*}/bin/python -m pytest -q tests/python/ztensor
    done

The generation under test is the installed `ztensor` package's (0.1.x, 1.1.x or 2.x).
ZT_GENERATION, when set, must agree with it: a mismatch is an error, not a skip. Files that
only apply to some generations are left out of collection for the others, and the header
says which. Under an interpreter without `ztensor` (the main .venv, when `pytest
tests/python` recurses into this folder), nothing here is collected and the summary says so;
with ZT_GENERATION set that is an error instead.
"""

import importlib.metadata
import json
import os
import subprocess

import pytest

try:
    importlib.metadata.version("ztensor")
    IMPORT_ERROR = None
except importlib.metadata.PackageNotFoundError as e:  # no ztensor in this interpreter
    IMPORT_ERROR = e
if IMPORT_ERROR is None:
    import reference  # numpy, ml_dtypes: installed with ztensor by scripts/ztensor-venvs

    GEN, VERSION = reference.installed_generation()
else:
    GEN, VERSION = None, None

WANT = os.environ.get("ZT_GENERATION")
if WANT is not None and WANT not in ("0.1", "1.1", "2"):
    raise pytest.UsageError(f"ZT_GENERATION={WANT!r}: expected 0.1, 1.1 or 2")
if WANT is not None and GEN is None:
    raise pytest.UsageError(
        f"ZT_GENERATION={WANT} but this interpreter has no ztensor package; "
        "run scripts/ztensor-venvs and use .venv-zt01/.venv-zt11/.venv-zt2"
    )
if WANT is not None and WANT != GEN:
    raise pytest.UsageError(f"ZT_GENERATION={WANT} but ztensor {VERSION} is installed")

# Files for some generations only.
ONLY = {
    "test_zt_sparse.py": ("1.1", "2"),
    "test_zt_objects.py": ("1.1", "2"),
    "test_zt_append.py": ("2",),
}
if GEN is None:
    collect_ignore_glob = ["test_*.py"]
else:
    collect_ignore = [f for f, gens in ONLY.items() if GEN not in gens]


def pytest_report_header(config):
    if GEN is None:
        return ["ztensor interop: no ztensor in this interpreter, tests/python/ztensor not collected"]
    left_out = ", ".join(collect_ignore) or "none"
    return [f"ztensor interop: generation {GEN} (ztensor {VERSION}); files for other generations: {left_out}"]


def pytest_terminal_summary(terminalreporter):
    if GEN is None:
        terminalreporter.write_line(
            "tests/python/ztensor: NOT RUN under this interpreter (no ztensor package); "
            "it runs in .venv-zt01/.venv-zt11/.venv-zt2 (scripts/ztensor-venvs)",
            yellow=True,
        )


class Tensorsmith:
    """Runs the binary and returns the completed process."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, expect=0):
        p = subprocess.run(
            [self.path, *map(str, args)], capture_output=True, timeout=120, check=False
        )
        if expect is not None:
            assert p.returncode == expect, (
                f"tensorsmith {' '.join(map(str, args))}: exit {p.returncode}, want {expect}\n"
                f"stdout: {p.stdout.decode(errors='replace')}\n"
                f"stderr: {p.stderr.decode(errors='replace')}"
            )
        return p

    def inspect(self, path):
        return json.loads(self.run("inspect", "--json", path).stdout)

    def convert(self, src, dst, *opts):
        self.run("convert", src, dst, *opts)
        return dst

    def hashes(self, *paths):
        """{path: (structural id, content digest)} from `hash --content --json`."""
        out = self.run("hash", "--content", "--json", *paths).stdout.decode()
        docs = [json.loads(line) for line in out.splitlines() if line.strip()]
        return {d["file"]: (d["structural_id"], d["content_digest"]) for d in docs}


@pytest.fixture(scope="session")
def tsm():
    path = os.environ.get("TENSORSMITH_BIN")
    if not path:
        pytest.fail(
            "TENSORSMITH_BIN is not set: build with `cargo build -p tensorsmith-cli` and run "
            "`TENSORSMITH_BIN=target/debug/tensorsmith .venv-zt11/bin/python -m pytest "
            "tests/python/ztensor`",
            pytrace=False,
        )
    path = os.path.abspath(path)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"TENSORSMITH_BIN={path} is not an executable file", pytrace=False)
    return Tensorsmith(path)


@pytest.fixture(scope="session")
def ref():
    return reference.make(GEN)
