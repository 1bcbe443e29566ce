"""`tensorsmith diff --values` against NumPy, and its `--html` page in a real browser.

A tiny llama checkpoint in Hugging Face names (safetensors, F32) and two quantized copies:
- a GGUF written by gguf-py the way llama.cpp's convert_hf_to_gguf.py writes one (GGUF names,
  `general.architecture = llama`, head counts, Q and K rows permuted by a NumPy port of its
  `LlamaModel.permute`), Q8_0 in even layers and Q4_0 in odd ones;
- a GGUF made by `tensorsmith convert --quantize Q8_0` (Hugging Face names kept).
Every metric of every pair equals NumPy's in float64 over `gguf.quants.dequantize`d values
(the GGUF rows put back with the inverse of that permutation). The page opens in headless
Chromium (Debian's `chromium` and `chromium-driver`, driven by Selenium) without console
errors, sets `data-ready`, draws a line per tensor role and a worst-twenty table; a
screenshot goes to target/test-artifacts/diff/. Without Chromium (and without
TENSORSMITH_REQUIRE_BROWSER=1) the browser test is skipped; the numbers are always checked.
"""

import json
import math
import os
import re
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "target" / "test-artifacts" / "diff"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")

LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB = 6, 64, 4, 2, 128, 96
HEAD_DIM = HIDDEN // HEADS
ROLES = {  # Hugging Face part after model.layers.N. -> GGUF part after blk.N.
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
GLOBAL = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}


