"""`tensorsmith convert --append` (v2 only): tensors added to a v2 file, which 2.1.2 then
reads whole, old and new tensors alike, with every digest checked; a file the reference
itself wrote can be appended to as well; a name already in the file is refused and the file
left as it was."""

import numpy as np
import pytest

import reference
import stfile

GEN, VERSION = reference.installed_generation()


def f32(rng, n):
    return rng.standard_normal(n).astype("<f4")


@pytest.mark.parametrize("opts", [[], ["--compress", "zstd", "--digest", "xxh3"]],
                         ids=["raw", "zstd-xxh3"])
@pytest.mark.parametrize("origin", ["tensorsmith", "reference"])
def test_appended_file_reads_in_the_reference(tsm, ref, tmp_path, opts, origin):
    rng = np.random.default_rng(11)
    old = {"a": ("F32", (3, 5), f32(rng, 15)), "b": ("I32", (7,), np.arange(7, dtype="<i4"))}
    new = {"c": ("F32", (2, 2), f32(rng, 4)), "d.e": ("U8", (0,), np.zeros(0, "u1"))}
    zt = tmp_path / "m.zt"
    if origin == "reference":
        ref.write_dense(zt, old, "zstd")
    else:
        stfile.write_safetensors(tmp_path / "old.safetensors", old)
        tsm.convert(tmp_path / "old.safetensors", zt, *opts)
    stfile.write_safetensors(tmp_path / "new.safetensors", new)
    tsm.run("convert", "--append", tmp_path / "new.safetensors", zt, *opts)
    got = ref.read_dense(zt, verify=True)
    assert sorted(got) == ["a", "b", "c", "d.e"]
    stfile.assert_same(got, {**old, **new})
    tsm.run("verify", zt)


def test_a_name_already_there_is_refused(tsm, tmp_path):
    rng = np.random.default_rng(5)
    t = {"a": ("F32", (4,), f32(rng, 4))}
    stfile.write_safetensors(tmp_path / "in.safetensors", t)
    zt = tsm.convert(tmp_path / "in.safetensors", tmp_path / "m.zt")
    before = zt.read_bytes()
    p = tsm.run("convert", "--append", tmp_path / "in.safetensors", zt, expect=None)
    assert p.returncode != 0
    assert b"already in the file" in p.stderr
    assert zt.read_bytes() == before
