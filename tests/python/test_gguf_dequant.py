"""GGUF block dequantization against the reference: random block bytes (random f16 scales,
so NaN, infinities and subnormals among them) written by gguf-py's GGUFWriter, dequantized
by `gguf.quants.dequantize` and by tensorsmith (Python `get_tensor(dequantize=True)`, and the
CLI's `convert` to safetensors), compared bit for bit."""

import json

import numpy as np
import pytest
import safetensors.numpy

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import quants  # noqa: E402

import tensorsmith  # noqa: E402

# Every block type gguf 0.19.0 can dequantize (its `_type_traits`, minus the plain BF16).
TYPES = [
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
    "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_NL", "IQ4_XS",
    "TQ1_0", "TQ2_0", "MXFP4", "NVFP4",
]
# Known to the table, not to gguf-py's dequantize: refused by name.
REFUSED = ["Q8_1", "Q8_K", "Q1_0"]

ROWS, BLOCKS_PER_ROW = 64, 24


def test_type_list_is_the_references():
    ref = {t.name for t in quants._type_traits} - {"BF16"}
    assert ref == set(TYPES)
    for name in REFUSED:
        assert getattr(Q, name) not in quants._type_traits


# Byte offsets of each type's f16 scales within a block (IQ1_M's is split: see below).
F16_AT = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ1_S": [0], "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0],
    "IQ4_NL": [0], "IQ4_XS": [0], "TQ1_0": [52], "TQ2_0": [64],
}
# f16 bit patterns forced into the scales of the first blocks: infinities, quiet and
# signalling NaNs of both signs, subnormals, zeros of both signs, the largest finite.
SPECIAL_F16 = [0x7C00, 0xFC00, 0x7C01, 0xFE00, 0x7E00, 0xFD55, 0x0001, 0x83FF, 0x0200,
               0x8000, 0x0000, 0x7BFF, 0xFBFF, 0x0400]
# E8M0 (MXFP4) scale bytes forced likewise: subnormal results, the largest, 2^0.
SPECIAL_E8M0 = [0, 1, 2, 3, 127, 128, 254, 255]


