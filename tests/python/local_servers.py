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
