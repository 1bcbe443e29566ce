#!/usr/bin/env python3
"""`tensorsmith report`: the targets of issue 32 for the page, in one run.

    cargo build --release -p tensorsmith-cli
    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop -q --release -m crates/tensorsmith-py/Cargo.toml
    .venv/bin/python benches/report_page.py

1. `report` of a 100k-tensor model (MoE-shaped llama names, tiny F16 tensors: the header is
   what counts), release build, median of RP_RUNS (default 5). Target: < 5 s.
2. That page opened in headless Chromium (Debian's chromium and chromedriver, Selenium):
   `data-ready` (performance.now() when the treemap and the table's first page are drawn,
   i.e. ms since navigation start), and the wall time from `driver.get` to the attribute,
   median of RP_RUNS. Target: < 5 s.
3. The size of a 1,000-tensor page without statistics, and with a made-up statistics object
   per row shaped as `tensorsmith.stats/1`'s (through `tensorsmith.report(..., stats=...)`;
   needs the Python package). Target: < 2 MB.
Data goes to RP_DIR (default target/bench-data/report-page).
"""

import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import save_file

REPO = pathlib.Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("RP_RUNS", "5"))
DIR = pathlib.Path(os.environ.get("RP_DIR", REPO / "target" / "bench-data" / "report-page"))
BIN = os.environ.get("TENSORSMITH_BIN", str(REPO / "target" / "release" / "tensorsmith"))


def moe_model(path, layers=80, experts=416):
    """layers x (experts x 3 expert matrices + 4 attention + 2 norms) + 3 tensors."""
    t = {"model.embed_tokens.weight": np.zeros((8, 4), np.float16),
         "model.norm.weight": np.zeros(4, np.float16),
         "lm_head.weight": np.zeros((8, 4), np.float16)}
    z = np.zeros((4, 4), np.float16)
    for i in range(layers):
        p = f"model.layers.{i}."
        for k in ["q_proj", "k_proj", "v_proj", "o_proj"]:
            t[p + f"self_attn.{k}.weight"] = z
        t[p + "input_layernorm.weight"] = np.zeros(4, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.zeros(4, np.float32)
        for e in range(experts):
            for k in ["w1", "w2", "w3"]:
                t[p + f"block_sparse_moe.experts.{e}.{k}.weight"] = z
    save_file(t, str(path))
    return len(t)


def llama_model(path, tensors=1000):
    t, i = {}, 0
    while len(t) < tensors:
        for k in ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                  "input_layernorm", "post_attention_layernorm", "rotary_emb"]:
            if len(t) < tensors:
                t[f"model.layers.{i}.{k}.weight"] = np.zeros((4, 4), np.float16)
        i += 1
    save_file(t, str(path))
    return sorted(t)


def stats_object(name, i):
    """A float tensor's object with every key of tensorsmith.stats/1, typical widths."""
    return {"name": name, "type": "BF16", "shape": [4096, 4096], "elements": 16777216,
            "kind": "float", "dtype": "BF16", "not_measured": None, "count": 16777216,
            "min": -0.123456789 - i, "max": 0.118234567 + i, "mean": -1.2345678e-05,
            "std": 0.0201234567, "nan": 0, "pos_inf": 0, "neg_inf": 0, "zeros": 1234,
            "subnormals": 0, "exponents": {"first": -133, "counts": [
                int(x) for x in np.random.default_rng(i).integers(0, 5_000_000, 130)]},
            "overflow": {"f16": 0.0, "bf16": 0.0, "f8_e4m3fn": 0.0, "f8_e5m2": 0.0},
            "flush": {"f16": 0.00012345678, "bf16": 0.0, "f8_e4m3fn": 0.0123456789,
                      "f8_e5m2": 0.000987654321}, "histogram": None}


def median_time(cmd):
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        subprocess.run(cmd, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


def browser_times(page):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1400,1000"]:
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=opts)
    ready, wall = [], []
    try:
        for _ in range(RUNS):
            d.get("about:blank")
            t = time.perf_counter()
            d.get(page.resolve().as_uri())
            WebDriverWait(d, 60).until(
                lambda x: x.find_element(By.TAG_NAME, "html").get_attribute("data-ready"))
            wall.append(time.perf_counter() - t)
            ready.append(float(d.find_element(By.TAG_NAME, "html").get_attribute("data-ready")) / 1000)
    finally:
        d.quit()
    return statistics.median(ready), statistics.median(wall)


def main():
    DIR.mkdir(parents=True, exist_ok=True)
    big = DIR / "moe100k.safetensors"
    n = moe_model(big)
    page = DIR / "moe100k.html"
    med, best = median_time([BIN, "report", str(big), "-o", str(page), "-q"])
    print(f"report of {n:,} tensors: median {med:.3f} s (best {best:.3f} s), "
          f"page {page.stat().st_size / 1e6:.1f} MB   target < 5 s")
    ready, wall = browser_times(page)
    print(f"headless Chromium, {n:,} tensors: data-ready at {ready:.2f} s after navigation "
          f"start, {wall:.2f} s from driver.get (medians of {RUNS})   target < 5 s")

    small = DIR / "llama1k.safetensors"
    names = llama_model(small)
    plain = DIR / "llama1k.html"
    subprocess.run([BIN, "report", str(small), "-o", str(plain), "-q"], check=True)
    print(f"1,000-tensor page without stats: {plain.stat().st_size / 1e6:.3f} MB   target < 2 MB")
    try:
        import tensorsmith
    except ImportError:
        print("1,000-tensor page with stats: skipped (no tensorsmith Python package)")
        return 0
    with_stats = DIR / "llama1k_stats.html"
    tensorsmith.report(small, with_stats, stats={m: stats_object(m, i) for i, m in enumerate(names)})
    print(f"1,000-tensor page with a stats object per row: {with_stats.stat().st_size / 1e6:.3f} MB"
          "   target < 2 MB")
    ready, wall = browser_times(with_stats)
    print(f"  opened in {wall:.2f} s (data-ready {ready:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
