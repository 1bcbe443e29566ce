"""Split GGUF models against the reference: gguf-py 0.19.0's GGUFWriter writes split models
(`split_max_tensors`, `split_max_size`, `small_first_shard`; float and quantized tensors).
Any part or the folder opens the whole model, with the tensors and metadata GGUFReader reads
over all the parts; our split output is byte-identical to gguf-py's for the same limits; a
split model merged back is byte-identical to GGUFWriter's unsplit file; broken sets are
refused before anything is written."""

import json
import shutil

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import quants  # noqa: E402

import tensorsmith  # noqa: E402


def add_model(w, rng):
    w.add_name("split test")
    w.add_uint32("llama.context_length", 4096)
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    w.add_tensor("tok.weight", rng.standard_normal((4, 32)).astype(np.float32))
    w.add_tensor("q8.weight", quants.quantize(rng.standard_normal((3, 64)).astype(np.float32),
                                              Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("q4k.weight", rng.integers(0, 256, size=(2, 144), dtype=np.uint8),
                 raw_dtype=Q.Q4_K)
    w.add_tensor("norm.weight", rng.standard_normal((32,)).astype(np.float16))
    w.add_tensor("out.weight", rng.standard_normal((5, 32)).astype(np.float32))
    w.add_tensor("ids", np.arange(6, dtype=np.int32))


def write_ref(path, **limits):
    """gguf-py writes the model at `path` with `limits`; returns the files it wrote."""
    w = gguf.GGUFWriter(str(path), "llama", **limits)
    add_model(w, np.random.default_rng(7))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(p for p in path.parent.iterdir() if p.suffix == ".gguf")


LIMITS = {
    "by_count": dict(split_max_tensors=2),
    "by_size": dict(split_max_size=700),
    "small_first": dict(small_first_shard=True, split_max_tensors=4),
}
CLI_FLAGS = {
    "by_count": ["--split-max-tensors", "2"],
    "by_size": ["--shard-size", "700"],
    "small_first": ["--split-small-first", "--split-max-tensors", "4"],
}


def reader_view(parts):
    """GGUFReader over every part: model metadata (first part, no split or GGUF.* keys) and
    every tensor's stored bytes."""
    kv, ts = {}, {}
    for i, p in enumerate(parts):
        r = gguf.GGUFReader(str(p))
        for k, f in r.fields.items():
            if i == 0 and not k.startswith(("GGUF.", "split.")):
                kv[k] = f.contents()
        for t in r.tensors:
            assert t.name not in ts
            ts[t.name] = bytes(t.data.tobytes())
    return kv, ts


@pytest.mark.parametrize("case", list(LIMITS))
def test_any_part_opens_the_model_gguf_reader_reads(tmp_path, tsm, case):
    parts = write_ref(tmp_path / "m.gguf", **LIMITS[case])
    assert len(parts) >= 2 and all("-of-" in p.name for p in parts)
    kv, ts = reader_view(parts)
    for target in [*parts, tmp_path]:
        doc = tsm.inspect(target)
        assert doc["tensor_count"] == len(ts) == 6
        assert doc["split"] == {"count": len(parts), "tensors": 6}
        assert doc["shards"] == [p.name for p in parts]
        assert {k: v for k, v in doc["metadata"].items()} == kv
        with tensorsmith.safe_open(str(target), framework="np") as f:
            assert sorted(f.keys()) == sorted(ts)
            for name, raw in ts.items():
                assert f.get_tensor(name).tobytes() == raw, name
    loaded = tensorsmith.load_file(str(parts[-1]))
    assert {k: v.tobytes() for k, v in loaded.items()} == ts
    assert tensorsmith.inspect(str(parts[0]))["tensor_count"] == 6
    for p in parts:
        tsm.run("validate", p)
        tsm.run("verify", p)


@pytest.mark.parametrize("case", list(LIMITS))
def test_our_split_output_is_byte_identical_to_gguf_py(tmp_path, tsm, case):
    ref_dir, one_dir, cli_dir, py_dir = (tmp_path / d for d in ("ref", "one", "cli", "py"))
    for d in (ref_dir, one_dir, cli_dir, py_dir):
        d.mkdir()
    ref = write_ref(ref_dir / "m.gguf", **LIMITS[case])
    (one,) = write_ref(one_dir / "m.gguf")
    tsm.convert(one, cli_dir / "m.gguf", *CLI_FLAGS[case])
    limits = LIMITS[case]
    written = tensorsmith.convert(one, py_dir / "m.gguf",
                                  shard_size=limits.get("split_max_size"),
                                  split_max_tensors=limits.get("split_max_tensors"),
                                  split_small_first=limits.get("small_first_shard", False))
    assert [p.split("/")[-1] for p in written] == [p.name for p in ref]
    for out_dir in (cli_dir, py_dir):
        ours = sorted(out_dir.iterdir())
        assert [p.name for p in ours] == [p.name for p in ref]
        for a, b in zip(ours, ref):
            assert a.read_bytes() == b.read_bytes(), a.name
    # Split, then merge: GGUFWriter's unsplit file, byte for byte (from any part).
    merged = tmp_path / "merged.gguf"
    tsm.convert(ref[-1], merged)
    assert merged.read_bytes() == one.read_bytes()
    # Re-splitting a split model gives the same parts.
    again = tmp_path / "again"
    again.mkdir()
    tsm.convert(ref[0], again / "m.gguf", *CLI_FLAGS[case])
    for p in ref:
        assert (again / p.name).read_bytes() == p.read_bytes()


def test_split_model_hashes_as_one_file_and_converts_whole(tmp_path, tsm):
    parts = write_ref(tmp_path / "m.gguf", split_max_tensors=2)
    one_dir = tmp_path / "one"
    one_dir.mkdir()
    (one,) = write_ref(one_dir / "m.gguf")
    ids = {tsm.run("hash", p).stdout.split()[0] for p in [*parts, one]}
    assert len(ids) == 1
    # weight-inspect's hash is of the one file it is given.
    wi_part = tsm.run("hash", "--compat", "weight-inspect", parts[0]).stdout.split()[0]
    wi_one = tsm.run("hash", "--compat", "weight-inspect", one).stdout.split()[0]
    assert wi_part != wi_one
    assert tensorsmith.hash(str(parts[0]), compat="weight-inspect")["structural_hash"] == wi_part.decode()
    # Converting from a part converts the whole model, as from the unsplit file.
    out, out_one = tmp_path / "m.safetensors", tmp_path / "one.safetensors"
    tsm.convert(parts[1], out)
    tsm.convert(one, out_one)
    assert out.read_bytes() == out_one.read_bytes()
    # One part alone, when asked for.
    alone = json.loads(tsm.run("inspect", "--json", "--part-only", parts[1]).stdout)
    assert alone["tensor_count"] == 2 and alone["metadata"]["split.no"] == 1


def test_broken_sets_are_refused_before_anything_is_written(tmp_path, tsm):
    parts = write_ref(tmp_path / "m.gguf", split_max_tensors=2)
    parts[1].unlink()
    p = tsm.run("validate", parts[0], expect=1)
    assert b"part 2 of 3 is missing" in p.stdout and parts[1].name.encode() in p.stdout
    tsm.run("verify", parts[2], expect=1)
    out = tmp_path / "out.safetensors"
    p = tsm.run("convert", parts[0], out, expect=2)
    assert b"part 2 of 3 is missing" in p.stderr
    assert not out.exists()
    tsm.run("hash", parts[0], expect=2)
    tsm.run("inspect", parts[0], expect=2)
    # A part that says it is part 1 under the name of part 2.
    shutil.copy(parts[0], parts[1])
    p = tsm.run("validate", parts[2], expect=1)
    assert b"part 2 says split.no 0" in p.stdout
    with pytest.raises(tensorsmith.SafetensorError, match="split GGUF"):
        tensorsmith.safe_open(str(parts[0]), framework="np")


def test_folder_of_several_models_names_them(tmp_path, tsm):
    write_ref(tmp_path / "m.gguf", split_max_tensors=2)
    w = gguf.GGUFWriter(str(tmp_path / "mmproj-f16.gguf"), "clip")
    w.add_tensor("v", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = tsm.run("inspect", tmp_path, expect=2)
    assert b"m (3 parts)" in p.stderr and b"mmproj-f16.gguf" in p.stderr


def test_a_safetensors_shard_is_read_alone_with_a_note(tmp_path, tsm):
    src = tmp_path / "big.safetensors"
    tensorsmith.save_file({f"t{i}": np.full((256,), i, np.float32) for i in range(4)}, src)
    ck = tmp_path / "ck"
    ck.mkdir()
    tsm.convert(src, ck / "model.safetensors", "--shard-size", "2KB")
    shards = sorted(ck.glob("model-*.safetensors"))
    assert len(shards) == 4
    for cmd in (["inspect"], ["validate", "--quiet"], ["hash"], ["verify"]):
        p = tsm.run(*cmd, shards[1])
        err = p.stderr.decode()
        assert "shard 2 of 4 of a sharded checkpoint" in err, (cmd, err)
        assert "model.safetensors.index.json" in err
    doc = tsm.inspect(shards[0])
    assert doc["tensor_count"] == 1
    p = tsm.run("diff", shards[0], shards[0])
    assert p.stderr.decode().count("sharded checkpoint") == 2
    # The whole checkpoint: no note.
    assert tsm.run("inspect", ck).stderr == b""


def test_a_url_of_any_part_opens_the_model(tmp_path, tsm):
    from range_server import serve

    parts = write_ref(tmp_path / "m.gguf", split_max_size=700)
    kv, ts = reader_view(parts)
    files = {f"/models/{p.name}": p.read_bytes() for p in parts}
    with serve(files) as url:
        for p in parts:
            target = f"{url}/models/{p.name}"
            doc = tsm.inspect(target)
            assert doc["tensor_count"] == 6 and doc["metadata"] == kv
            with tensorsmith.safe_open(target, framework="np") as f:
                assert {k: f.get_tensor(k).tobytes() for k in f.keys()} == ts
        tsm.run("hash", f"{url}/models/{parts[0].name}")
        del files[f"/models/{parts[-1].name}"]
        p = tsm.run("validate", f"{url}/models/{parts[0].name}", expect=1)
        assert f"part {len(parts)} of {len(parts)} is".encode() in p.stdout
