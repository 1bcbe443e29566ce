"""K-quant and IQ4 quantization against ggml itself: `tensorsmith.quantize` and ggml's
`ggml_quantize_chunk` (libggml-base.so of the llama.cpp that llama-cpp-python 0.3.36's sdist
vendors, default portable build, through ctypes: `ggml_ref.py`) compared byte for byte for
Q4_0, Q4_1, Q5_0, Q5_1 (ggml's own search with an importance matrix), Q2_K, Q3_K, Q4_K, Q5_K,
Q6_K, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_S and IQ1_M, with and without an importance matrix,
and IQ2_XXS, IQ2_XS, IQ1_S with one (without, they are refused, as ggml asserts one):
random rows (several seeds, scales and row counts) and edge rows (zeros, constants, ±3e38,
subnormals, one huge value among small ones, zero sub-blocks in live rows).

The library is built by `scripts/ggml-reference` (scripts/test runs it first and sets
TENSORSMITH_REQUIRE_GGML=1, which makes its absence a failure; otherwise these tests are
skipped without it)."""

import os

import numpy as np
import pytest

import ggml_ref
import tensorsmith

TYPES = list(ggml_ref.TYPES)

if ggml_ref.load() is None:
    if os.environ.get("TENSORSMITH_REQUIRE_GGML") == "1":
        raise RuntimeError(f"TENSORSMITH_REQUIRE_GGML=1 but no {ggml_ref.LIB_PATH}: "
                           "run scripts/ggml-reference")
    pytest.skip(f"no reference ggml at {ggml_ref.LIB_PATH} (scripts/ggml-reference builds it)",
                allow_module_level=True)


def check(rows, name, imatrix=None):
    if imatrix is None and name in ggml_ref.NEEDS_IMATRIX:
        # ggml asserts an importance matrix: we refuse, naming the type.
        with pytest.raises(tensorsmith.TensorsmithError, match="importance matrix"):
            tensorsmith.quantize(rows, name)
        return 0
    want = ggml_ref.quantize(rows, name, imatrix)
    got = tensorsmith.quantize(rows, name, imatrix=imatrix)
    assert got.shape == want.shape, (got.shape, want.shape)
    if not np.array_equal(got, want):
        bad = np.nonzero((got != want).any(axis=1))[0]
        r = bad[0]
        i = int(np.nonzero(got[r] != want[r])[0][0])
        pytest.fail(f"{name} imatrix={imatrix is not None}: {len(bad)} of {len(rows)} rows "
                    f"differ; row {r} first at byte {i}: values {rows[r][:8].tolist()}...\n"
                    f"  got  {got[r][i:i + 16].tolist()}\n  want {want[r][i:i + 16].tolist()}")
    return len(rows)


