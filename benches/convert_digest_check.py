#!/usr/bin/env python3
"""What checking recorded digests costs `convert`: `tensorsmith convert IN OUT` of a 1 GiB
safetensors file whose tensors record xxh3 digests (`convert --digest xxh3`), with the check
(the default: a second thread hashes the mapped source beside the kernel copy) and with
`--no-digest-check` (today's copy alone), interleaved, as a ratio. Equal work: both outputs
are fsynced and renamed the same way; the input is in the page cache for both.

    cargo build --release -p tensorsmith-cli
    python3 benches/convert_digest_check.py

Environment: DC_BENCH_GIB (default 1), DC_BENCH_RUNS (default 7), DC_BENCH_DIR (default
target/bench-data/digest-check), TENSORSMITH_BIN (default target/release/tensorsmith).
Target (#40): <= 1.1x.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
GIB = float(os.environ.get("DC_BENCH_GIB", "1"))
RUNS = int(os.environ.get("DC_BENCH_RUNS", "7"))
DIR = pathlib.Path(os.environ.get("DC_BENCH_DIR", REPO / "target" / "bench-data" / "digest-check"))
BIN = os.environ.get("TENSORSMITH_BIN", str(REPO / "target" / "release" / "tensorsmith"))
NT = 16


def write_plain(path):
    size = int(GIB * (1 << 30)) // NT // 4 * 4
    names = [f"layer.{i:02d}" for i in range(NT)]
    header, off = {}, 0
    for k in names:
        header[k] = {"dtype": "F32", "shape": [size // 4], "data_offsets": [off, off + size]}
        off += size
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for _ in names:
            f.write(os.urandom(size))


def timed(args):
    """Wall seconds and peak RSS (MiB, the child's own through wait4) of one run."""
    t = time.perf_counter()
    p = subprocess.Popen([BIN, *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit(f"{args}: exit {p.returncode}")
    return time.perf_counter() - t, usage.ru_maxrss / 1024


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} missing: cargo build --release -p tensorsmith-cli")
    DIR.mkdir(parents=True, exist_ok=True)
    plain, src, out = DIR / "plain.safetensors", DIR / "digest.safetensors", DIR / "out.safetensors"
    if not src.exists():
        write_plain(plain)
        subprocess.run([BIN, "convert", plain, src, "--digest", "xxh3"], check=True,
                       stdout=subprocess.DEVNULL)
        plain.unlink()
    timed(["hash", "--content", str(src)])  # warm the page cache
    checked, unchecked = [], []
    for _ in range(RUNS):
        checked.append(timed(["convert", str(src), str(out)]))
        out.unlink()
        unchecked.append(timed(["convert", str(src), str(out), "--no-digest-check"]))
        out.unlink()
    c = statistics.median(t for t, _ in checked)
    u = statistics.median(t for t, _ in unchecked)
    rc, ru = max(r for _, r in checked), max(r for _, r in unchecked)
    print(f"{GIB:g} GiB, {NT} tensors, {RUNS} interleaved runs (medians; peak RSS, the mapped")
    print("input's resident pages included)")
    print(f"  convert (digests checked)     {c:.3f} s   peak RSS {rc:.0f} MiB")
    print(f"  convert --no-digest-check     {u:.3f} s   peak RSS {ru:.0f} MiB")
    print(f"  ratio                         {c / u:.3f}x (target <= 1.1x)")


if __name__ == "__main__":
    main()
