"""`tensorsmith report` pages opened in a real browser: headless Chromium (Debian's `chromium`
and `chromium-driver`) driven by Selenium, no downloads. Each page must open without console
errors, set `data-ready`, draw a treemap box per top-level name group, hold every tensor in its
table (across pages), filter and sort; statistics columns appear when rows carry `stats`.
Screenshots are written to target/test-artifacts/report/ (the path is printed).

scripts/test installs Chromium when absent and sets TENSORSMITH_REQUIRE_BROWSER=1; without
it these tests are skipped on machines that have no Chromium.
"""

import json
import os
import re
from pathlib import Path

import gguf
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "target" / "test-artifacts" / "report"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
LAYERS = 24


def _have_browser():
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


if not _have_browser():
    if os.environ.get("TENSORSMITH_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"{CHROMIUM} or {CHROMEDRIVER} missing (apt-get install chromium chromium-driver)")
    pytest.skip("no Chromium here (apt-get install chromium chromium-driver)", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def new_browser():
    """Headless Chromium at Debian's paths (Selenium Manager is never asked to download)."""
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1400,1000", "--hide-scrollbars"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)


@pytest.fixture(scope="module")
def browser():
    d = new_browser()
    yield d
    d.quit()


def open_page(browser, page, timeout=10):
    """Opens a page and waits for data-ready; returns its value (ms since navigation)."""
    browser.get(Path(page).resolve().as_uri())
    WebDriverWait(browser, timeout).until(
        lambda d: d.find_element(By.TAG_NAME, "html").get_attribute("data-ready"))
    return float(browser.find_element(By.TAG_NAME, "html").get_attribute("data-ready"))


def severe_logs(browser):
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(browser, name):
    """The whole page as a PNG under target/test-artifacts/report/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    h = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, min(max(h, 600), 6000))
    browser.execute_script("window.scrollTo(0, 0)")
    path = ARTIFACTS / f"{name}.png"
    assert browser.save_screenshot(str(path))
    browser.set_window_size(1400, 1000)
    print(f"screenshot: {path}")
    assert path.stat().st_size > 10_000
    return path


def embedded(page):
    html = Path(page).read_text()
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def table_names(browser):
    return [tr.get_attribute("data-name") for tr in browser.find_elements(By.CSS_SELECTOR, "#tensors tbody tr")]


def all_table_names(browser):
    """Every row of the table, page after page."""
    names = table_names(browser)
    nxt = browser.find_element(By.ID, "next")
    while nxt.is_enabled():
        nxt.click()
        names += table_names(browser)
    return names


def rows_shown(browser):
    return int(browser.find_element(By.ID, "tensors").get_attribute("data-rows"))


def type_filter(browser, text):
    f = browser.find_element(By.ID, "filter")
    f.clear()
    if text:
        f.send_keys(text)
    else:  # clear() types nothing, so no input event: one as a user's delete would give
        browser.execute_script("arguments[0].dispatchEvent(new Event('input'))", f)
    WebDriverWait(browser, 5).until(
        lambda d: d.find_element(By.ID, "tensors").get_attribute("data-filter") == text)


# ---- models ----

def llama_safetensors(path, layers=LAYERS):
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    t = {"model.embed_tokens.weight": rng.standard_normal((256, 32)).astype(np.float16),
         "model.norm.weight": np.ones(32, np.float16),
         "lm_head.weight": rng.standard_normal((256, 32)).astype(np.float16),
         # Markup in a name is shown as text, never run.
         "odd.<img src=x onerror=alert(1)>": np.zeros(2, np.float32)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for k in ["q_proj", "k_proj", "v_proj", "o_proj"]:
            t[p + f"self_attn.{k}.weight"] = rng.standard_normal((32, 32)).astype(np.float16)
        for k in ["gate_proj", "up_proj", "down_proj"]:
            t[p + f"mlp.{k}.weight"] = rng.standard_normal((64, 32)).astype(np.float16)
        t[p + "input_layernorm.weight"] = np.ones(32, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(32, np.float32)
    save_file(t, str(path), metadata={"format": "pt", "note": "</script><b>not bold</b>"})
    return sorted(t)


def mixed_gguf(path, layers=8):
    """A llama-shaped GGUF mixing Q4_K and Q6_K as Q4_K_M does (attn_v and ffn_down in Q6_K
    for some layers), norms in F32."""
    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("mixed-test")
    w.add_block_count(layers)
    names = []

    def quant(name, rows, cols, qtype):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
        raw[:, :2] = 0  # scales zero: finite values
        w.add_tensor(name, raw, raw_dtype=qtype)
        names.append(name)

    def f32(name, n):
        w.add_tensor(name, np.ones(n, np.float32))
        names.append(name)

    quant("token_embd.weight", 64, 256, Q.Q4_K)
    for i in range(layers):
        more = i < layers // 8 or i >= 7 * layers // 8 or (i - layers // 8) % 3 == 2
        f32(f"blk.{i}.attn_norm.weight", 256)
        for k in ["attn_q", "attn_k", "attn_output"]:
            quant(f"blk.{i}.{k}.weight", 256, 256, Q.Q4_K)
        quant(f"blk.{i}.attn_v.weight", 64, 256, Q.Q6_K if more else Q.Q4_K)
        f32(f"blk.{i}.ffn_norm.weight", 256)
        quant(f"blk.{i}.ffn_gate.weight", 512, 256, Q.Q4_K)
        quant(f"blk.{i}.ffn_up.weight", 512, 256, Q.Q4_K)
        quant(f"blk.{i}.ffn_down.weight", 256, 512, Q.Q6_K if more else Q.Q4_K)
    f32("output_norm.weight", 256)
    quant("output.weight", 64, 256, Q.Q6_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(names)


@pytest.fixture(scope="module")
def llama_page(tmp_path_factory, tsm):
    d = tmp_path_factory.mktemp("report")
    names = llama_safetensors(d / "llama.safetensors")
    tsm.run("report", d / "llama.safetensors", "-o", d / "llama.html", "--title", "llama <test>")
    return d / "llama.html", names


@pytest.fixture(scope="module")
def gguf_page(tmp_path_factory, tsm):
    d = tmp_path_factory.mktemp("report")
    names = mixed_gguf(d / "mixed.gguf")
    tsm.run("report", d / "mixed.gguf", "-o", d / "mixed.html", "-q")
    return d / "mixed.html", names


# ---- tests ----

def test_llama_page_opens_without_errors_and_shows_everything(browser, llama_page):
    page, names = llama_page
    ready_ms = open_page(browser, page)
    assert severe_logs(browser) == []
    assert 0 < ready_ms < 5000
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert browser.title == "llama <test>"
    # A treemap box for each top-level group.
    tops = {b.get_attribute("data-group") for b in
            browser.find_elements(By.CSS_SELECTOR, "#treemap rect[data-depth='1']")}
    assert tops == {n.split(".")[0] for n in names} == {"model", "lm_head", "odd"}
    # Layers sit side by side: one box per layer, in order.
    layers = [b.get_attribute("data-group") for b in
              browser.find_elements(By.CSS_SELECTOR, "#treemap rect[data-depth='3']")
              if b.get_attribute("data-group").startswith("model.layers.")]
    assert layers == [f"model.layers.{i}" for i in range(LAYERS)]
    # Every tensor in the table, across its pages.
    assert rows_shown(browser) == len(names)
    assert browser.find_element(By.ID, "tensors").get_attribute("data-pages") == "3"
    shown = all_table_names(browser)
    assert sorted(shown) == names
    # The odd name is text in a cell.
    assert "odd.<img src=x onerror=alert(1)>" in shown
    assert browser.find_elements(By.CSS_SELECTOR, "#tensors img, #treemap img") == []
    assert "</script><b>not bold</b>" in browser.find_element(By.ID, "metadata").get_attribute("textContent")
    screenshot(browser, "llama")


def test_filtering(browser, llama_page):
    page, names = llama_page
    open_page(browser, page)
    type_filter(browser, "q_proj")
    want = [n for n in names if "q_proj" in n]
    assert rows_shown(browser) == len(want) == LAYERS
    assert sorted(table_names(browser)) == sorted(want)
    # Terms are and-ed; ^ anchors a name prefix.
    type_filter(browser, "^model.layers.1. mlp")
    assert sorted(table_names(browser)) == sorted(
        n for n in names if n.startswith("model.layers.1.") and "mlp" in n)
    # Types filter too.
    type_filter(browser, "F32")
    assert rows_shown(browser) == 2 * LAYERS + 1
    type_filter(browser, "no-such-tensor")
    assert rows_shown(browser) == 0 and table_names(browser) == []
    assert "no match" in browser.find_element(By.ID, "page").text
    # A click on a treemap box filters by its group.
    browser.find_element(By.ID, "filter").clear()
    browser.execute_script(
        "document.querySelector(\"#treemap rect[data-group='lm_head']\")"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    assert browser.find_element(By.ID, "filter").get_attribute("value") == "^lm_head."
    assert table_names(browser) == ["lm_head.weight"]
    assert severe_logs(browser) == []


def test_sorting(browser, llama_page):
    page, names = llama_page
    open_page(browser, page)
    head = lambda key: browser.find_element(By.CSS_SELECTOR, f"#tensors th[data-key='{key}']")  # noqa: E731
    head("name").click()
    assert table_names(browser) == names[:100]
    head("name").click()
    assert table_names(browser) == sorted(names, reverse=True)[:100]
    # Numbers sort as numbers, largest first on the first click.
    head("parameters").click()
    rows = {r["name"]: r for r in embedded(page)["tensors"]}
    params = [rows[n]["parameters"] for n in table_names(browser)]
    assert params == sorted(params, reverse=True) and params[0] == 256 * 32
    head("layer").click()
    layers = [rows[n]["layer"] for n in table_names(browser)]
    assert layers[:9] == [0] * 9 and layers == sorted(layers)
    assert severe_logs(browser) == []


def test_gguf_quant_mix(browser, gguf_page):
    page, names = gguf_page
    open_page(browser, page)
    assert severe_logs(browser) == []
    tops = {b.get_attribute("data-group") for b in
            browser.find_elements(By.CSS_SELECTOR, "#treemap rect[data-depth='1']")}
    assert tops == {n.split(".")[0] for n in names}
    assert sorted(all_table_names(browser)) == names
    # Bits per weight by layer: Q4_K and Q6_K segments; the Q6_K layers stand taller.
    segs = browser.find_elements(By.CSS_SELECTOR, "#bpw rect")
    kinds = {(s.get_attribute("data-layer"), s.get_attribute("data-type")) for s in segs}
    assert ("0", "q6_k") in kinds and ("1", "q6_k") not in kinds and ("1", "q4_k") in kinds
    assert {"other", "0", "7"} <= {layer for layer, _ in kinds}
    height = {}
    for s in segs:
        height[s.get_attribute("data-layer")] = height.get(s.get_attribute("data-layer"), 0) + float(s.get_attribute("height"))
    assert height["0"] > height["1"]
    type_filter(browser, "q6_k")
    assert rows_shown(browser) == sum(1 for r in embedded(page)["tensors"] if r["dtype"] == "q6_k")
    screenshot(browser, "gguf_mixed")


@pytest.mark.parametrize("name", ["gguf/every_type.gguf", "gguf/no_tensors.gguf", "gguf/vocab_150k.gguf",
                                  "safetensors/empty.safetensors", "safetensors/odd_names.safetensors",
                                  "safetensors/mixed_meta3.safetensors", "onnx"])
def test_bundled_files(browser, tmp_path, tsm, name):
    src = ROOT / "tests/data" / name
    if src.is_dir():
        src = sorted(src.rglob("*.onnx"))[0]
    page = tmp_path / "p.html"
    tsm.run("report", src, "-o", page)
    open_page(browser, page)
    assert severe_logs(browser) == []
    want = sorted(r["name"] for r in embedded(page)["tensors"])
    assert sorted(all_table_names(browser)) == want
    tops = {b.get_attribute("data-group") for b in
            browser.find_elements(By.CSS_SELECTOR, "#treemap rect[data-depth='1']")}
    assert tops == {n.split(".")[0] for n in want}


def stats_for(name, i):
    """A per-tensor object of `tensorsmith.stats/1`'s keys, made up."""
    return {"name": name, "type": "F16", "shape": [32, 32], "elements": 1024, "kind": "float",
            "dtype": "F16", "not_measured": None, "count": 1024 - (i % 3), "min": -1.5 - i,
            "max": 2.0 + i, "mean": 0.001 * i, "std": 0.5 + i / 100, "nan": i % 3,
            "pos_inf": 0, "neg_inf": 0, "zeros": i, "subnormals": 0,
            "exponents": {"first": -12, "counts": [1, 4, 9, 30, 120, 400, 300, 100, 40, 5]},
            "overflow": {"f16": 0.0, "bf16": 0.0, "f8_e4m3fn": 0.001 * (i % 5), "f8_e5m2": 0.0},
            "flush": {"f16": 0.0, "bf16": 0.0, "f8_e4m3fn": 0.01, "f8_e5m2": 0.002},
            "histogram": None}


def test_stats_columns(browser, tmp_path):
    ts = pytest.importorskip("tensorsmith")
    model = tmp_path / "m.safetensors"
    names = llama_safetensors(model, layers=4)
    stats = {n: stats_for(n, i) for i, n in enumerate(names) if "self_attn" in n}
    page = tmp_path / "stats.html"
    assert ts.report(model, page, stats=stats) == page.stat().st_size
    rows = embedded(page)["tensors"]
    assert sum("stats" in r for r in rows) == len(stats)
    open_page(browser, page)
    assert severe_logs(browser) == []
    heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#tensors th")]
    for h in ["min", "max", "mean", "std", "nan", "zeros", "exponents", "overflow f8_e4m3fn", "flush f16"]:
        assert h in heads, heads
    # NaN counts above zero are marked; the exponent histogram is drawn.
    type_filter(browser, "q_proj")
    assert browser.find_elements(By.CSS_SELECTOR, "#tensors td.bad")
    assert browser.find_elements(By.CSS_SELECTOR, "#tensors td svg.spark rect")
    # Sort by a statistic: rows without stats last.
    type_filter(browser, "")
    browser.find_element(By.CSS_SELECTOR, "#tensors th[data-key='stats.std']").click()
    by = {r["name"]: r for r in rows}
    shown = table_names(browser)
    stds = [by[n]["stats"]["std"] for n in shown[:len(stats)]]
    assert stds == sorted(stds, reverse=True)
    assert all("stats" in by[n] for n in shown[:len(stats)])
    assert all("stats" not in by[n] for n in shown[len(stats):])
    screenshot(browser, "stats")


def test_measured_stats_on_the_page(browser, tmp_path, tsm):
    """`report --stats` (and Python's stats=True) puts what `stats` measures in every row, and
    the page draws it: real statistics, NaN, Inf and all-zero tensors included."""
    ts = pytest.importorskip("tensorsmith")
    rng = np.random.default_rng(3)
    tensors = {
        "model.layers.0.mlp.w": rng.standard_normal((64, 32)).astype(np.float32),
        "model.layers.1.mlp.w": np.array([1.0, np.nan, np.inf, -3.0], np.float32),
        "model.layers.1.mlp.b": np.zeros(8, np.float32),
        "model.embed.ids": np.arange(10, dtype=np.int32),
    }
    model = tmp_path / "m.safetensors"
    ts.save_file(tensors, model)
    page = tmp_path / "measured.html"
    tsm.run("report", model, "-o", page, "--stats")
    rows = {r["name"]: r for r in embedded(page)["tensors"]}
    measured = ts.stats(model)
    assert set(rows) == set(measured) == set(tensors)
    for name, row in rows.items():
        assert row["stats"] == measured[name], name
    assert rows["model.layers.1.mlp.w"]["stats"]["nan"] == 1
    py_page = tmp_path / "py.html"
    ts.report(model, py_page, stats=True)
    assert {r["name"]: r["stats"] for r in embedded(py_page)["tensors"]} == {
        n: r["stats"] for n, r in rows.items()}
    open_page(browser, page)
    assert severe_logs(browser) == []
    heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#tensors th")]
    for h in ["min", "max", "mean", "std", "nan"]:
        assert h in heads, heads
    assert sorted(table_names(browser)) == sorted(tensors)
    assert browser.find_elements(By.CSS_SELECTOR, "#tensors td.bad")
    screenshot(browser, "measured")


def test_many_tensors_page_is_ready_in_time(browser, tmp_path, tsm):
    """20,000 tensors (the 100k figure is in benches/report_page.py): paged table, grouped
    treemap, ready within the target."""
    from safetensors.numpy import save_file
    t = {f"model.layers.{i // 20}.block.{i % 20}.weight": np.zeros(4, np.float16) for i in range(20_000)}
    save_file(t, str(tmp_path / "many.safetensors"))
    page = tmp_path / "many.html"
    tsm.run("report", tmp_path / "many.safetensors", "-o", page)
    ready_ms = open_page(browser, page, timeout=30)
    assert ready_ms < 5000, ready_ms
    assert severe_logs(browser) == []
    assert rows_shown(browser) == 20_000
    assert len(table_names(browser)) == 100
    assert len(browser.find_elements(By.CSS_SELECTOR, "#treemap rect")) < 5000
    type_filter(browser, "^model.layers.999.")
    WebDriverWait(browser, 5).until(lambda d: rows_shown(d) == 20)