# ggml aborts on IQ1, IQ2 and IQ3 blocks of values beyond about 1e9: their weighted distances to the grid
# overflow (GGML_ASSERT(grid_index >= 0), or scale >= 0): such rows are compared for the other
# types only.
ABORTS_ON_HUGE = {"IQ3_XXS", "IQ3_S", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M"}


def weights(rng, n):
    return rng.uniform(1e-3, 5.0, n).astype(np.float32)


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("with_imatrix", [False, True])
def test_random_rows_match_ggml(name, seed, with_imatrix):
    rng = np.random.default_rng(seed)
    n_per_row = [256, 512, 1024, 4096][seed]
    nrows = [1, 7, 33, 96][seed]
    top = 8 if name in ABORTS_ON_HUGE else 20
    scale = np.float32(10.0) ** rng.integers(-20, top, size=(nrows, 1)).astype(np.float32)
    rows = (rng.standard_normal((nrows, n_per_row)) * scale).astype(np.float32)
    if seed % 2:
        rows += rng.uniform(-0.5, 2.0, (nrows, 1)).astype(np.float32) * scale  # offset rows
    check(rows, name, weights(rng, n_per_row) if with_imatrix else None)


def edge_rows(rng, n):
    rows = [
        np.zeros(n), np.full(n, 1.0), np.full(n, -2.5), np.full(n, 3e38), np.full(n, -3e38),
        rng.choice([3e38, -3e38], n), rng.choice([3e38, -3e38, 0.0, 1.0, -1e-30], n),
        rng.standard_normal(n) * 1e-39, rng.standard_normal(n) * 1e-45,
        np.full(n, 1e-40), rng.choice([0.0, 1e-45, -1e-45], n),
        rng.standard_normal(n) * 1e-20, rng.standard_normal(n) * 1e30,
        np.abs(rng.standard_normal(n)), -np.abs(rng.standard_normal(n)),
        np.sign(rng.standard_normal(n)), np.round(rng.standard_normal(n) * 4) / 4,
        np.linspace(-1, 1, n), np.linspace(0, 1e4, n),
    ]
    one = rng.standard_normal(n) * 1e-3
    one[n // 3] = 1e6
    rows.append(one)
    one = rng.standard_normal(n) * 1e-3
    one[7] = -3e38
    rows.append(one)
    holes = rng.standard_normal(n)
    holes[:32] = 0.0
    holes[64:80] = 1e-30
    holes[128:160] = 5.0
    rows.append(holes)
    return np.stack(rows).astype(np.float32)


@pytest.mark.parametrize("name", TYPES)
def test_edge_rows_match_ggml(name):
    rng = np.random.default_rng(7)
    rows = edge_rows(rng, 512)
    if name in ABORTS_ON_HUGE:
        rows = rows[np.abs(rows).max(axis=1) < 1e8]
        assert len(rows) > 15
    with np.errstate(all="ignore"):
        check(rows, name)
        check(rows, name, weights(rng, 512))
        # Extreme and degenerate importance weights too.
        check(rows, name, np.full(512, 1e-30, np.float32))
        w = weights(rng, 512)
        w[::3] = 0.0
        check(rows, name, w)


@pytest.mark.parametrize("name", TYPES)
def test_many_rows_match_ggml(name):
    # Enough blocks for several parallel tasks on our side.
    rng = np.random.default_rng(11)
    rows = rng.standard_normal((3000, 256)).astype(np.float32)
    check(rows, name)
    check(rows, name, weights(rng, 256))


def test_iq4_nl_takes_rows_of_32():
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((9, 96)).astype(np.float32)
    check(rows, "IQ4_NL")
    check(rows, "IQ4_NL", weights(rng, 96))


@pytest.mark.parametrize("name,n", [("Q4_K", 128), ("Q2_K", 300), ("IQ4_XS", 32),
                                    ("IQ4_NL", 48)])
def test_rows_that_are_not_whole_blocks_are_refused(name, n):
    with pytest.raises(tensorsmith.TensorsmithError, match=name.lower()):
        tensorsmith.quantize(np.zeros((2, n), np.float32), name)


@pytest.mark.parametrize("name", ["Q6_K", "IQ4_NL"])
def test_an_imatrix_of_the_wrong_length_is_refused(name):
    with pytest.raises(tensorsmith.TensorsmithError, match="255 values"):
        tensorsmith.quantize(np.zeros((2, 256), np.float32), name, imatrix=np.ones(255))


def test_an_imatrix_for_a_legacy_type_is_refused():
    with pytest.raises(tensorsmith.TensorsmithError, match="importance matrix"):
        tensorsmith.quantize(np.zeros((2, 32), np.float32), "Q8_0", imatrix=np.ones(32))


@pytest.mark.parametrize("name", ["Q4_KX", "IQ5_XS", ""])
def test_unknown_type_names_are_refused(name):
    with pytest.raises(tensorsmith.TensorsmithError, match="unknown ggml type"):
        tensorsmith.quantize(np.zeros((1, 256), np.float32), name)


def test_dequantized_rows_come_back_close():
    gguf = pytest.importorskip("gguf")
    from gguf import quants
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((16, 1024)).astype(np.float32)
    for name, limit in [("Q2_K", 0.4), ("Q3_K", 0.22), ("Q4_K", 0.12), ("Q5_K", 0.06),
                        ("Q6_K", 0.03), ("IQ4_NL", 0.12), ("IQ4_XS", 0.12)]:
        q = tensorsmith.quantize(rows, name)
        back = quants.dequantize(q, getattr(gguf.GGMLQuantizationType, name))
        err = np.sqrt(np.mean((back - rows) ** 2)) / np.sqrt(np.mean(rows ** 2))
        assert err < limit, (name, err)


@pytest.mark.parametrize("name", ["Q4_K", "Q6_K", "IQ4_NL"])
def test_convert_quantize_gives_ggmls_blocks(tmp_path, name):
    # Python's convert(quantize=...): matrices whose rows are whole blocks become ggml's blocks;
    # rows of 64 are whole blocks only for IQ4_NL, the others keep them F32.
    gguf = pytest.importorskip("gguf")
    import tensorsmith.numpy
    rng = np.random.default_rng(8)
    tensors = {"w": rng.standard_normal((6, 512)).astype(np.float32),
               "narrow": rng.standard_normal((4, 64)).astype(np.float32)}
    st, out = tmp_path / "m.safetensors", tmp_path / "m.gguf"
    tensorsmith.numpy.save_file(tensors, str(st))
    tensorsmith.convert(str(st), str(out), quantize=name)
    got = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    assert got["w"].tensor_type.name == name
    assert got["w"].data.tobytes() == ggml_ref.quantize(tensors["w"], name).tobytes()
    narrow = got["narrow"]
    if name == "IQ4_NL":
        assert narrow.data.tobytes() == ggml_ref.quantize(tensors["narrow"], name).tobytes()
    else:
        assert narrow.tensor_type.name == "F32"
