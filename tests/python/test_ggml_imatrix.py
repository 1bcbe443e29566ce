"""`convert --quantize MIX --imatrix FILE` against llama.cpp's own `llama_model_quantize` given
the same importance matrix as the llama-quantize tool hands it (tests/data/ggml_mix/
imatrix_vectors.json, from `scripts/gen-ggml-imatrix-vectors`): byte for byte, for GGUF and
legacy .dat files; and each rule by which a file or a tensor is refused."""

import hashlib
import json
import pathlib
import struct

import pytest

gguf = pytest.importorskip("gguf")

import ggml_imatrix_files as imx  # noqa: E402
import ggml_mix_models as models  # noqa: E402

VECTORS = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "tests/data/ggml_mix/imatrix_vectors.json")
    .read_text()
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("imx")
    out = {}
    for m in ("llama-gqa", "llama-moe8", "qwen2-tied"):
        out[m] = models.write(m, d / f"{m}.gguf")
        imx.write_gguf(m, d / f"{m}-imatrix.gguf")
        imx.write_dat(m, d / f"{m}-imatrix.dat")
    return d, out


def describe(path):
    r = gguf.GGUFReader(str(path))
    return [f"{t.name} {t.tensor_type.name.lower()} "
            f"{hashlib.sha256(t.data.tobytes()).hexdigest()[:12]}" for t in r.tensors]


@pytest.mark.parametrize("case", VECTORS["cases"],
                         ids=lambda c: f"{c['model']}-{c['ftype']}-{c['imatrix']}")
def test_imatrix_mix_equals_llama_quantize(tsm, files, tmp_path, monkeypatch, case):
    d, inputs = files
    # The file name as the reference recorded it (quantize.imatrix.file is the path as given).
    (tmp_path / case["imatrix"]).write_bytes(
        (d / f"{case['model']}-{case['imatrix']}").read_bytes())
    monkeypatch.chdir(tmp_path)
    tsm.run("convert", "-q", inputs[case["model"]], "out.gguf", "--quantize", case["ftype"],
            "--mix", "--imatrix", case["imatrix"])
    got = describe(tmp_path / "out.gguf")
    assert [t.rsplit(" ", 1)[0] for t in got] == [t.rsplit(" ", 1)[0] for t in case["tensors"]]
    assert got == case["tensors"]
    data = (tmp_path / "out.gguf").read_bytes()
    assert (len(data), hashlib.sha256(data).hexdigest()) == (case["len"], case["sha256"])


def refused(tsm, src, tmp_path, imatrix, *words, ftype="Q4_K_M"):
    p = tsm.run("convert", src, tmp_path / "o.gguf", "--quantize", ftype, "--imatrix", imatrix,
                expect=None)
    err = p.stderr.decode()
    assert p.returncode != 0, err
    assert "importance matrix" in err and str(imatrix) in err or "importance matrix" in err
    for w in words:
        assert w in err, err
    assert not (tmp_path / "o.gguf").exists()
    return err


def test_q2_k_s_needs_an_imatrix(tsm, files, tmp_path):
    _, inputs = files
    p = tsm.run("convert", inputs["llama-gqa"], tmp_path / "o.gguf", "--quantize", "Q2_K_S",
                expect=None)
    assert p.returncode != 0 and "--imatrix" in p.stderr.decode()
    assert not (tmp_path / "o.gguf").exists()


def test_q2_k_s_refuses_a_tensor_without_weights(tsm, files, tmp_path):
    ents = imx.entries("llama-gqa")
    del ents["blk.3.attn_q.weight"]
    f = imx.write_gguf("llama-gqa", tmp_path / "i.gguf", ents)
    refused(tsm, files[1]["llama-gqa"], tmp_path, f, "blk.3.attn_q.weight", ftype="Q2_K_S")


def test_wrong_weight_count_is_refused(tsm, files, tmp_path):
    ents = imx.entries("llama-gqa")
    s, c = ents["blk.1.ffn_up.weight"]
    ents["blk.1.ffn_up.weight"] = (s[:, :128].copy(), c)
    f = imx.write_gguf("llama-gqa", tmp_path / "i.gguf", ents)
    refused(tsm, files[1]["llama-gqa"], tmp_path, f, "blk.1.ffn_up.weight", "128")


