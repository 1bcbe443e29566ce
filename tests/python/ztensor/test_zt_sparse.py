"""Sparse tensors (CSR and COO) against the reference generations that write them (1.1.1 and
2.1.2; 0.1.4's Python API has no sparse writer).

theirs -> ours: the reference writes sparse objects; `verify` accepts the file, `inspect`
describes it, `convert --densify` gives the dense array bit for bit (and plain `convert` to
safetensors refuses, pointing at --densify).

ours -> theirs: `convert a.zt b.zt --zt-version GEN` (raw, zstd, digests) carries the sparse
objects over; the reference reads b.zt back as sparse with the same components.
"""

import json
import pathlib

import numpy as np
import pytest

import reference
import stfile

GEN, VERSION = reference.installed_generation()
R = reference.CLASSES[GEN]
DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "ztensor"

# Value dtypes: every dense dtype of the generation except the packed F4.
VALUE_DTYPES = [d for d in R.dense_dtypes if d != "F4"]
ENCODINGS = ["raw", "zstd"] if GEN == "2" else ["raw"]  # 1.1.1 writes sparse parts raw only


def make_objects(kind, dtype, index_dtype, salt=""):
    rng = np.random.default_rng(stfile.seed(kind, dtype, index_dtype, salt))
    shapes = {"csr": {"m": (5, 7), "wide": (2, 40), "nnz0": (3, 3)},
              "coo": {"m": (4, 6), "cube": (2, 3, 4), "nnz0": (3, 3)}}[kind]
    return {
        name: stfile.SparseObject(kind, dtype, shape, rng, density=0.0 if name == "nnz0" else 0.4,
                                  index_dtype=index_dtype)
        for name, shape in shapes.items()
    }


def index_bytes(arr, index_dtype):
    return arr.astype("<u4" if index_dtype == "u32" else "<u8").tobytes()


def check_reference_sparse(got, objects, index_dtype):
    """ref.read_sparse() output == the objects, index components as `index_dtype`."""
    assert sorted(got) == sorted(objects)
    for name, o in objects.items():
        kind, shape, dtype, parts = got[name]
        assert (kind, shape, dtype) == (o.kind, o.shape, o.dtype), name
        want = {"values": (None, np.ascontiguousarray(o.values).tobytes())}
        for role, arr in o.index_parts().items():
            want[role] = (index_dtype, index_bytes(arr, index_dtype))
        assert parts == want, name


def dense_of(objects):
    return {name: (o.dtype, o.shape, o.dense) for name, o in objects.items()}


def part_bytes(o, index_dtype):
    return o.values.nbytes + sum(len(index_bytes(a, index_dtype)) for a in o.index_parts().values())


def check_inspect(tsm, path, objects, index_dtype):
    j = tsm.inspect(path)
    assert (j["format"], j["format_version"]) == ("ztensor", GEN)
    got = {t["name"]: (t["dtype"], tuple(t["shape"]), t["parameters"], t["byte_length"])
           for t in j["tensors"]}
    want = {name: (o.dtype, o.shape, stfile.nelem(o.shape), part_bytes(o, index_dtype))
            for name, o in objects.items()}
    assert got == want


CASES = [(k, d, i, e) for k in R.sparse_kinds for d in VALUE_DTYPES
         for i in R.sparse_index_dtypes for e in ENCODINGS]


@pytest.mark.parametrize("kind,dtype,index_dtype,encoding", CASES,
                         ids=["-".join(c) for c in CASES])
