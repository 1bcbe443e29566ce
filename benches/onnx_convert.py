#!/usr/bin/env python3
"""ONNX with external data (issue #29's targets), in one run, as ratios:
    hash       `tensorsmith hash --compat weight-inspect m.onnx`: reads the .onnx only (< 0.1 s)
    convert    `tensorsmith convert m.onnx out.safetensors` against `cp` + `sync` of the data
               file (>= 0.8x) and against onnx.load + numpy_helper.to_array +
               safetensors.numpy.save_file + fsync (>= 3x); runs interleaved, medians
    RssAnon    peak anonymous memory of our convert, polled from /proc (<= 256 MiB)

    cargo build --release -p tensorsmith-cli
    .venv/bin/python benches/onnx_convert.py      # needs onnx, numpy, safetensors

The model: ONNX_BENCH_GB (default 2, decimal) of random F32 in 16 tensors, one external data
file at 4096-aligned offsets, written directly (TensorProtos with external_data entries).
Environment: ONNX_BENCH_RUNS (default 3), ONNX_BENCH_DIR (default /tmp/onnx-bench; removed
at the end unless ONNX_BENCH_KEEP=1), TENSORSMITH_BIN (default target/release/tensorsmith).
"""

import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import threading
import time

import onnx
from onnx import TensorProto, helper

REPO = pathlib.Path(__file__).resolve().parents[1]
GB = float(os.environ.get("ONNX_BENCH_GB", "2"))
RUNS = int(os.environ.get("ONNX_BENCH_RUNS", "3"))
DIR = pathlib.Path(os.environ.get("ONNX_BENCH_DIR", "/tmp/onnx-bench"))
BIN = os.environ.get("TENSORSMITH_BIN", str(REPO / "target" / "release" / "tensorsmith"))
NT = 16

BASELINE = r"""
import os, sys
import onnx
from onnx import numpy_helper
from safetensors.numpy import save_file
m = onnx.load(sys.argv[1])
tensors = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
save_file(tensors, sys.argv[2])
fd = os.open(sys.argv[2], os.O_RDONLY)
os.fsync(fd)
os.close(fd)
"""


def write_model(path):
    per = int(GB * 1e9) // NT // 4 * 4
    data = path.with_name(path.name + ".data")
    inits, off = [], 0
    with open(data, "wb") as f:
        for i in range(NT):
            pad = -off % 4096
            f.write(b"\0" * pad)
            off += pad
            f.write(os.urandom(per))
            t = TensorProto(name=f"w{i:02d}", data_type=TensorProto.FLOAT, dims=[per // 4])
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", data.name), ("offset", str(off)), ("length", str(per))):
                t.external_data.add(key=k, value=v)
            inits.append(t)
            off += per
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], inits)
    onnx.save_model(helper.make_model(g), str(path))
    return data


def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def peak_rss_anon(cmd):
    """Runs `cmd`, polling its RssAnon every 5 ms; returns the peak in KiB."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    peak = 0

    def poll():
        nonlocal peak
        while p.poll() is None:
            try:
                for line in open(f"/proc/{p.pid}/status"):
                    if line.startswith("RssAnon:"):
                        peak = max(peak, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.005)

    th = threading.Thread(target=poll)
    th.start()
    p.wait()
    th.join()
    assert p.returncode == 0
    return peak


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} missing: cargo build --release -p tensorsmith-cli")
    DIR.mkdir(parents=True, exist_ok=True)
    model = DIR / "m.onnx"
    data = model.with_name("m.onnx.data")
    if not data.exists():
        data = write_model(model)
    size = data.stat().st_size
    print(f"{size / 1e9:.2f} GB in {NT} F32 tensors, .onnx {model.stat().st_size} bytes; "
          f"{RUNS} interleaved runs; load {os.getloadavg()[0]:.2f}; {BIN}")

    hashes = [timed([BIN, "hash", "--compat", "weight-inspect", str(model)]) for _ in range(7)]
    print(f"hash --compat weight-inspect   median {statistics.median(hashes) * 1e3:7.1f} ms"
          f"   best {min(hashes) * 1e3:7.1f} ms   (target < 100 ms)")

    out, copy, base = DIR / "out.safetensors", DIR / "copy.bin", DIR / "base.safetensors"
    jobs = {
        "ours": [BIN, "convert", str(model), str(out)],
        "cp": ["sh", "-c", f"cp '{data}' '{copy}' && sync '{copy}'"],
        "python": [sys.executable, "-c", BASELINE, str(model), str(base)],
    }
    t = {k: [] for k in jobs}
    for run in range(RUNS):
        order = list(jobs) if run % 2 == 0 else list(jobs)[::-1]
        for name in order:
            for f in (out, copy, base):
                f.unlink(missing_ok=True)
            subprocess.run(["sync"])
            time.sleep(0.5)
            t[name].append(timed(jobs[name]))
    med = {k: statistics.median(v) for k, v in t.items()}
    print(f"convert to safetensors          ours {med['ours']:6.2f} s   cp + sync {med['cp']:6.2f} s"
          f"   python {med['python']:6.2f} s")
    print(f"  cp/ours     {med['cp'] / med['ours']:5.2f}x   (target >= 0.8x)")
    print(f"  python/ours {med['python'] / med['ours']:5.2f}x   (target >= 3x)")
    for f in (out, copy, base):
        f.unlink(missing_ok=True)
    peak = peak_rss_anon(jobs["ours"])
    print(f"peak RssAnon of our convert     {peak / 1024:6.1f} MiB   (target <= 256 MiB)")
    out.unlink(missing_ok=True)
    if os.environ.get("ONNX_BENCH_KEEP") != "1":
        shutil.rmtree(DIR)


if __name__ == "__main__":
    main()
