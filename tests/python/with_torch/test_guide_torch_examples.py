"""The README's and the guide's PyTorch blocks run (guide_blocks.py): ```python torch```
always, here in .venv-torch; ```python gpu``` where a CUDA device is present, and skipped,
saying so, where none is."""

import subprocess
import sys

import pytest
import torch

from guide_blocks import blocks

TORCH = blocks("python torch")
GPU = blocks("python gpu")


def run(folder, where, script):
    p = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True,
                       text=True)
    assert p.returncode == 0, f"{where}:\n{script}\n{p.stderr}"


def test_the_readme_shows_a_training_loop_and_a_gpu_load():
    where = {w.split("#")[0] for w, _ in TORCH + GPU}
    assert "README.md" in where, where
    assert TORCH and GPU


@pytest.mark.parametrize("where,script", TORCH, ids=[i for i, _ in TORCH])
def test_torch_examples_run(tmp_path, where, script):
    run(tmp_path, where, script)


@pytest.mark.parametrize("where,script", GPU, ids=[i for i, _ in GPU])
def test_gpu_examples_run_where_a_gpu_is(tmp_path, where, script):
    if not torch.cuda.is_available():
        pytest.skip(f"{where}: a ```python gpu block needs a CUDA device; none here")
    run(tmp_path, where, script)