def permute(weights, n_head, n_head_kv):
    """NumPy port of convert_hf_to_gguf.py's LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def unpermute(weights, n_head, n_head_kv):
    """The inverse, through where permute sends each row."""
    rows = permute(np.arange(weights.shape[0]), n_head, n_head_kv)
    out = np.empty_like(weights)
    out[rows] = weights
    return out


def hf_model():
    rng = np.random.default_rng(32)
    t = {}
    shapes = {
        "self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (KV_HEADS * HEAD_DIM, HIDDEN),
        "self_attn.v_proj": (KV_HEADS * HEAD_DIM, HIDDEN), "self_attn.o_proj": (HIDDEN, HIDDEN),
        "mlp.gate_proj": (FFN, HIDDEN), "mlp.up_proj": (FFN, HIDDEN),
        "mlp.down_proj": (HIDDEN, FFN), "input_layernorm": (HIDDEN,),
        "post_attention_layernorm": (HIDDEN,),
    }
    for n in range(LAYERS):
        for part, shape in shapes.items():
            scale = 0.02 * (1 + n / 2)  # later layers: larger weights, larger errors
            t[f"model.layers.{n}.{part}.weight"] = (rng.standard_normal(shape) * scale).astype(np.float32)
    t["model.embed_tokens.weight"] = rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32)
    t["model.norm.weight"] = np.ones(HIDDEN, np.float32)
    t["lm_head.weight"] = rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32)
    return t


def gguf_name(hf):
    stem = hf.removesuffix(".weight")
    if stem in GLOBAL:
        return GLOBAL[stem] + ".weight"
    _, _, n, part = stem.split(".", 3)
    return f"blk.{n}.{ROLES[part]}.weight"


def write_llama_gguf(path, tensors):
    """As convert_hf_to_gguf.py would (names, permuted Q/K), then quantized by gguf-py."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    for name, x in tensors.items():
        if name.endswith("q_proj.weight"):
            x = permute(x, HEADS, HEADS)
        elif name.endswith("k_proj.weight"):
            x = permute(x, HEADS, KV_HEADS)
        if x.ndim == 2:
            layer = re.search(r"\.(\d+)\.", name)
            qt = gguf.GGMLQuantizationType.Q4_0 if layer and int(layer.group(1)) % 2 else gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(gguf_name(name), gguf.quants.quantize(x, qt), raw_dtype=qt)
        else:
            w.add_tensor(gguf_name(name), x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def dequantized(path):
    """Every tensor of a GGUF file as float32 NumPy arrays in NumPy shape order."""
    out = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        shape = tuple(int(d) for d in reversed(t.shape))
        out[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
    return out


def metrics(a, b):
    """NumPy's float64 metrics, with the conventions of tensorsmith's diff JSON."""
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = a - b
    aa, bb, dd = np.sum(a * a), np.sum(b * b), np.sum(d * d)
    rmse = math.sqrt(dd / a.size)
    return {
        "max_abs_diff": float(np.max(np.abs(d))),
        "rmse": rmse,
        "rel_rmse": rmse / math.sqrt(aa / a.size) if aa > 0 else None,
        "cosine": float(np.sum(a * b) / (math.sqrt(aa) * math.sqrt(bb))) if aa > 0 and bb > 0 else None,
        "snr_db": (10 * math.log10(aa / dd) if dd > 0 else "inf") if aa > 0 else (None if dd == 0 else "-inf"),
    }


def assert_metrics(row, want):
    for k, w in want.items():
        got = row[k]
        if w is None or isinstance(w, str):
            assert got == w, (row["name"], k, got, w)
        else:
            assert got == pytest.approx(w, rel=1e-9, abs=1e-15), (row["name"], k, got, w)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("diff")
    t = hf_model()
    hf = d / "hf.safetensors"
    save_file(t, str(hf))
    gg = d / "llama.gguf"
    write_llama_gguf(gg, t)
    return d, t, hf, gg


def diff_json(tsm, *args, expect=1):
    return json.loads(tsm.run("diff", "--values", "--all", "--json", *args, expect=expect).stdout)


def test_metrics_equal_numpy_through_the_llama_map(tsm, models):
    _, t, hf, gg = models
    v = diff_json(tsm, hf, gg)
    assert v["values"]["name_map"] == "llama"
    assert v["values"]["not_compared"] == []
    rows = {r["name"]: r for r in v["values"]["compared"]}
    assert set(rows) == set(t), "every tensor pairs"
    b = dequantized(gg)
    for name, a in t.items():
        r = rows[name]
        assert r["b_name"] == gguf_name(name)
        x = b[gguf_name(name)]
        if name.endswith("q_proj.weight"):
            x = unpermute(x, HEADS, HEADS)
        elif name.endswith("k_proj.weight"):
            x = unpermute(x, HEADS, KV_HEADS)
        assert r["reordered"] == (name.endswith(("q_proj.weight", "k_proj.weight")))
        assert_metrics(r, metrics(a, x))
        # The rows really were put back: quantized Q/K are close to the originals.
        assert r["cosine"] is not None and r["cosine"] > 0.9, r
    # GGUF first, Hugging Face second: the same pairs, A's rows reordered instead.
    back = {r["name"]: r for r in diff_json(tsm, gg, hf)["values"]["compared"]}
    assert back["blk.3.attn_k.weight"]["b_name"] == "model.layers.3.self_attn.k_proj.weight"
    assert back["blk.3.attn_k.weight"]["rmse"] == pytest.approx(rows["model.layers.3.self_attn.k_proj.weight"]["rmse"], rel=1e-12)


def test_unpermute_inverts_the_converters_permute():
    x = np.arange(HIDDEN * 3, dtype=np.float32).reshape(HIDDEN, 3)
    for kv in (HEADS, KV_HEADS, None):
        assert np.array_equal(unpermute(permute(x, HEADS, kv), HEADS, kv), x)


def test_metrics_equal_numpy_for_tensorsmith_quantized_copies(tsm, models):
    d, t, hf, _ = models
    for qt in ("Q8_0", "Q4_0"):
        out = d / f"hf-{qt}.gguf"
        tsm.convert(hf, out, "--quantize", qt)
        v = diff_json(tsm, hf, out)
        assert v["values"]["name_map"] is None, "tensorsmith's GGUF keeps the Hugging Face names"
        rows = {r["name"]: r for r in v["values"]["compared"]}
        b = dequantized(out)
        assert set(rows) == set(t)
        for name, a in t.items():
            assert_metrics(rows[name], metrics(a, b[name]))


def test_python_diff_takes_rename_and_html(models, tmp_path):
    tensorsmith = pytest.importorskip("tensorsmith")
    d, t, hf, gg = models
    page = tmp_path / "py.html"
    v = tensorsmith.diff(hf, gg, values=True, name_map="none", html=page,
                         rename=["model.layers.{N}.mlp.down_proj.weight=blk.{N}.ffn_down.weight"])
    names = [r["name"] for r in v["values"]["compared"]]
    assert names == [f"model.layers.{n}.mlp.down_proj.weight" for n in range(LAYERS)]
    assert page.read_text().count('id="diff-data"') == 1
    with pytest.raises(ValueError):
        tensorsmith.diff(hf, gg, html=page)


# ---- the page in a browser ----

def _have_browser():
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


@pytest.fixture(scope="module")
def browser():
    if not _have_browser():
        if os.environ.get("TENSORSMITH_REQUIRE_BROWSER") == "1":
            raise RuntimeError(f"{CHROMIUM} or {CHROMEDRIVER} missing (apt-get install chromium chromium-driver)")
        pytest.skip("no Chromium here (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1400,1000", "--hide-scrollbars"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    yield drv
    drv.quit()


def test_page_opens_with_a_line_per_role_and_the_worst_twenty(tsm, models, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    d, t, hf, gg = models
    page = d / "diff.html"
    printed = diff_json(tsm, hf, gg, "--html", page)
    html = page.read_text()
    embedded = json.loads(re.search(r'<script type="application/json" id="diff-data">(.*?)</script>', html, re.S).group(1))
    assert embedded == printed
    browser.get(page.resolve().as_uri())
    WebDriverWait(browser, 10).until(lambda b: b.find_element(By.TAG_NAME, "html").get_attribute("data-ready"))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    lines = browser.find_elements(By.CSS_SELECTOR, "#chart path.role-line")
    assert sorted(x.get_attribute("data-role") for x in lines) == sorted(ROLES)
    for x in lines:
        assert x.get_attribute("d").count("L") == LAYERS - 1, x.get_attribute("data-role")
    worst = browser.find_elements(By.CSS_SELECTOR, "#worst tbody tr")
    assert len(worst) == min(20, len(t))
    rel = [r["rel_rmse"] for r in printed["values"]["compared"]]
    top = max(x for x in rel if x is not None)
    first = worst[0].find_elements(By.TAG_NAME, "td")[0].text
    assert next(r for r in printed["values"]["compared"] if r["name"] == first)["rel_rmse"] == top
    assert len(browser.find_elements(By.CSS_SELECTOR, "#pairs tbody tr")) == len(t)
    # Filtering through the legend keeps one role's rows.
    browser.find_element(By.CSS_SELECTOR, '#roles span.role[data-role="mlp.down_proj"]').click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#pairs tbody tr")) == LAYERS
    browser.find_element(By.CSS_SELECTOR, '#roles span.role[data-role="mlp.down_proj"]').click()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    h = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, min(max(h, 600), 6000))
    shot = ARTIFACTS / "llama-q8_0-q4_0.png"
    assert browser.save_screenshot(str(shot))
    browser.set_window_size(1400, 1000)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