def test_reference_sparse_both_ways(tsm, ref, tmp_path, kind, dtype, index_dtype, encoding):
    objects = make_objects(kind, dtype, index_dtype)
    src = tmp_path / "theirs.zt"
    if GEN == "2":
        ref.write_sparse(src, objects, encoding)
    else:
        ref.write_sparse(src, objects)
    check_reference_sparse(ref.read_sparse(src), objects, index_dtype)

    # theirs -> ours
    out = tsm.run("verify", src).stdout.decode()
    assert out.startswith(f"ok: {src}"), out
    check_inspect(tsm, src, objects, index_dtype)
    p = tsm.run("convert", src, tmp_path / "refused.safetensors", expect=2)
    assert b"--densify" in p.stderr
    assert not (tmp_path / "refused.safetensors").exists()
    dense = tsm.convert(src, tmp_path / "dense.safetensors", "--densify")
    stfile.assert_same(stfile.read_safetensors(dense)[1], dense_of(objects))

    # ours -> theirs: sparse objects carried over into a new file, read as sparse
    for opts in ([], ["--compress", "zstd", "--digest", R.digests[0]], ["--digest", R.digests[-1]]):
        dst = tsm.convert(src, tmp_path / "ours.zt", "--zt-version", GEN, *opts)
        check_reference_sparse(ref.read_sparse(dst), objects, index_dtype)
        assert tsm.run("verify", dst).stdout.decode().startswith("ok:")
        again = tsm.convert(dst, tmp_path / "again.safetensors", "--densify")
        assert again.read_bytes() == dense.read_bytes()


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_dense_and_sparse_in_one_file(tsm, ref, tmp_path, encoding):
    """Dense tensors beside CSR and COO objects: densified, and carried over zt -> zt."""
    idx = R.sparse_index_dtypes
    objects = {**make_objects("csr", "F32", idx[-1], "mix"),
               **{f"coo.{n}": o for n, o in make_objects("coo", "I16", idx[0], "mix").items()}}
    dense = {f"d.{n}": t for n, t in stfile.sample_tensors("BF16", "mix").items() if t[1] != ()}
    src = tmp_path / "mixed.zt"
    ref.write_sparse(src, objects, encoding, dense=dense)
    assert tsm.run("verify", src).stdout.decode().startswith("ok:")

    everything = {**dense, **dense_of(objects)}
    st = tsm.convert(src, tmp_path / "all.safetensors", "--densify")
    stfile.assert_same(stfile.read_safetensors(st)[1], everything)

    dst = tsm.convert(src, tmp_path / "ours.zt", "--zt-version", GEN, "--compress", "zstd:5",
                      "--digest", R.digests[0])
    stfile.assert_same(ref.read_dense(dst, mixed=True), dense)
    got = ref.read_sparse(dst)
    assert sorted(got) == sorted(objects)
    for name, o in objects.items():
        assert got[name][:3] == (o.kind, o.shape, o.dtype), name
        assert got[name][3]["values"][1] == o.values.tobytes(), name
    again = tsm.convert(dst, tmp_path / "again.safetensors", "--densify")
    assert again.read_bytes() == st.read_bytes()


# Sparse vectors written by the OTHER generation's reference (tests/data/ztensor, with their
# decoded components in expected.json), converted by tensorsmith into this generation and read
# by this reference.
LAYOUT = {"sparse_csr": "csr", "zt.sparse_csr/1": "csr", "sparse_coo": "coo", "zt.sparse_coo/1": "coo"}
OTHER = {
    # tensorsmith widens index parts to u64 for v1.1: 1.1.1 reads every index part as u64
    "1.1": ["v2/sparse_csr.zt", "v2/sparse_coo.zt"],
    "2": ["v1.1/sparse_csr.zt", "v1.1/sparse_coo.zt", "v1.1/multi.zt"],
}[GEN]


def expected_sparse(vector):
    """{name: (kind, shape, {role: (source dtype, decoded bytes)})} from expected.json."""
    folder, fname = vector.split("/")
    doc = json.loads((DATA / folder / "expected.json").read_text())
    out = {}
    for o in doc["files"][fname]["objects"]:
        if o["layout"] in LAYOUT:
            parts = {r: (c["dtype"], bytes.fromhex(c["hex"])) for r, c in o["components"].items()}
            out[o["name"]] = (LAYOUT[o["layout"]], tuple(o["shape"]), parts)
    assert out, vector
    return out


def as_u64(dtype, b):
    return np.frombuffer(b, dtype="<" + {"u32": "u4", "u64": "u8"}[dtype]).astype("<u8").tobytes()


@pytest.mark.parametrize("vector", OTHER)
def test_other_generation_sparse_vector_converts(tsm, ref, tmp_path, vector):
    src = DATA / vector
    want = expected_sparse(vector)
    dense = tsm.convert(src, tmp_path / "dense.safetensors", "--densify")
    dst = tsm.convert(src, tmp_path / "out.zt", "--zt-version", GEN)
    assert tsm.run("verify", dst).stdout.decode().startswith("ok:")
    again = tsm.convert(dst, tmp_path / "again.safetensors", "--densify")
    assert again.read_bytes() == dense.read_bytes()

    if GEN == "2":
        got = {n: o for n, o in ref.read_objects(dst).items() if o[0] in LAYOUT}
        assert sorted(got) == sorted(want)
        for name, (kind, shape, parts) in want.items():
            layout, gshape, gparts = got[name]
            assert (LAYOUT[layout], gshape) == (kind, shape), name
            # v1.1 indices are u64 and stay u64
            assert {r: (p[0], p[2]) for r, p in gparts.items()} == {
                r: (("u64" if r != "values" else gparts["values"][0]), b) for r, (_, b) in parts.items()
            }, name
    else:
        r = ref.zt.Reader(str(dst))
        assert sorted(r.tensor_names) == sorted(want)
        for name, (kind, shape, parts) in want.items():
            m = r.metadata(name)
            assert (LAYOUT[m.layout], tuple(m.shape)) == (kind, shape), name
            for role, (dtype, b) in parts.items():
                # what 1.1.1 can read: values as stored, every index component as u64
                expect = b if role == "values" else as_u64(dtype, b)
                assert ref.component(r, name, role) == expect, (name, role)
