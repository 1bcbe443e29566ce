#!/usr/bin/env python3
"""`tensorsmith convert IN.safetensors OUT.safetensors` (no cast) side by side with `cp IN OUT`
followed by `sync OUT`, interleaved, as ratios. Equal work: both outputs are fsynced (ours
writes a temporary file, fsyncs it and renames it).

    cargo build --release -p tensorsmith-cli
    python3 benches/convert_copy_vs_cp.py

Two inputs of CC_BENCH_GIB GiB (default 1) of random F32 in 64 tensors:
    writer's layout  tensors in the order the reference writer lays them out: the output is
                     the input byte for byte, copied whole by one copy_file_range from offset 0
    other layout     the same tensors with their data in reverse order: the output is laid out
                     anew, a kernel copy per tensor at the header's (unaligned) offsets
Environment: CC_BENCH_RUNS (default 6), CC_BENCH_DIR (default target/bench-data/convert-copy),
TENSORSMITH_BIN (default target/release/tensorsmith). Target (#15): >= 0.9x cp + sync.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
GIB = float(os.environ.get("CC_BENCH_GIB", "1"))
RUNS = int(os.environ.get("CC_BENCH_RUNS", "6"))
DIR = pathlib.Path(os.environ.get("CC_BENCH_DIR", REPO / "target" / "bench-data" / "convert-copy"))
BIN = os.environ.get("TENSORSMITH_BIN", str(REPO / "target" / "release" / "tensorsmith"))
NT = 64


def write_input(path, reverse):
    size = int(GIB * (1 << 30)) // NT // 4 * 4
    names = [f"t{i:02d}" for i in range(NT)]
    order = names[::-1] if reverse else names
    header, off = {}, 0
    for k in order:
        header[k] = {"dtype": "F32", "shape": [size // 4], "data_offsets": [off, off + size]}
        off += size
    h = json.dumps({k: header[k] for k in names}, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for _ in order:
            f.write(os.urandom(size))


def timed(cmds):
    t = time.perf_counter()
    for c in cmds:
        subprocess.run(c, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} missing: cargo build --release -p tensorsmith-cli")
    DIR.mkdir(parents=True, exist_ok=True)
    out = DIR / "out.safetensors"
    print(f"{GIB:g} GiB, {NT} F32 tensors, {RUNS} interleaved runs; load {os.getloadavg()[0]:.2f}")
    for label, reverse in (("writer's layout", False), ("other layout", True)):
        src = DIR / "in.safetensors"
        write_input(src, reverse)
        t = {"cp": [], "ours": []}
        for run in range(RUNS):
            subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL)
            jobs = [("cp", [["cp", str(src), str(out)], ["sync", str(out)]]),
                    ("ours", [[BIN, "convert", str(src), str(out)]])]
            for name, cmds in (jobs if run % 2 == 0 else jobs[::-1]):
                out.unlink(missing_ok=True)
                subprocess.run(["sync"])
                time.sleep(0.3)
                t[name].append(timed(cmds))
            if not reverse:
                assert out.read_bytes()[:64] == src.read_bytes()[:64]
        cp, ours = statistics.median(t["cp"]), statistics.median(t["ours"])
        print(f"{label:16} cp + sync {cp:6.3f} s   ours {ours:6.3f} s   cp/ours {cp / ours:4.2f}x "
              f"(best {min(t['cp']) / min(t['ours']):4.2f}x)")
        out.unlink(missing_ok=True)
        src.unlink()


if __name__ == "__main__":
    main()
