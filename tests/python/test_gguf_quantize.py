"""GGUF block quantization against the reference: float32 values quantized by
`gguf.quants.quantize` (gguf 0.19.0) and by `tensorsmith.quantize`, compared byte for byte,
for every type gguf-py can quantize: random values at many scales, and blocks of edge cases
(all zeros, one extreme of either sign, ties, tiny and subnormal values, huge values,
infinities, NaN)."""

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import quants  # noqa: E402

import tensorsmith  # noqa: E402

# Exactly the block types gguf 0.19.0 can quantize (BF16 is plain, not a block type).
TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4"]


def test_type_list_is_the_references():
    can = set()
    for t in quants._type_traits:
        if t.name == "BF16":
            continue
        block = gguf.GGML_QUANT_SIZES[t][0]
        try:
            quants.quantize(np.zeros((1, block), np.float32), t)
            can.add(t.name)
        except NotImplementedError:
            pass
    assert can == set(TYPES)


def reference(values, name):
    with np.errstate(all="ignore"):
        return quants.quantize(values, getattr(Q, name))


def check(values, name):
    want = reference(values, name)
    got = tensorsmith.quantize(values, name)
    assert got.shape == want.shape
    if not np.array_equal(got, want):
        block, size = gguf.GGML_QUANT_SIZES[getattr(Q, name)]
        g, w = got.reshape(-1, size), want.reshape(-1, size)
        bad = np.nonzero((g != w).any(axis=1))[0]
        v = values.reshape(-1, block)
        i = bad[0]
        pytest.fail(f"{name}: {len(bad)} blocks differ; first {i}: values {v[i].tolist()}\n"
                    f"  got  {g[i].tolist()}\n  want {w[i].tolist()}")


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_values_match_the_reference(name, seed):
    block = gguf.GGML_QUANT_SIZES[getattr(Q, name)][0]
    rng = np.random.default_rng(seed)
    rows = 48
    scale = np.float32(10.0) ** rng.integers(-30, 30, size=(rows, 1)).astype(np.float32)
    values = (rng.standard_normal((rows, 8 * block)).astype(np.float32) * scale)
    values[::7] += np.float32(3.0)  # blocks with an offset (the affine types' min)
    check(values.astype(np.float32), name)


def edge_blocks(block):
    rng = np.random.default_rng(7)
    base = rng.standard_normal(block).astype(np.float32)
    out = [np.zeros(block, np.float32), np.full(block, -0.0, np.float32)]
    for special in [np.inf, -np.inf, np.nan, 1e38, -1e38, 3e38, 1e-45, -1e-45, 1e-40, 6e-8,
                    65504.0, 65520.0, -65520.0, 1e-30, 2.0 ** -24, 7.999999, 8.0]:
        b = base.copy()
        b[3] = special
        out.append(b)
        out.append(np.full(block, special, np.float32))
    b = base.copy()
    b[5], b[9] = 4.0, -4.0  # a tie for the largest magnitude: the first wins
    out.append(b)
    out.append(np.abs(base))
    out.append(-np.abs(base))
    for pattern in [[-0.0, 0.0], [0.0, -0.0], [0.0, 1.0, -0.0], [-0.0, -1.0, 0.0]]:
        out.append(np.resize(np.array(pattern, np.float32), block))  # signed-zero ties
    nans = base.copy()
    nans[[2, 6]] = np.array([0xFFC00002, 0x7F800001], np.uint32).view(np.float32)
    out.append(nans)  # NaNs with payloads and signs
    out.append(np.linspace(-1, 1, block, dtype=np.float32))
    out.append(np.linspace(-8, 7, block, dtype=np.float32))
    out.append((np.arange(block) % 3 - 1).astype(np.float32) * np.float32(0.5))
    # Powers of two and just below them: MXFP4's exponent from log2 on either side.
    for k in [-130, -127, -20, -1, 0, 1, 2, 10, 60, 127]:
        top = np.float32(2.0 ** k) if k > -150 else np.float32(0)
        b = base / np.abs(base).max() * top
        out.append(b.astype(np.float32))
        b = b.copy()
        b[0] = np.nextafter(top, np.float32(0))
        b[1:] = b[1:] * np.float32(0.5)
        out.append(b.astype(np.float32))
    return np.stack(out).astype(np.float32)


@pytest.mark.parametrize("name", TYPES)
def test_edge_case_blocks_match_the_reference(name):
    block = gguf.GGML_QUANT_SIZES[getattr(Q, name)][0]
    check(edge_blocks(block), name)


@pytest.mark.parametrize("name", TYPES)
def test_one_block_and_many_rows_agree(name):
    # gguf-py works on groups of 16 rows; a single row and a large array come out the same.
    block = gguf.GGML_QUANT_SIZES[getattr(Q, name)][0]
    rng = np.random.default_rng(3)
    check(rng.standard_normal((1, block)).astype(np.float32), name)
    check(rng.standard_normal((4, 5, 3 * block)).astype(np.float32), name)
    check(rng.standard_normal((3000, block)).astype(np.float32), name)


@pytest.mark.parametrize("name", ["Q8_K", "IQ2_XXS", "NVFP4", "F16"])
def test_other_types_are_refused_by_name(name):
    with pytest.raises(tensorsmith.TensorsmithError, match=name.lower()):
        tensorsmith.quantize(np.zeros((1, 256), np.float32), name)


def test_partial_blocks_are_refused():
    with pytest.raises(tensorsmith.TensorsmithError, match="q8_0"):
        tensorsmith.quantize(np.zeros((1, 33), np.float32), "Q8_0")
