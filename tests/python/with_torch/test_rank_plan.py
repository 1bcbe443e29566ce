"""Per-rank loads (issue #43): `tensorsmith.torch.load_sharded` and `get_slice` read only the
byte spans a rank keeps. For 2 and 4 simulated ranks in one process, over local files (pread
and mapped), a sharded checkpoint, an http(s) URL and an s3:// URL on a moto server: the
values equal the reference `safetensors` loading everything then slicing; first-dimension
parts read at most 1.05x the bytes kept (exactly, locally); other-dimension parts at most the
coalescing rule's bound, kept + (runs - 1) * gap when the gap is at most 4 KiB (local) or
256 KiB (URLs), else exactly the kept bytes. Bytes are counted by the byte layer (`stats`,
`bytes_read`) and, for the URLs, by the server (body bytes sent).

Run with `pytest -s` to see the measured ratios."""

import collections
import io
import os
import json
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest
import safetensors
import safetensors.torch as ref
import torch

import tensorsmith
import tensorsmith.torch as ours
from tensorsmith.errors import BadSlice, InvalidInput, TensorNotFound, Unsupported

REPO = pathlib.Path(__file__).resolve().parents[3]
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
LOCAL_GAP, REMOTE_GAP, MAX_READ = 4 << 10, 256 << 10, 8 << 20


def model():
    """Tensors as a tensor-parallel layer stack holds them, name -> (tensor, dim cut)."""
    g = torch.Generator().manual_seed(43)
    return {
        "embed": (torch.randn(1000, 256, generator=g).bfloat16(), 0),  # vocab-parallel
        "q_proj": (torch.randn(1024, 512, generator=g).bfloat16(), 0),  # column-parallel
        "experts": (torch.randn(8, 256, 128, generator=g).half(), 0),  # expert-parallel
        "o_proj": (torch.randn(512, 1024, generator=g).bfloat16(), 1),  # row-parallel, narrow
        "down": (torch.randn(256, 10240, generator=g), 1),  # row-parallel, wide rows
        "gate": (torch.randn(4, 96, 40, generator=g), 2),  # a cut of the last of 3 dims
        "norm": (torch.randn(512, generator=g), None),  # replicated
    }


