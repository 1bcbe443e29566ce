"""Dense tensors, both ways, against the reference `ztensor` generation of this venv.

theirs -> ours: the reference writes every dtype it supports (raw and, where its Python API
can, zstd); `tensorsmith verify` accepts the file, `inspect --json` describes it, `hash`
gives the same IDs as for the converted file, and `convert` to safetensors gives the same
bits (parsed here in pure Python).

ours -> theirs: a safetensors file written in pure Python goes through `tensorsmith convert
--zt-version GEN` with and without compression and digests; the reference reads the same
bits back, and its own digest check catches a flipped byte.

round trip: safetensors -> .zt -> safetensors is byte-identical.
"""

import numpy as np
import pytest

import reference
import stfile

GEN, VERSION = reference.installed_generation()
R = reference.CLASSES[GEN]


def expected_inspect(tensors):
    return {
        name: (dtype, list(shape), stfile.stored_nbytes(dtype, shape), stfile.nelem(shape))
        for name, (dtype, shape, _) in tensors.items()
    }


def check_inspect(tsm, path, tensors, metadata=None):
    j = tsm.inspect(path)
    assert j["schema"] == "tensorsmith.inspect/1"
    assert (j["format"], j["format_version"]) == ("ztensor", GEN)
    assert j["file_size"] == path.stat().st_size
    assert j["tensor_count"] == len(tensors)
    got = {t["name"]: (t["dtype"], t["shape"], t["byte_length"], t["parameters"]) for t in j["tensors"]}
    assert got == expected_inspect(tensors)
    assert j["metadata"] == (metadata or {})
    assert j["total_parameters"] == sum(stfile.nelem(s) for _, s, _ in tensors.values())
    assert j["total_bytes"] == sum(stfile.stored_nbytes(d, s) for d, s, _ in tensors.values())
    per = {}
    for dtype, shape, _ in tensors.values():
        c = per.setdefault(dtype, [0, 0, 0])
        c[0] += 1
        c[1] += stfile.nelem(shape)
        c[2] += stfile.stored_nbytes(dtype, shape)
    assert {d["dtype"]: [d["tensors"], d["parameters"], d["bytes"]] for d in j["dtypes"]} == per
    return j


def check_verify(tsm, path):
    out = tsm.run("verify", path).stdout.decode()
    assert out.startswith(f"ok: {path}"), out


# ---------------------------------------------------------------------------------------------
# theirs -> ours


@pytest.mark.parametrize("encoding", R.encodings)
@pytest.mark.parametrize("dtype", R.dense_dtypes)
def test_reference_file_reads_identically(tsm, ref, tmp_path, dtype, encoding):
    tensors = stfile.sample_tensors(dtype, "theirs")
    src = tmp_path / "theirs.zt"
    ref.write_dense(src, tensors, encoding)
    # The reference itself reads back what it wrote (guards the adapter).
    stfile.assert_same(ref.read_dense(src), tensors)

    check_verify(tsm, src)
    check_inspect(tsm, src, tensors)

    dst = tsm.convert(src, tmp_path / "out.safetensors")
    metadata, got = stfile.read_safetensors(dst)
    assert metadata is None
    stfile.assert_same(got, tensors)

    # One structural ID and one content digest for the model in both formats.
    h = tsm.hashes(src, dst)
    assert h[str(src)] == h[str(dst)]


def test_reference_file_with_every_dtype(tsm, ref, tmp_path):
    """Every dtype in one file with a UTF-8 name: 0.1 raw, 1.1 zstd level 1, both in unsorted
    insertion order; v2 through the default (canonical) Writer: 64 KiB placement, xxh3 on
    every part."""
    tensors = {}
    for dtype in reversed(R.dense_dtypes):
        for name, t in stfile.sample_tensors(dtype, "all").items():
            tensors[f"{dtype.lower()}.{name}"] = t
    tensors["名前/ü \"q\""] = ("F32", (2,), np.array([1.5, -0.0], np.float32))
    src = tmp_path / "all.zt"
    ref.write_dense(src, tensors, R.encodings[-1] if GEN != "2" else "canonical")
    check_verify(tsm, src)
    check_inspect(tsm, src, tensors)
    dst = tsm.convert(src, tmp_path / "all.safetensors")
    stfile.assert_same(stfile.read_safetensors(dst)[1], tensors)


# ---------------------------------------------------------------------------------------------
# ours -> theirs

# (label, convert options): raw, zstd at the default and another level, digests of each kind.
OURS = [("raw", []), ("zstd", ["--compress", "zstd"]), ("zstd19", ["--compress", "zstd:19"])]
OURS += [(f"raw-{d}", ["--digest", d]) for d in R.digests]
OURS += [(f"zstd1-{d}", ["--compress", "zstd:1", "--digest", d]) for d in R.digests]


@pytest.mark.parametrize("label,opts", OURS, ids=[o[0] for o in OURS])
@pytest.mark.parametrize("dtype", R.read_dtypes)
def test_tensorsmith_file_reads_identically_in_reference(tsm, ref, tmp_path, dtype, label, opts):
    tensors = stfile.sample_tensors(dtype, "ours")
    src = tmp_path / "in.safetensors"
    stfile.write_safetensors(src, tensors)
    out = tsm.convert(src, tmp_path / "out.zt", "--zt-version", GEN, *opts)

    stfile.assert_same(ref.read_dense(out, verify=True), tensors)
    check_verify(tsm, out)
    check_inspect(tsm, out, tensors)

    info = ref.dense_info(out)
    compressed = "--compress" in opts
    digest = opts[opts.index("--digest") + 1] if "--digest" in opts else None
    for name, (dtype_, shape, _) in tensors.items():
        i = info[name]
        assert i["layout"] == "dense" and i["shape"] == shape, name
        if GEN == "2":
            assert (i["dtype"], i["logical"]) == reference.V2_TYPES[dtype_], name
            # a part under an encoding has no address; a raw one maps zero-copy
            assert i["map"] is (not compressed), name
        else:
            assert reference.LEGACY_NAMES[i["dtype"]] == dtype_, name
            assert i["encoding"] == ("zstd" if compressed else "raw"), name
            if digest is None:
                assert i["checksum"] is None, name
            else:
                assert i["checksum"].startswith(digest + ":"), (name, i["checksum"])
    if GEN == "2":
        checked, undigested = ref.verification(out)
        if digest is None:
            assert (checked, undigested) == (0, len(tensors))
        else:
            assert (checked, undigested) == (len(tensors), 0)


