"""The README and the guide cannot drift: their code blocks are read from README.md and
docs/src/*.md (guide_blocks.py) and checked.

- ```sh example``` blocks run, line by line under `bash -euo pipefail`, in a fresh folder
  where `tests/` is the repository's, with the built `tensorsmith` first on PATH;
- ```python example``` blocks run with this interpreter (the package installed) in a fresh
  folder;
- ```python spark``` blocks run the same way, each starting its own local[2] Spark session;
- ```sh synopsis``` blocks: every subcommand shown exists and every flag shown is in that
  subcommand's `--help`.
The README must keep one block of each runnable kind (scripts/wheel --check runs its Python
example from the installed wheel).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guide_blocks import FENCE, ROOT, blocks

SH = blocks("sh example")
PY = blocks("python example")
SYNOPSES = blocks("sh synopsis")
SPARK = blocks("python spark")


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    return tmp_path


def env():
    e = dict(os.environ)
    e["PATH"] = f"{Path(os.environ['TENSORSMITH_BIN']).parent}{os.pathsep}{e['PATH']}"
    return e


def test_the_readme_shows_a_shell_and_a_python_example():
    tags = [t.strip() for t, _ in FENCE.findall((ROOT / "README.md").read_text())]
    assert "sh example" in tags and "python example" in tags, tags


@pytest.mark.parametrize("where,script", SH, ids=[i for i, _ in SH])
def test_shell_examples_run(folder, where, script):
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=folder, env=env(),
                       capture_output=True, text=True)
    assert p.returncode == 0, f"{where}:\n{script}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"


@pytest.mark.parametrize("where,script", PY, ids=[i for i, _ in PY])
def test_python_examples_run(folder, where, script):
    p = subprocess.run([sys.executable, "-c", script], cwd=folder, env=env(),
                       capture_output=True, text=True)
    assert p.returncode == 0, f"{where}:\n{p.stderr}"


@pytest.mark.parametrize("where,script", SPARK, ids=[i for i, _ in SPARK])
def test_spark_examples_run(folder, where, script):
    # A local[2] session on this machine's Java; the blocks point Spark's Python workers at
    # this interpreter themselves.
    p = subprocess.run([sys.executable, "-c", script], cwd=folder, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{where}:\n{p.stderr[-4000:]}"


def test_synopses_show_only_what_exists():
    assert SYNOPSES, "no ```sh synopsis block in the README or the guide"
    check_commands(SYNOPSES, at_least=10)


# Blocks that are not run here (```sh cloud: a real account's buckets; plain ```sh: a model
# folder or an install) still show real commands: each `tensorsmith` line names a subcommand
# that exists, with flags its --help lists.
SHOWN = [b for tag in ("sh", "sh cloud") for b in blocks(tag)]


def test_commands_shown_but_not_run_exist():
    assert any(w.startswith("README.md") for w, _ in SHOWN)
    check_commands(SHOWN, at_least=3)


def check_commands(found, at_least):
    tsm = os.environ["TENSORSMITH_BIN"]
    lines, current = [], None
    for _, synopsis in found:
        current = None
        for line in synopsis.splitlines():
            code = line.split("#", 1)[0]
            if not code.startswith((" ", "tensorsmith ")):
                current = None  # another program's line; indented lines continue a command
            if code.startswith("tensorsmith "):
                words = code.split()[1:]
                sub = [w for w in words[:2] if re.fullmatch(r"[a-z]+", w)]
                if sub[:1] != ["dataset"]:
                    sub = sub[:1]
                current = (sub, [])
                lines.append(current)
            if current is not None:
                current[1].extend(
                    re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])", code))
    assert len(lines) >= at_least, lines
    for sub, flags in lines:
        h = subprocess.run([tsm, *sub, "--help"], capture_output=True, text=True)
        assert h.returncode == 0, (sub, h.stderr)
        for f in flags:
            assert re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", h.stdout), (sub, f)