def rank_plan(tensors, rank, ranks, dims=None):
    """The plan of `rank`: each tensor's dimension split evenly (None: whole)."""
    plan = {}
    for name, (t, dim) in tensors.items():
        if dims is not None and dim not in dims:
            continue
        if dim is None:
            plan[name] = None
        else:
            n = t.shape[dim]
            plan[name] = (dim, rank * n // ranks, (rank + 1) * n // ranks)
    return plan


def expected(full, spec):
    return full if spec is None else full.narrow(spec[0], spec[1], spec[2] - spec[1])


def bound(tensors, plan, max_gap):
    """The coalescing rule's bound, worked out from shapes alone: kept bytes, plus for a cut
    of a dimension other than the first the gaps between its runs when they are at most
    `max_gap` (reads of several runs stop at 8 MiB, which only leaves gaps out)."""
    total = 0
    for name, spec in plan.items():
        t = tensors[name][0]
        el = t.element_size()
        if spec is None:
            total += t.numel() * el
            continue
        dim, a, b = spec
        inner = int(np.prod(t.shape[dim + 1:], dtype=np.int64)) * el
        runs = int(np.prod(t.shape[:dim], dtype=np.int64))
        run, gap = (b - a) * inner, (t.shape[dim] - (b - a)) * inner
        total += runs * run
        if dim > 0 and gap <= max_gap:
            total += (runs - 1) * gap
    return total


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("tp")
    tensors = model()
    path = d / "model.safetensors"
    ref.save_file({k: v for k, (v, _) in tensors.items()}, path)
    return tensors, path


RATIOS = []


def report(where, ranks, kind, kept, read, limit):
    RATIOS.append((where, ranks, kind, read / kept))
    print(f"\n  {where:10} {ranks} ranks {kind:16} kept {kept:>9} read {read:>9} "
          f"ratio {read / kept:.3f} (bound {limit / kept:.3f})")


@pytest.mark.parametrize("backend", ["pread", "mmap"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_each_rank_reads_its_spans_and_gets_the_references_values(saved, ranks, backend):
    tensors, path = saved
    want = ref.load_file(path)
    for r in range(ranks):
        for kind, dims in (("first dimension", (0, None)), ("other dimensions", (1, 2))):
            plan = rank_plan(tensors, r, ranks, dims)
            stats = {}
            got = ours.load_sharded(path, plan, backend=backend, stats=stats)
            assert list(got) == list(plan)
            for name, spec in plan.items():
                e = expected(want[name], spec)
                assert got[name].dtype == e.dtype and got[name].shape == e.shape, name
                assert torch.equal(got[name], e), name
                assert got[name].is_contiguous()
            kept = sum(t.numel() * t.element_size() for t in got.values())
            assert stats["bytes_kept"] == kept
            limit = bound(tensors, plan, LOCAL_GAP)
            if kind == "first dimension":
                assert stats["bytes_read"] == kept  # one span each: exactly the kept bytes
                assert limit == kept
            else:
                assert kept <= stats["bytes_read"] <= limit
            if r == 0 and backend == "pread":
                report("local", ranks, kind, kept, stats["bytes_read"], limit)
    # Every rank's parts together are each tensor once.
    for name, (t, dim) in tensors.items():
        parts = [ours.load_sharded(path, {name: rank_plan({name: (t, dim)}, r, ranks)[name]})
                 [name] for r in range(ranks)]
        joined = parts[0] if dim is None else torch.cat(parts, dim)
        assert torch.equal(joined, want[name])


def test_the_rule_merges_small_gaps_and_reads_wide_ones_apart(saved):
    tensors, path = saved
    with tensorsmith.safe_open(path, framework="pt", backend="pread") as f:
        n = f._f
        # o_proj [512, 1024] bf16 in halves along dim 1: runs of 1 KiB, 1 KiB apart: one read.
        _, shape, kept, run, runs, reads, limit, rule = n.part_plan("o_proj", [(0, 512),
                                                                              (0, 512)])
        assert (shape, kept, run, runs, rule) == ([512, 512], 512 * 1024, 1024, 512,
                                                  (LOCAL_GAP, MAX_READ))
        assert len(reads) == 1 and reads[0][1] - reads[0][0] == limit == kept + 511 * 1024
        # down [256, 10240] f32 in quarters: runs of 10 KiB, 30 KiB apart: read one by one.
        _, _, kept, run, runs, reads, limit, _ = n.part_plan("down", [(0, 256), (0, 2560)])
        assert (run, runs, len(reads), limit) == (10240, 256, 256, kept)
        assert sum(b - a for a, b in reads) == kept
        # A first-dimension part: one span, exactly its rows.
        i, start, end = n.part_span("q_proj", [(256, 512)])
        off = n.raw_range("q_proj")[1]
        assert (start - off, end - off) == (256 * 512 * 2, 512 * 512 * 2)
        assert n.part_span("down", [(0, 256), (0, 2560)]) is None


def test_max_gap_sets_the_rule_per_call(saved):
    tensors, path = saved
    plan = {"o_proj": (1, 0, 512)}  # runs of 1 KiB, 1 KiB apart
    want = tensors["o_proj"][0][:, :512]
    kept = want.numel() * 2
    for gap, read, reads in [(None, kept + 511 * 1024, 1), (0, kept, 512), (512, kept, 512),
                             (1024, kept + 511 * 1024, 1)]:
        stats = {}
        got = ours.load_sharded(path, plan, backend="pread", stats=stats, max_gap=gap)
        assert torch.equal(got["o_proj"], want)
        assert (stats["bytes_kept"], stats["bytes_read"], stats["reads"]) == (kept, read, reads)
    with tensorsmith.safe_open(path, framework="pt", backend="pread") as f:
        *_, rule = f._f.part_plan("o_proj", [(0, 512), (0, 512)], max_gap=0)
        assert rule == (0, MAX_READ)
    for bad in (-1, 1.5, "4k"):
        with pytest.raises(InvalidInput, match="max_gap"):
            ours.load_sharded(path, plan, max_gap=bad)


def test_sharded_checkpoints_as_an_index_a_folder_or_a_list(tmp_path, saved):
    tensors, _ = saved
    names = list(tensors)
    shards = [names[:3], names[3:]]
    weight_map = {}
    for k, part in enumerate(shards):
        fn = f"model-{k + 1:05d}-of-00002.safetensors"
        ref.save_file({n: tensors[n][0] for n in part}, tmp_path / fn)
        weight_map.update({n: fn for n in part})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": weight_map}))
    plan = rank_plan(tensors, 1, 4)
    files = sorted(str(p) for p in tmp_path.glob("model-*.safetensors"))
    results = []
    for paths in (tmp_path / "model.safetensors.index.json", tmp_path, files):
        stats = {}
        results.append(ours.load_sharded(paths, plan, stats=stats))
        assert stats["bytes_kept"] <= stats["bytes_read"] <= bound(tensors, plan, LOCAL_GAP)
    # A file object (read through its seek and read, one at a time).
    with open(files[0], "rb") as fo:
        part = {n: plan[n] for n in shards[0]}
        results.append(ours.load_sharded(io.BytesIO(fo.read()), part))
    for got in results:
        for name, spec in plan.items() if len(got) == len(plan) else part.items():
            assert torch.equal(got[name], expected(tensors[name][0], spec))


def test_plan_entries_as_get_slice_indexes_and_refusals(saved, tmp_path):
    tensors, path = saved
    full = ref.load_file(path)
    got = ours.load_sharded(path, {"down": (slice(None), slice(100, 300)),
                                   "gate": np.s_[1:3, ::7, 5],
                                   "experts": np.s_[2],
                                   "norm": ...})
    assert torch.equal(got["down"], full["down"][:, 100:300])
    assert torch.equal(got["gate"], full["gate"][1:3, ::7, 5])
    assert torch.equal(got["experts"], full["experts"][2])
    assert torch.equal(got["norm"], full["norm"])
    with pytest.raises(BadSlice, match="dimension 2 of a tensor of shape"):
        ours.load_sharded(path, {"q_proj": (2, 0, 1)})
    with pytest.raises(BadSlice, match="5:2000 is not inside dimension 0 of size 1024"):
        ours.load_sharded(path, {"q_proj": (0, 5, 2000)})
    with pytest.raises(BadSlice, match="expected None, \\(dim, start, stop\\)"):
        ours.load_sharded(path, {"q_proj": "rows"})
    with pytest.raises(BadSlice, match="out of bounds"):
        ours.load_sharded(path, {"q_proj": np.s_[:, 600:]})
    with pytest.raises(TensorNotFound, match="no tensor 'nope'"):
        ours.load_sharded(path, {"nope": None})
    with pytest.raises(InvalidInput, match="plan must be a dict"):
        ours.load_sharded(path, [("q_proj", None)])
    with pytest.raises(InvalidInput, match="paths is empty"):
        ours.load_sharded([], {"q_proj": None})
    # A name in two of the files given.
    with pytest.raises(InvalidInput, match="is in both"):
        ours.load_sharded([path, path], {"q_proj": None})


def test_a_bad_entry_is_refused_naming_its_tensor_before_anything_is_read(saved):
    tensors, path = saved
    for bad in (slice(0, 4, 0), (slice(None), slice(0, 99999)), (..., ...),
                slice(0.0, 2.0), slice("a", 2), slice(0, 2, 1.0), (True, 0, 2)):
        with pytest.raises(BadSlice, match="plan entry for 'down'"):
            ours.load_sharded(path, {"q_proj": (0, 0, 4), "down": bad, "norm": None})
    with pytest.raises(InvalidInput, match="stats must be a dict"):
        ours.load_sharded(path, {"norm": None}, stats=[])
    with pytest.raises(InvalidInput, match="max_gap"):
        ours.load_sharded(path, {"norm": None}, max_gap=True)
    stats = {}
    ours.load_sharded(path, {"down": (1, 0, 10)}, max_gap=np.int64(0), stats=stats)
    assert stats["bytes_read"] == stats["bytes_kept"] == 256 * 10 * 4


def test_a_stepped_entry_keeps_its_rows_alone_and_counts_them(saved):
    """A step reads the start:stop range (0.9 refuses steps); the tensor given back holds
    its own rows only, not the range behind them, and bytes_kept counts those rows."""
    tensors, path = saved
    full = tensors["down"][0]
    for spec, want in ((slice(0, 256, 256), full[0:256:256]), (slice(0, 256, 8), full[::8]),
                       ((slice(None), slice(0, 10240, 10240)), full[:, 0:1])):
        stats = {}
        got = ours.load_sharded(path, {"down": spec}, stats=stats)["down"]
        assert torch.equal(got, want)
        kept = want.numel() * 4
        assert got.untyped_storage().nbytes() == kept
        assert stats["bytes_kept"] == kept and stats["bytes_read"] == full.numel() * 4


def test_meta_tensors_are_planned_without_reading(saved):
    tensors, path = saved
    stats = {}
    got = ours.load_sharded(path, rank_plan(tensors, 1, 4), device="meta", stats=stats)
    for name, (t, dim) in tensors.items():
        want = expected(t, rank_plan(tensors, 1, 4)[name])
        assert got[name].is_meta and got[name].shape == want.shape
        assert got[name].dtype == want.dtype
    assert stats["bytes_read"] == 0


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="torch without float4")
def test_packed_f4_cuts_fall_on_whole_bytes_or_are_refused(tmp_path):
    # [8, 32] F4 values: torch holds them as [8, 16] pairs of a byte each.
    raw = torch.arange(8 * 16, dtype=torch.uint8).reshape(8, 16)
    path = tmp_path / "f4.safetensors"
    ref.save_file({"w": raw.view(torch.float4_e2m1fn_x2)}, path)
    got = ours.load_sharded(path, {"w": (1, 8, 24)})["w"]
    assert got.dtype == torch.float4_e2m1fn_x2 and got.shape == (8, 8)
    assert torch.equal(got.view(torch.uint8), raw[:, 4:12])
    got = ours.load_sharded(path, {"w": (0, 3, 5)})["w"]
    assert torch.equal(got.view(torch.uint8), raw[3:5])
    with pytest.raises(BadSlice, match="a cut at element 3 of a F4 tensor: 2 elements fill 1 "
                                       "byte"):
        ours.load_sharded(path, {"w": (1, 3, 9)})
    # An even start with an odd count: torch holds F4 values in pairs.
    with pytest.raises(Unsupported, match=r"tensor 'w' of shape \[8, 32\], part \[0:8, 10:13\]"):
        ours.load_sharded(path, {"w": (1, 10, 13)})


def test_compressed_tensors_are_read_whole_only(tmp_path):
    src = tmp_path / "m.safetensors"
    ref.save_file({"w": torch.randn(64, 64)}, src)
    zt = tmp_path / "m.zt"
    tensorsmith.convert(src, zt, zt_version="2", compress=3)
    whole = ours.load_sharded(zt, {"w": None})["w"]
    assert torch.equal(whole, ref.load_file(src)["w"])
    with pytest.raises(Unsupported, match="read whole only"):
        ours.load_sharded(zt, {"w": (0, 0, 32)})


# --- get_slice reads only the part it keeps


@pytest.mark.parametrize("framework", ["pt", "np"])
@pytest.mark.parametrize("backend", ["pread", "mmap"])
def test_get_slice_reads_only_the_rows_and_spans_it_keeps(saved, framework, backend):
    _, path = saved
    with tensorsmith.safe_open(path, framework=framework, backend=backend) as f, \
            safetensors.safe_open(str(path), framework=framework) as g:
        n = f._f
        cases = [
            (np.s_[256:512], 256 * 512 * 2, "q_proj"),  # rows: exactly their bytes
            (np.s_[7], 512 * 2, "q_proj"),
            (np.s_[100:200], 100 * 10240 * 4, "down"),
            (np.s_[:, 2560:5120], 256 * 2560 * 4, "down"),  # runs 30 KiB apart
            (np.s_[10:20, 1000:1001], 10 * 4, "down"),
            (np.s_[1:3, 10:20, ::3], 2 * 10 * 40 * 4, "gate"),
            # Runs of 4 bytes, 156 apart: merged, from the first run's start to the last's end.
            (np.s_[..., 5], 4 * 96 * 40 * 4 - 5 * 4 - 34 * 4, "gate"),
        ]
        for index, exact, name in cases:
            if framework == "np" and name == "q_proj":
                continue  # bf16: NumPy needs ml_dtypes, which .venv-torch does not have
            n.reset_bytes_read()
            got = f.get_slice(name)[index]
            read, reads = n.bytes_read()
            want = g.get_slice(name)[index]
            assert type(got) is type(want) and got.dtype == want.dtype
            assert tuple(got.shape) == tuple(want.shape)
            assert np.array_equal(np.asarray(got.float() if framework == "pt" else got),
                                  np.asarray(want.float() if framework == "pt" else want))
            if framework == "pt" and backend == "mmap":
                # Views of the map (or copies of the kept elements from it): no read at all.
                assert (read, reads) == (0, 0)
            else:
                assert read == exact, (name, index, read)
                assert reads >= 1
        # An index torch takes its own way (a list) still works, from the whole tensor.
        if framework == "pt":
            assert torch.equal(f.get_slice("q_proj")[[1, 3]], g.get_slice("q_proj")[[1, 3]])


# --- URLs: counted by the servers


def test_an_http_url_reads_the_spans_counted_by_the_server(saved):
    sys.path.insert(0, str(REPO / "tests/python"))
    from range_server import RangeHandler, serve

    tensors, path = saved
    body = path.read_bytes()
    want = ref.load_file(path)
    with serve({"/m.safetensors": body}) as base:
        url = f"{base}/m.safetensors"
        RangeHandler.sent.clear()
        tensorsmith.safe_open(url).keys()
        opened = RangeHandler.sent.get("/m.safetensors", 0)
        for ranks in (2, 4):
            for kind, dims in (("first dimension", (0, None)), ("other dimensions", (1, 2))):
                plan = rank_plan(tensors, ranks - 1, ranks, dims)
                RangeHandler.sent.clear()
                stats = {}
                got = ours.load_sharded(url, plan, stats=stats)
                for name, spec in plan.items():
                    assert torch.equal(got[name], expected(want[name], spec))
                served = RangeHandler.sent["/m.safetensors"] - opened
                _check_served(tensors, plan, stats, served, kind, "http", ranks)


def test_a_ranks_parts_share_one_queue_of_requests(saved):
    """Parts of many tensors are read together, as many requests at once as the URL's
    max_concurrency: a rank's small parts keep the server as busy as one large part."""
    sys.path.insert(0, str(REPO / "tests/python"))
    from range_server import RangeHandler, serve

    class Slow(RangeHandler):
        lock, now, most = threading.Lock(), 0, 0

        def do_GET(self):
            with Slow.lock:
                Slow.now += 1
                Slow.most = max(Slow.most, Slow.now)
            try:
                time.sleep(0.05)
                super().do_GET()
            finally:
                with Slow.lock:
                    Slow.now -= 1

    tensors, path = saved
    want = ref.load_file(path)
    plan = rank_plan(tensors, 1, 2, dims=(0, None))  # one span a tensor: a GET or two each
    with serve({"/m.safetensors": path.read_bytes()}, Slow) as base:
        for conc in (2, 10):
            Slow.most = 0
            got = ours.load_sharded(f"{base}/m.safetensors", plan,
                                    storage_options={"max_concurrency": str(conc)})
            for name, spec in plan.items():
                assert torch.equal(got[name], expected(want[name], spec)), name
            if conc == 2:
                assert Slow.most <= 2
            else:
                assert Slow.most >= 3, Slow.most
        # The ring (the CUDA path) has as many workers as the URL's max_concurrency, not only
        # one per core: its GETs wait on the network.
        native = tensorsmith._open_native(f"{base}/m.safetensors", "mmap",
                                          {"max_concurrency": "24"})
        assert native.parallel_reads(0) == 24 and _ring._threads(native, {0}) == 24
        Slow.most = 0
        got = _sharded.load([native], plan, torch.device("cpu"), {}, None, _ring.HostRing())
        for name, spec in plan.items():
            assert torch.equal(got[name], expected(want[name], spec)), name
        assert Slow.most >= 3, Slow.most
    local = tensorsmith._open_native(str(path), "mmap")
    assert local.parallel_reads(0) is None
    assert _ring._threads(local, {0}) == min(16, os.cpu_count() or 4)


def _check_served(tensors, plan, stats, served, kind, where, ranks):
    kept = stats["bytes_kept"]
    limit = bound(tensors, plan, REMOTE_GAP)
    if kind == "first dimension":
        assert limit == kept
        assert stats["bytes_read"] == kept
        assert served <= 1.05 * kept, (served, kept)
    else:
        assert kept <= stats["bytes_read"] <= limit
        assert served <= limit, (served, limit)
    report(where, ranks, kind, kept, served, limit)


class CountingProxy:
    """A TCP forwarder in front of an HTTP server that counts the body bytes of the responses
    it forwards (Content-Length, nothing for HEAD), i.e. what the server sent."""

    def __init__(self, upstream):
        self.body_bytes = 0
        self.requests = 0
        self.responses = []
        self._lock = threading.Lock()
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self):
        with self._lock:
            self.body_bytes = self.requests = 0
            self.responses = []

    def _accept(self):
        while True:
            client, _ = self._listener.accept()
            server = socket.create_connection(self._upstream)
            methods = collections.deque()
            threading.Thread(target=self._requests, args=(client, server, methods),
                             daemon=True).start()
            threading.Thread(target=self._responses, args=(server, client, methods),
                             daemon=True).start()

    def _requests(self, src, dst, methods):
        buf = b""
        try:
            while data := src.recv(1 << 16):
                buf += data
                while b"\r\n\r\n" in buf:  # GET and HEAD requests: headers only
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    methods.append(head.split(b" ", 1)[0])
                    with self._lock:
                        self.requests += 1
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(dst)

    def _responses(self, src, dst, methods):
        buf, body_left = b"", 0
        try:
            while data := src.recv(1 << 16):
                buf += data
                while buf:
                    if body_left:
                        take = min(body_left, len(buf))
                        body_left -= take
                        buf = buf[take:]
                        with self._lock:
                            self.body_bytes += take
                        continue
                    if b"\r\n\r\n" not in buf:
                        break
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    lines = head.decode("latin-1").split("\r\n")
                    status = int(lines[0].split()[1])
                    fields = {k.strip().lower(): v.strip() for k, _, v in
                              (ln.partition(":") for ln in lines[1:])}
                    method = methods.popleft() if methods else b"GET"
                    if method != b"HEAD" and status >= 200 and status not in (204, 304):
                        body_left = int(fields.get("content-length", "0"))
                    with self._lock:
                        self.responses.append((method, status, fields.get("content-range"),
                                               body_left))
                # Counted before it goes on: the client may act on the bytes at once.
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(dst)


def _close(sock):
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _moto_python():
    """A Python that has moto's server: this one, or the package venv's (.venv, which
    scripts/test makes before .venv-torch)."""
    try:
        import moto.server  # noqa: F401
        return sys.executable
    except ImportError:
        pass
    venv = REPO / ".venv/bin/python"
    if venv.exists() and subprocess.run([venv, "-c", "import moto.server"],
                                        capture_output=True).returncode == 0:
        return str(venv)
    return None


@pytest.fixture(scope="module")
def moto_endpoint():
    python = _moto_python()
    if python is None:
        pytest.skip("no moto server here or in .venv")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.time() < deadline, "moto did not start"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    p.terminate()
    p.wait(10)


def test_an_s3_url_reads_the_spans_counted_by_the_server(saved, moto_endpoint, monkeypatch):
    tensors, path = saved
    # moto's server takes unsigned requests: the bucket and object put as plain HTTP.
    for url, data in ((f"{moto_endpoint}/rank43", b""),
                      (f"{moto_endpoint}/rank43/tp/model.safetensors", path.read_bytes())):
        # A binary type: urllib's default (a form) has moto's server parse the body as one.
        urllib.request.urlopen(urllib.request.Request(
            url, data=data, method="PUT",
            headers={"Content-Type": "application/octet-stream"})).read()
    for k in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(k, raising=False)
    proxy = CountingProxy(moto_endpoint)
    opts = {"key": "testing", "secret": "testing", "endpoint_url": proxy.endpoint,
            "region": "us-east-1"}
    url = "s3://rank43/tp/model.safetensors"
    want = ref.load_file(path)
    tensorsmith.safe_open(url, storage_options=opts).keys()
    opened = proxy.body_bytes
    assert 0 < opened <= 256 << 10
    for ranks in (2, 4):
        for r in range(ranks):
            for kind, dims in (("first dimension", (0, None)), ("other dimensions", (1, 2))):
                plan = rank_plan(tensors, r, ranks, dims)
                proxy.reset()
                stats = {}
                got = ours.load_sharded(url, plan, storage_options=opts, stats=stats)
                for name, spec in plan.items():
                    assert torch.equal(got[name], expected(want[name], spec)), name
                served = proxy.body_bytes - opened
                if r == 0:
                    _check_served(tensors, plan, stats, served, kind, "s3", ranks)
                else:
                    kept, limit = stats["bytes_kept"], bound(tensors, plan, REMOTE_GAP)
                    assert served <= (1.05 * kept if kind == "first dimension" else limit)
    # get_slice over S3: the rows it keeps.
    with tensorsmith.safe_open(url, framework="pt", storage_options=opts) as f:
        proxy.reset()
        rows = f.get_slice("q_proj")[512:768]
        assert torch.equal(rows, want["q_proj"][512:768])
        assert f._f.bytes_read()[0] == 256 * 512 * 2
        assert proxy.body_bytes <= 1.05 * 256 * 512 * 2


@cuda
@pytest.mark.parametrize("direct", ["0", "1"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_cuda_parts_equal_the_cpu_parts(saved, ranks, direct, monkeypatch):
    tensors, path = saved
    monkeypatch.setenv("TENSORSMITH_PINNED_MIB", "1")  # a ring smaller than the parts
    monkeypatch.setenv("TENSORSMITH_DIRECT_IO", direct)
    for r in range(ranks):
        plan = rank_plan(tensors, r, ranks)
        stats = {}
        got = ours.load_sharded(path, plan, device="cuda", stats=stats)
        cpu = ours.load_sharded(path, plan)
        for name in plan:
            assert got[name].device.type == "cuda"
            assert torch.equal(got[name].cpu(), cpu[name]), name
        assert stats["bytes_read"] <= bound(tensors, plan, LOCAL_GAP)


# The CUDA path's pipeline with a CPU stand-in (`HostRing`: plain buffers in place of pinned
# ones, CPU tensors in place of device memory), so its reads, slot reuse and copies are
# checked without a GPU. A small CHUNK makes the model's parts many pieces, and sub-row
# pieces where a row of a part is larger than a piece.

from tensorsmith._loading import cuda as _ring  # noqa: E402
from tensorsmith._loading import sharded as _sharded  # noqa: E402


@pytest.mark.parametrize("chunk", [64 << 10, 3000])
@pytest.mark.parametrize("ranks", [2, 4])
def test_the_ring_lands_every_part_as_the_cpu_read_does(saved, ranks, chunk, monkeypatch):
    tensors, path = saved
    monkeypatch.setattr(_ring, "CHUNK", chunk)
    monkeypatch.setenv("TENSORSMITH_PINNED_MIB", "1")
    slots = max(1, (1 << 20) // chunk)
    for r in range(ranks):
        plan = rank_plan(tensors, r, ranks)
        ring, stats = _ring.HostRing(), {}
        natives = _sharded._natives(path, "pread", None)
        got = _sharded.load(natives, plan, torch.device("cpu"), stats, None, ring)
        cpu = ours.load_sharded(path, plan)
        for name in plan:
            assert got[name].dtype == cpu[name].dtype and torch.equal(got[name], cpu[name]), name
        assert ring.live == 0  # every buffer given back
        assert 0 < ring.made <= slots
        # The ring's bound, whatever the parts' sizes (each buffer has room to align a read).
        assert ring.peak <= slots * (chunk + 3 * _ring.ALIGN)
        assert stats["bytes_kept"] == sum(t.numel() * t.element_size() for t in got.values())
        assert stats["bytes_kept"] <= stats["bytes_read"] <= bound(tensors, plan, LOCAL_GAP)


def test_the_ring_lands_whole_tensors_as_the_reference_does(saved, monkeypatch):
    tensors, path = saved
    monkeypatch.setattr(_ring, "CHUNK", 64 << 10)
    monkeypatch.setenv("TENSORSMITH_PINNED_MIB", "1")
    native = tensorsmith._open_native(str(path), "pread")
    ring = _ring.HostRing()
    got = _ring.load(native, list(tensors), torch.device("cpu"), None, ring)
    want = ref.load_file(path)
    for name in tensors:
        assert torch.equal(got[name], want[name]), name
    assert ring.live == 0 and ring.peak <= 16 * ((64 << 10) + 3 * _ring.ALIGN)


def test_the_read_size_is_settable_and_bounds_every_buffer(tmp_path, monkeypatch):
    """TENSORSMITH_READ_MIB sets the bytes per read: a 4 MiB tensor goes in 1 MiB pieces,
    the ring (3 MiB) holds 3 of them at once, and the values are the reference's."""
    path = tmp_path / "m.safetensors"
    g = torch.Generator().manual_seed(5)
    tensors = {"big": torch.randn(1024, 1024, generator=g), "small": torch.arange(7.0),
               "mid": torch.randn(300, 1000, generator=g).bfloat16()}
    ref.save_file(tensors, path)
    monkeypatch.delenv("TENSORSMITH_READ_MIB", raising=False)
    assert _ring._chunk() == _ring.CHUNK == 8 << 20
    monkeypatch.setenv("TENSORSMITH_READ_MIB", "1")
    monkeypatch.setenv("TENSORSMITH_PINNED_MIB", "3")
    assert _ring._chunk() == 1 << 20
    native = tensorsmith._open_native(str(path), "pread")
    ranges = {n: native.raw_range(n) for n in native.names()}
    dest = {n: torch.empty(r[2] - r[1], dtype=torch.uint8) for n, r in ranges.items()}
    pieces = _ring.span_pieces(native, ranges, dest)
    assert max(p.nbytes for p in pieces) == 1 << 20
    assert sum(p.nbytes for p in pieces) == sum(r[2] - r[1] for r in ranges.values())
    ring = _ring.HostRing()
    got = _ring.load(native, list(tensors), torch.device("cpu"), None, ring)
    for name, t in tensors.items():
        assert torch.equal(got[name], t), name
    assert ring.live == 0 and ring.made == 3
    assert ring.peak <= 3 * ((1 << 20) + 3 * _ring.ALIGN)


def test_a_failing_read_gives_every_ring_buffer_back(monkeypatch):
    monkeypatch.setattr(_ring, "CHUNK", 1 << 10)
    monkeypatch.setenv("TENSORSMITH_PINNED_MIB", "1")
    dest = torch.zeros(64 << 10, dtype=torch.uint8)
    filled = []

    def fill(k):
        def f(ptr, cap):
            if k == 37:
                raise OSError("the disk went away")
            filled.append(k)
        return f

    pieces = [_ring.Piece(fill(k), 1 << 10, [(dest, k << 10, 0, 1 << 10)]) for k in range(64)]
    ring = _ring.HostRing()
    with pytest.raises(OSError, match="went away"):
        _ring.run(pieces, ring)
    assert ring.live == 0 and ring.made <= 64
    assert 37 not in filled


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="torch without float4")
@pytest.mark.parametrize("chunk", [64, 1 << 10])
def test_a_packed_part_cut_inside_a_row_goes_through_the_host(tmp_path, monkeypatch, chunk):
    """F4 rows of a part larger than a piece cannot be cut in whole bytes below a row: that
    part is gathered on the host (its own bytes) and still lands right; with larger pieces
    its rows go through the ring."""
    monkeypatch.setattr(_ring, "CHUNK", chunk)
    monkeypatch.setenv("TENSORSMITH_PINNED_MIB", "1")
    raw = torch.arange(8 * 100, dtype=torch.int32).reshape(8, 100).to(torch.uint8)
    path = tmp_path / "f4.safetensors"
    ref.save_file({"w": raw.view(torch.float4_e2m1fn_x2)}, path)
    natives = _sharded._natives(path, "pread", None)
    ring = _ring.HostRing()
    got = _sharded.load(natives, {"w": (1, 8, 192)}, torch.device("cpu"), {}, None, ring)
    assert torch.equal(got["w"].view(torch.uint8), raw[:, 4:96])
    assert ring.live == 0
    assert (ring.made == 0) == (chunk == 64)  # 92-byte rows: too big for 64-byte pieces


# Cold loads read around the page cache (O_DIRECT): offsets, lengths and buffers aligned to
# 4096, the bytes found inside the aligned span. Runs of 10,000 bytes start and end off the
# alignment, as tensors do.

def _direct_works(native):
    buf = torch.empty(3 * _ring.ALIGN, dtype=torch.uint8)
    pad = -buf.data_ptr() % _ring.ALIGN
    return native.read_into_direct(0, 8, 10, buf.data_ptr() + pad, 2 * _ring.ALIGN) is not None


@pytest.mark.parametrize("ranks", [1, 4])
def test_direct_reads_land_the_same_bytes(saved, ranks, monkeypatch):
    tensors, path = saved
    monkeypatch.setattr(_ring, "CHUNK", 10_000)
    monkeypatch.setenv("TENSORSMITH_PINNED_MIB", "1")
    monkeypatch.setenv("TENSORSMITH_DIRECT_IO", "1")
    native = tensorsmith._open_native(str(path), "pread")
    if not _direct_works(native):
        pytest.skip(f"the filesystem of {path} refuses O_DIRECT")
    assert _ring._direct_files(native, {0}) == {0}
    want = ref.load_file(path)
    ring = _ring.HostRing()
    got = _ring.load(native, list(tensors), torch.device("cpu"), None, ring)
    for name in tensors:
        assert torch.equal(got[name], want[name]), name
    for r in range(ranks):
        plan = rank_plan(tensors, r, ranks, dims=(0, None))  # one span each: the direct path
        ring, stats = _ring.HostRing(), {}
        natives = _sharded._natives(path, "pread", None)
        got = _sharded.load(natives, plan, torch.device("cpu"), stats, None, ring)
        for name, spec in plan.items():
            assert torch.equal(got[name], expected(want[name], spec)), name
        assert stats["bytes_read"] == stats["bytes_kept"] and ring.live == 0


def test_the_page_cache_decides_which_files_are_read_directly(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    ref.save_file({"w": torch.randn(512, 1024)}, path)
    native = tensorsmith._open_native(str(path), "pread")
    path.read_bytes()
    monkeypatch.delenv("TENSORSMITH_DIRECT_IO", raising=False)
    assert _ring._direct_files(native, {0}) == set()  # the default: through the cache
    monkeypatch.setenv("TENSORSMITH_DIRECT_IO", "0")
    assert _ring._direct_files(native, {0}) == set()
    monkeypatch.setenv("TENSORSMITH_DIRECT_IO", "1")
    assert _ring._direct_files(native, {0}) == {0}
    monkeypatch.setenv("TENSORSMITH_DIRECT_IO", "auto")
    assert native.resident(0) > 0.99
    assert _ring._direct_files(native, {0}) == set()  # warm: the page cache stays
    with open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if native.resident(0) >= 0.5:
        pytest.skip("this filesystem keeps the file in memory (tmpfs): no cold file to make")
    assert _ring._direct_files(native, {0}) == {0}  # cold: around the cache