def random_blocks(qtype, seed):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(ROWS, BLOCKS_PER_ROW * size), dtype=np.uint8)
    blocks = data.reshape(-1, size)
    name = qtype.name
    for k in range(min(len(blocks) // 2, 4 * len(SPECIAL_F16))):
        h = SPECIAL_F16[k % len(SPECIAL_F16)]
        for j, at in enumerate(F16_AT.get(name, [])):
            # A second scale (a min) is shifted, so an infinite scale meets a zero min.
            hj = SPECIAL_F16[(k + 10 * j) % len(SPECIAL_F16)]
            blocks[k, at:at + 2] = [hj & 0xFF, hj >> 8]
        if name == "IQ1_M":  # the scale's four nibbles top the four u16 at bytes 48..56
            for i in range(4):
                b = blocks[k, 49 + 2 * i]
                blocks[k, 49 + 2 * i] = (b & 0x0F) | (((h >> (4 * i)) & 0xF) << 4)
        if name == "MXFP4":
            blocks[k, 0] = SPECIAL_E8M0[k % len(SPECIAL_E8M0)]
    # Both scales NaN, with different payloads and signs (which NaN wins is the question).
    if len(F16_AT.get(name, [])) == 2:
        for k in range(len(blocks) // 2, len(blocks) // 2 + 8):
            for at, h in zip(F16_AT[name], (0x7E01 + k % 255, 0xFD00 + k % 255)):
                blocks[k, at:at + 2] = [h & 0xFF, h >> 8]
    return data


def same_bits(ours, ref):
    """Exact bits everywhere (NaN payload and sign included); returns the count of elements
    whose bits differ, and of those where both are NaN. (With two NaN operands, as in
    `d * q + m`, gguf-py's own NaN bits depend on the array shape: its vector loops keep the
    first operand's NaN, as we do, but for a single block its broadcast loop keeps the
    second's. The arrays here are many blocks, so exact bits are required.)"""
    a, b = ours.view(np.uint32), ref.view(np.uint32)
    diff = a != b
    both_nan = np.isnan(ours) & np.isnan(ref)
    return int(diff.sum()), int((diff & both_nan).sum())


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("dequant") / "blocks.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    data = {}
    for i, name in enumerate(TYPES + REFUSED):
        qtype = getattr(Q, name)
        blocks = random_blocks(qtype, 1000 + i)
        data[name] = blocks
        w.add_tensor(name.lower(), blocks, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, data


@pytest.mark.parametrize("name", TYPES)
def test_get_tensor_dequantize_is_bit_identical(gguf_file, name):
    path, data = gguf_file
    ref = quants.dequantize(data[name], getattr(Q, name))
    with tensorsmith.safe_open(path) as f:
        raw = f.get_tensor(name.lower())
        assert raw.dtype == np.uint8 and raw.tobytes() == data[name].tobytes()
        ours = f.get_tensor(name.lower(), dequantize=True)
    assert ours.dtype == np.float32 and ours.shape == ref.shape
    differing, nan_payload = same_bits(ours, ref)
    assert (differing, nan_payload) == (0, 0), f"{differing} values differ ({nan_payload} NaN bits)"
    if name not in ("MXFP4", "NVFP4"):
        # The forced f16 scales reach NaN and infinities.
        assert np.isnan(ref).any() and np.isinf(ref).any(), name


@pytest.mark.parametrize("name", REFUSED)
def test_types_the_reference_cannot_dequantize_are_refused_by_name(gguf_file, name):
    path, _ = gguf_file
    with tensorsmith.safe_open(path) as f:
        with pytest.raises(Exception, match=f"cannot dequantize {name.lower()}"):
            f.get_tensor(name.lower(), dequantize=True)


@pytest.fixture(scope="module")
def gguf_decodable(tmp_path_factory):
    path = tmp_path_factory.mktemp("dequant") / "decodable.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    refs = {}
    for i, name in enumerate(TYPES):
        qtype = getattr(Q, name)
        blocks = random_blocks(qtype, 2000 + i)
        refs[name.lower()] = quants.dequantize(blocks, qtype)
        w.add_tensor(name.lower(), blocks, raw_dtype=qtype)
    w.add_tensor("plain", np.arange(12, dtype=np.float32).reshape(3, 4))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, refs


def test_cli_convert_dequantizes_every_type(tsm, gguf_decodable, tmp_path):
    path, refs = gguf_decodable
    out = tsm.convert(path, tmp_path / "out.safetensors")
    got = safetensors.numpy.load_file(str(out))
    assert got["plain"].tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()
    for name, ref in refs.items():
        assert got[name].dtype == np.float32 and got[name].shape == ref.shape, name
        assert same_bits(got[name], ref) == (0, 0), name


def test_cli_convert_casts_after_dequantizing(tsm, gguf_decodable, tmp_path):
    path, refs = gguf_decodable
    out = tsm.convert(path, tmp_path / "out16.safetensors", "--dtype", "F16")
    got = safetensors.numpy.load_file(str(out))
    for name, ref in refs.items():
        want = ref.astype(np.float16)  # round to nearest even, as tensorsmith's cast
        g = got[name]
        assert g.dtype == np.float16, name
        same = (g.view(np.uint16) == want.view(np.uint16)) | (np.isnan(g) & np.isnan(want))
        assert same.all(), name


def test_cli_convert_refuses_q8_k_by_name(tsm, tmp_path):
    path = tmp_path / "q8k.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    w.add_tensor("w", random_blocks(Q.Q8_K, 7), raw_dtype=Q.Q8_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = tsm.run("convert", path, tmp_path / "out.safetensors", expect=None)
    assert p.returncode != 0
    err = p.stderr.decode()
    assert "cannot dequantize q8_k" in err and "'w'" in err, err
    assert not (tmp_path / "out.safetensors").exists()


def test_diff_values_against_the_source(tsm, tmp_path):
    rng = np.random.default_rng(5)
    src = rng.standard_normal((16, 256)).astype(np.float32)
    safetensors.numpy.save_file({"w": src}, str(tmp_path / "src.safetensors"))
    q = quants.quantize(src, Q.Q8_0)
    path = tmp_path / "q.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    w.add_tensor("w", q, raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ref = quants.dequantize(q, Q.Q8_0)
    err = np.abs(ref.astype(np.float64) - src.astype(np.float64))
    p = tsm.run("diff", "--values", "--json", path, tmp_path / "src.safetensors", expect=None)
    d = json.loads(p.stdout)
    (v,) = [v for v in d["values"]["compared"] if v["name"] == "w"]
    assert v["max_abs_diff"] == pytest.approx(err.max(), rel=1e-12)
    assert v["mean_abs_diff"] == pytest.approx(err.mean(), rel=1e-9)
    assert 0 < v["max_abs_diff"] < 0.05


def test_block_tensors_are_rows_of_bytes_that_shape_dtype_and_slices_agree_on(tmp_path):
    # A Q8_0 [64, 256] tensor: 8 blocks of 34 bytes per row.
    rng = np.random.default_rng(3)
    values = rng.standard_normal((64, 256)).astype(np.float32)
    blocks = quants.quantize(values, Q.Q8_0)
    p = tmp_path / "q.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_tensor("q", blocks, raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    want = quants.dequantize(blocks, Q.Q8_0)
    with tensorsmith.safe_open(p) as f:
        assert f.get_dtype("q") == "U8" and f.get_shape("q") == [64, 272]
        full = f.get_tensor("q")
        assert full.shape == (64, 272) and full.tobytes() == blocks.tobytes()
        s = f.get_slice("q")
        assert s.get_shape() == [64, 272] and s.get_dtype() == "U8"
        assert s[0:2].shape == (2, 272) and s[0:2].tobytes() == blocks[0:2].tobytes()
        assert s[0:2, 0:10].tolist() == blocks[0:2, 0:10].tolist()
        d = f.get_slice("q", dequantize=True)
        assert d.get_shape() == [64, 256] and d.get_dtype() == "F32"
        assert np.array_equal(d[0:2], want[0:2]) and np.array_equal(d[5, 3:9], want[5, 3:9])
        assert np.array_equal(f.get_tensor("q", dequantize=True), want)
