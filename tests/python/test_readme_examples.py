"""The README cannot drift: its code blocks are read from README.md and checked.

- ```sh example``` blocks run, line by line under `bash -euo pipefail`, in a fresh folder
  where `tests/` is the repository's, with the built `tensorsmith` first on PATH;
- ```python example``` blocks run with this interpreter (the package installed) in a fresh
  folder;
- the ```sh synopsis``` block: every subcommand it shows exists and every flag it shows is in
  that subcommand's `--help`.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```([^\n]*)\n(.*?)^```\s*$", README, re.S | re.M)


def blocks(info):
    found = [body for tag, body in BLOCKS if tag.strip() == info]
    assert found, f"README.md has no ```{info} block"
    return found


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    return tmp_path


def env():
    e = dict(os.environ)
    e["PATH"] = f"{Path(os.environ['TENSORSMITH_BIN']).parent}{os.pathsep}{e['PATH']}"
    return e


@pytest.mark.parametrize("n", range(len([t for t, _ in BLOCKS if t.strip() == "sh example"])))
def test_shell_examples_run(folder, n):
    script = blocks("sh example")[n]
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=folder, env=env(),
                       capture_output=True, text=True)
    assert p.returncode == 0, f"{script}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"


@pytest.mark.parametrize("n", range(len([t for t, _ in BLOCKS if t.strip() == "python example"])))
def test_python_examples_run(folder, n):
    p = subprocess.run([sys.executable, "-c", blocks("python example")[n]], cwd=folder,
                       env=env(), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_the_synopsis_shows_only_what_exists():
    (synopsis,) = blocks("sh synopsis")
    tsm = os.environ["TENSORSMITH_BIN"]
    lines, current = [], None
    for line in synopsis.splitlines():
        code = line.split("#", 1)[0]
        if code.startswith("tensorsmith "):
            words = code.split()[1:]
            sub = [w for w in words[:2] if re.fullmatch(r"[a-z]+", w)]
            if sub[:1] != ["dataset"]:
                sub = sub[:1]
            current = (sub, [])
            lines.append(current)
        if current is not None:
            current[1].extend(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])", code))
    assert len(lines) >= 10, lines
    for sub, flags in lines:
        h = subprocess.run([tsm, *sub, "--help"], capture_output=True, text=True)
        assert h.returncode == 0, (sub, h.stderr)
        for f in flags:
            assert re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", h.stdout), (sub, f)
