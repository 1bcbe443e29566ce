"""`safe_open(url)`: files served over HTTP on 127.0.0.1 (with Range support, as real
servers and hubs have) read exactly as the same files on disk, for safetensors, every zTensor
version and GGUF; only the header travels until a tensor is asked for."""

import http.server
import pathlib
import threading

import numpy as np
import pytest

import tensorsmith

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
FILES = [
    DATA / "safetensors" / "mixed_meta3.safetensors",
    DATA / "ztensor" / "v0.1" / "zstd_float32.zt",
    DATA / "ztensor" / "v0.1" / "big_endian.zt",
    DATA / "ztensor" / "v1.1" / "digest_sha256_zstd.zt",
    DATA / "ztensor" / "v2" / "all_dtypes.zt",
    DATA / "gguf" / "every_type.gguf",
]


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    files: dict = {}
    # Body bytes sent per path: a late count from another test's file never lands here.
    sent: dict = {}

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = self.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, b = rng[6:].split("-")
            a, b = int(a), min(int(b), len(body) - 1)
            if a >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            part = body[a:b + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {a}-{b}/{len(body)}")
        else:
            part = body
            self.send_response(200)
        # Counted before the bytes go out: the client may act on them before this thread
        # runs again.
        self.sent[self.path] = self.sent.get(self.path, 0) + len(part)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)


@pytest.fixture(scope="module")
def server():
    _RangeHandler.files = {f"/{p.name}": p.read_bytes() for p in FILES}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _read_all(target):
    with tensorsmith.safe_open(target, framework="np") as f:
        meta = f.metadata()
        fmt = f.format
        tensors = {k: (f.get_dtype(k), f.get_shape(k), f.get_tensor(k)) for k in f.keys()}
    return fmt, meta, tensors


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_url_reads_as_the_file(server, path):
    here = _read_all(path)
    there = _read_all(f"{server}/{path.name}")
    assert there[:2] == here[:2]
    assert there[2].keys() == here[2].keys()
    for k, (dtype, shape, arr) in here[2].items():
        d, s, a = there[2][k]
        assert (d, s) == (dtype, shape), k
        assert a.dtype == arr.dtype and a.shape == arr.shape, k
        assert np.asarray(a).tobytes() == np.asarray(arr).tobytes(), k


def test_only_the_header_travels_until_a_tensor_is_read(server):
    big = np.arange(1 << 20, dtype=np.float32)  # 4 MiB
    data = tensorsmith.save({"big": big, "small": np.ones(4, np.float32)})
    _RangeHandler.files["/big.safetensors"] = data
    _RangeHandler.sent.pop("/big.safetensors", None)
    with tensorsmith.safe_open(f"{server}/big.safetensors", framework="np") as f:
        assert sorted(f.keys()) == ["big", "small"]
        assert _RangeHandler.sent["/big.safetensors"] < 300 << 10
        assert np.array_equal(f.get_tensor("big"), big)
    assert _RangeHandler.sent["/big.safetensors"] >= big.nbytes


def test_a_missing_url_raises_naming_it(server):
    url = f"{server}/nope.safetensors"
    with pytest.raises(tensorsmith.TensorsmithError) as e:
        tensorsmith.safe_open(url, framework="np")
    assert url in str(e.value) and "404" in str(e.value)
