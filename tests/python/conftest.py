"""Shared fixtures: the `tensorsmith` binary under test, found through TENSORSMITH_BIN."""

import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# With no credentials anywhere, the AWS credential chain's last source is the EC2 instance
# metadata service at 169.254.169.254; no test may ask a link-local address, so the tests and
# the processes they start skip it unless a test points it at a stand-in of its own.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


class Tensorsmith:
    """Runs the binary and returns the completed process."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, expect=0):
        p = subprocess.run(
            [self.path, *map(str, args)], capture_output=True, timeout=60, check=False
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


@pytest.fixture(scope="session")
def tsm():
    path = os.environ.get("TENSORSMITH_BIN")
    if not path:
        pytest.fail(
            "TENSORSMITH_BIN is not set: build with `cargo build -p tensorsmith-cli` and run "
            "`TENSORSMITH_BIN=target/debug/tensorsmith python -m pytest tests/python`",
            pytrace=False,
        )
    path = os.path.abspath(path)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"TENSORSMITH_BIN={path} is not an executable file", pytrace=False)
    return Tensorsmith(path)


@pytest.fixture(scope="session")
def header_schema():
    return json.loads((REPO / "crates/tensorsmith-cli/schemas/safetensors.schema.json").read_text())