@pytest.mark.parametrize("digest", R.digests)
def test_reference_catches_a_flipped_byte_under_our_digest(tsm, ref, tmp_path, digest):
    tensors = stfile.sample_tensors("F32", "digest")
    src = tmp_path / "in.safetensors"
    stfile.write_safetensors(src, tensors)
    out = tsm.convert(src, tmp_path / "out.zt", "--zt-version", GEN, "--digest", digest)
    assert ref.rejection(out, "matrix") is None

    offset, size = ref.location(out, "matrix")
    assert size == 48
    blob = bytearray(out.read_bytes())
    assert blob[offset:offset + size] == tensors["matrix"][2].tobytes()
    blob[offset + 5] ^= 0x10
    bad = tmp_path / "bad.zt"
    bad.write_bytes(bytes(blob))

    err = ref.rejection(bad, "matrix")
    if digest in R.checked_digests:
        assert err is not None and any(w in err.lower() for w in ("checksum", "digest")), err
    else:  # 0.1.4 ignores checksums other than crc32c (with a warning)
        assert err is None
    p = tsm.run("verify", bad, expect=1)
    assert b"digest mismatch" in p.stdout + p.stderr


# ---------------------------------------------------------------------------------------------
# larger tensors: several zstd frames (v2 seekable frames are 1 MiB), page-sized blobs


def test_large_tensors_both_ways(tsm, ref, tmp_path):
    rng = np.random.default_rng(11)
    n = (5 << 20) // 2 + 12345  # 2.5 MiB + of f16: three seekable frames
    levels = rng.integers(0, 16, size=n).astype(np.float16)
    tensors = {"big": ("F16", (n,), levels),
               "noise": ("U8", (1 << 20,), rng.integers(0, 256, size=1 << 20, dtype=np.uint8))}
    enc = "zstd" if "zstd" in R.encodings else "raw"
    theirs = tmp_path / "theirs.zt"
    ref.write_dense(theirs, tensors, enc)
    check_verify(tsm, theirs)
    dst = tsm.convert(theirs, tmp_path / "theirs.safetensors")
    stfile.assert_same(stfile.read_safetensors(dst)[1], tensors)

    ours = tsm.convert(dst, tmp_path / "ours.zt", "--zt-version", GEN, "--compress", "zstd",
                       "--digest", R.digests[0])
    stfile.assert_same(ref.read_dense(ours), tensors)
    h = tsm.hashes(theirs, ours)
    assert h[str(theirs)] == h[str(ours)]


# ---------------------------------------------------------------------------------------------
# round trip


def all_dtypes_file(path, metadata, dtypes=R.read_dtypes):
    tensors = {}
    for dtype in dtypes:
        for name, t in stfile.sample_tensors(dtype, "rt").items():
            tensors[f"{name}.{dtype}"] = t
    tensors["ünï/\"ö\" ✓"] = ("I16", (3,), np.array([1, -2, 3], np.int16))
    return tensors, stfile.write_safetensors(path, tensors, metadata)


RT_META = [None] if GEN == "0.1" else [None, {"format": "pt"}]
RT_OPTS = [[], ["--compress", "zstd"], ["--digest", R.digests[-1]],
           ["--compress", "zstd:7", "--digest", R.digests[0]]]


@pytest.mark.parametrize("opts", RT_OPTS, ids=["raw", "zstd", "digest", "zstd7-digest"])
@pytest.mark.parametrize("metadata", RT_META, ids=["no-meta", "one-key"][: len(RT_META)])
def test_round_trip_is_byte_identical(tsm, ref, tmp_path, metadata, opts):
    src = tmp_path / "in.safetensors"
    tensors, blob = all_dtypes_file(src, metadata)
    # Our pure-Python writer lays files out as the reference (and tensorsmith) do.
    assert tsm.convert(src, tmp_path / "same.safetensors").read_bytes() == blob

    zt = tsm.convert(src, tmp_path / "mid.zt", "--zt-version", GEN, *opts)
    stfile.assert_same(ref.read_dense(zt), tensors)
    check_inspect(tsm, zt, tensors, metadata)
    back = tsm.convert(zt, tmp_path / "back.safetensors")
    assert back.read_bytes() == blob


def test_v01_drops_metadata_only_when_asked(tsm, tmp_path):
    src = tmp_path / "meta.safetensors"
    plain = tmp_path / "plain.safetensors"
    tensors, _ = all_dtypes_file(src, {"format": "pt"}, reference.Ref01.dense_dtypes)
    blob = stfile.write_safetensors(plain, tensors)
    p = tsm.run("convert", src, tmp_path / "x.zt", "--zt-version", "0.1", expect=2)
    assert b"--drop-metadata" in p.stderr
    zt = tsm.convert(src, tmp_path / "x.zt", "--zt-version", "0.1", "--drop-metadata")
    assert tsm.convert(zt, tmp_path / "back.safetensors").read_bytes() == blob
