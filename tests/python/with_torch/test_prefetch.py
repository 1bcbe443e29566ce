"""`safe_open(..., framework="pt").prefetch(plan)`, safetensors 0.9's per-rank prefetch API:
a plan of 0.9's form (name -> None or a step-1 first-dimension slice) loads those rows alone,
each tensor handed out once by `take` or by iterating, with 0.9's refusals. 0.9 itself loads
to CUDA only, so its values are compared on a GPU (where one is lent); here against the
reference's full tensors sliced."""

import json
import struct

import pytest
import safetensors.torch as ref
import torch

import tensorsmith
from tensorsmith.errors import InvalidInput, OptionError, TensorNotFound, Unsupported


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    g = torch.Generator().manual_seed(9)
    tensors = {"embed": torch.randn(1000, 64, generator=g).bfloat16(),
               "q_proj": torch.randn(512, 256, generator=g),
               "experts": torch.randn(8, 32, 16, generator=g).half(),
               "scale": torch.tensor(0.5), "norm": torch.randn(256, generator=g)}
    path = tmp_path_factory.mktemp("pf") / "m.safetensors"
    ref.save_file(tensors, path)
    return tensors, path


PLAN = {"q_proj": slice(256, 512), "norm": None, "embed": slice(-100, None),
        "experts": slice(6, 100), "scale": None}


def test_a_plan_loads_its_rows_and_hands_each_tensor_out_once(saved):
    tensors, path = saved
    with tensorsmith.safe_open(path, framework="pt", backend="pread") as f:
        loader = f.prefetch(PLAN)
        # File order (0.9's names()), whatever the plan's order.
        assert loader.names() == [n for n in f.offset_keys() if n in PLAN]
        assert len(loader) == 5
        q = loader.take("q_proj")
        assert torch.equal(q, tensors["q_proj"][256:512])
        with pytest.raises(InvalidInput, match="already taken"):
            loader.take("q_proj")
        with pytest.raises(TensorNotFound, match="not in this prefetch plan"):
            loader.take("nope")
        rest = dict(loader)
        assert sorted(rest) == ["embed", "experts", "norm", "scale"]
        for name, t in rest.items():
            want = tensors[name] if PLAN[name] is None else tensors[name][PLAN[name]]
            assert t.dtype == want.dtype and torch.equal(t, want), name
        assert list(loader) == []  # each once
        # Only the planned rows were read: first-dimension slices are one span each.
        kept = sum(t.numel() * t.element_size() for t in [q, *rest.values()])
        assert f._f.bytes_read()[0] == kept
        loader.close()


def test_no_plan_loads_every_tensor_whole_and_close_drops_the_rest(saved):
    tensors, path = saved
    with tensorsmith.safe_open(path, framework="pt") as f, f.prefetch(device="cpu") as loader:
        assert sorted(loader.names()) == sorted(tensors)
        assert torch.equal(loader.take("embed"), tensors["embed"])
    with pytest.raises(InvalidInput, match="closed"):
        loader.take("norm")


def test_the_plans_0_9_refuses_are_refused_before_loading(saved, tmp_path):
    _, path = saved
    with tensorsmith.safe_open(path, framework="pt") as f:
        for plan, err, match in (({"q_proj": slice(0, 8, 2)}, InvalidInput, "step must be 1"),
                                 ({"scale": slice(0, 1)}, InvalidInput, "0-d tensor"),
                                 ({"nope": None}, TensorNotFound, "no tensor 'nope'"),
                                 ({"q_proj": (0, 0, 4)}, InvalidInput, "None or a slice"),
                                 ([("q_proj", None)], InvalidInput, "plan must be a dict")):
            with pytest.raises(err, match=match):
                f.prefetch(plan)
        with pytest.raises(InvalidInput, match="threads"):
            f.prefetch(None, threads=0)
    with tensorsmith.safe_open(path, framework="np") as f, pytest.raises(OptionError):
        f.prefetch()
    f6 = tmp_path / "f6.safetensors"  # 16 six-bit values in 12 bytes
    header = json.dumps({"w": {"dtype": "F6_E2M3", "shape": [4, 4], "data_offsets": [0, 12]}})
    header = header.encode().ljust(-(-len(header) // 8) * 8)
    f6.write_bytes(struct.pack("<Q", len(header)) + header + bytes(12))
    with tensorsmith.safe_open(f6, framework="pt") as f, pytest.raises(Unsupported, match="F6"):
        f.prefetch({"w": None})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_onto_cuda_the_rows_equal_the_cpu_rows(saved):
    tensors, path = saved
    with tensorsmith.safe_open(path, framework="pt", device="cuda") as f:
        with f.prefetch(PLAN, threads=4) as loader:
            for name, t in loader:
                assert t.device.type == "cuda"
                want = tensors[name] if PLAN[name] is None else tensors[name][PLAN[name]]
                assert torch.equal(t.cpu(), want), name