def test_legacy_fallbacks_take_the_weights_as_ggml_does(tsm, files, tmp_path):
    """qwen2-tied's ffn_down rows (288) fall back to Q5_0, which ggml quantizes with the
    weights (its vectors case pins the bytes): the tensor differs from the one made without."""
    d, inputs = files
    a, b = tmp_path / "with.gguf", tmp_path / "without.gguf"
    tsm.run("convert", "-q", inputs["qwen2-tied"], a, "--quantize", "Q4_K_M", "--imatrix",
            d / "qwen2-tied-imatrix.gguf")
    tsm.run("convert", "-q", inputs["qwen2-tied"], b, "--quantize", "Q4_K_M")
    got = {t.split(" ")[0]: t for t in describe(a)}
    base = {t.split(" ")[0]: t for t in describe(b)}
    downs = [n for n in got if n.endswith("ffn_down.weight") and " q5_0 " in got[n]]
    assert downs and all(got[n] != base[n] for n in downs)


def test_missing_metadata_is_refused(tsm, files, tmp_path):
    f = imx.write_gguf("llama-gqa", tmp_path / "i.gguf", keys=False)
    refused(tsm, files[1]["llama-gqa"], tmp_path, f, "imatrix.chunk_count")


def test_sums_without_counts_are_refused(tsm, files, tmp_path):
    import gguf as g
    import numpy as np

    w = g.GGUFWriter(str(tmp_path / "i.gguf"), "imatrix")
    w.add_array("imatrix.datasets", ["x"])
    w.add_uint32("imatrix.chunk_count", 1)
    w.add_uint32("imatrix.chunk_size", 512)
    w.add_tensor("blk.0.attn_q.weight.in_sum2", np.ones((1, 256), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    refused(tsm, files[1]["llama-gqa"], tmp_path, tmp_path / "i.gguf",
            "blk.0.attn_q.weight.counts")


def test_non_f32_sums_are_refused(tsm, files, tmp_path):
    import numpy as np

    ents = imx.entries("llama-gqa")
    s, c = ents["output.weight"]
    ents["output.weight"] = (s.astype(np.float16), c)
    f = imx.write_gguf("llama-gqa", tmp_path / "i.gguf", ents)
    refused(tsm, files[1]["llama-gqa"], tmp_path, f, "must be F32")


def test_non_finite_weights_are_refused(tsm, files, tmp_path):
    import numpy as np

    ents = imx.entries("llama-gqa")
    s, c = ents["output.weight"]
    s = s.copy()
    s[0, 3] = np.inf
    ents["output.weight"] = (s, c)
    f = imx.write_gguf("llama-gqa", tmp_path / "i.gguf", ents)
    refused(tsm, files[1]["llama-gqa"], tmp_path, f, "non-finite")


@pytest.mark.parametrize("data, words", [
    (b"", "entry count"),
    (struct.pack("<i", 0), "entry count"),
    (struct.pack("<i", 2) + struct.pack("<i", 3) + b"ab", "name is cut short"),
    (struct.pack("<ii", 1, 1) + b"a" + struct.pack("<ii", 1, 0), "value count"),
    (struct.pack("<ii", 1, 1) + b"a" + struct.pack("<ii", 1, 4) + b"\0" * 8, "fewer than"),
])
def test_bad_legacy_files_are_refused(tsm, files, tmp_path, data, words):
    f = tmp_path / "i.dat"
    f.write_bytes(data)
    err = refused(tsm, files[1]["llama-gqa"], tmp_path, f, words)
    assert "i.dat" in err


def test_an_imatrix_needs_a_mix(tsm, files, tmp_path):
    d, inputs = files
    p = tsm.run("convert", inputs["llama-gqa"], tmp_path / "o.gguf", "--quantize", "Q4_K",
                "--imatrix", d / "llama-gqa-imatrix.gguf", expect=None)
    assert p.returncode != 0 and "mix" in p.stderr.decode()


def test_python_convert_takes_an_imatrix(files, tmp_path, monkeypatch):
    import tensorsmith

    d, inputs = files
    case = next(c for c in VECTORS["cases"] if c["ftype"] == "IQ4_XS")
    (tmp_path / case["imatrix"]).write_bytes((d / f"llama-gqa-{case['imatrix']}").read_bytes())
    monkeypatch.chdir(tmp_path)
    tensorsmith.convert(inputs["llama-gqa"], "o.gguf", quantize="IQ4_XS", mix=True,
                        imatrix=case["imatrix"])
    data = (tmp_path / "o.gguf").read_bytes()
    assert hashlib.sha256(data).hexdigest() == case["sha256"]
    with pytest.raises(tensorsmith.InvalidFile, match="importance matrix"):
        tensorsmith.convert(inputs["llama-gqa"], "x.gguf", quantize="Q4_K_M",
                            imatrix=tmp_path / "o.gguf")
