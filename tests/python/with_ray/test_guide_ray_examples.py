"""The guide's Ray Data blocks (```python ray```, guide_blocks.py) run, each in a fresh folder
with its own local Ray instance (`ray.init(num_cpus=2)` in the block)."""

import subprocess
import sys

import pytest

from guide_blocks import blocks

RAY = blocks("python ray")


def test_the_guide_shows_ray():
    assert RAY


@pytest.mark.parametrize("where,script", RAY, ids=[i for i, _ in RAY])
def test_ray_examples_run(tmp_path, where, script):
    p = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, f"{where}:\n{p.stderr[-4000:]}"
