"""A Hugging Face model folder where it lies: `tensorsmith convert hf://ORG/REPO[@REV] out.gguf`
and `convert s3://BUCKET/PREFIX/ out.gguf` give, byte for byte, the file the local folder gives
(the reference tools' file, tests/data/hf_gguf/vectors.json). The weights are read by range
where they are; config.json, the tokenizer and the other small files are fetched whole.

The Hub is a stand-in on 127.0.0.1 (`HF_ENDPOINT`): it serves `/{ORG}/{REPO}/resolve/{REV}/{PATH}`
from a folder per revision, with ETag and Range, and logs what it was asked; S3 is moto."""

import hashlib
import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import hf_gguf_models as models
import local_servers

VECTORS = json.loads((models.DATA / "vectors.json").read_text())["models"]
KEY, SECRET = "AKIAHFREMOTETEST", "hfRemoteTestSecretDoNotPrint/xyz"


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Hub:
    """The stand-in: `root/ORG/REPO/REV/PATH` served as the Hub's resolve URLs."""

    def __init__(self, root):
        self.root, self.log = root, []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                parts = self.path.split("?")[0].strip("/").split("/")
                rng = self.headers.get("Range")
                hub.log.append((self.path, rng))
                if len(parts) < 5 or parts[2] != "resolve":
                    return self.send_error(404)
                f = hub.root.joinpath(parts[0], parts[1], parts[3], *parts[4:])
                if not f.is_file():
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    return self.end_headers()
                body = f.read_bytes()
                etag = '"%s"' % hashlib.sha256(body).hexdigest()[:16]
                if rng:
                    a, b = rng.removeprefix("bytes=").split("-")
                    a, b = int(a), min(int(b) if b else len(body) - 1, len(body) - 1)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {a}-{b}/{len(body)}")
                    body = body[a:b + 1]
                else:
                    self.send_response(200)
                self.send_header("ETag", etag)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    parent = tmp_path_factory.mktemp("hf")
    return {m: models.materialize(m, parent) for m in ("tiny-qwen2", "tiny-mixtral",
                                                       "tiny-llama3-instruct")}


@pytest.fixture(scope="module")
def hub(folders, tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    # tiny-qwen2 at revision v1 only (main lacks it); tiny-mixtral on main.
    shutil.copytree(folders["tiny-qwen2"], root / "tsorg" / "tiny-qwen2" / "v1")
    shutil.copytree(folders["tiny-mixtral"], root / "tsorg" / "tiny-mixtral" / "main")
    (root / "tsorg" / "no-weights" / "main").mkdir(parents=True)
    shutil.copy(folders["tiny-qwen2"] / "config.json", root / "tsorg" / "no-weights" / "main")
    h = Hub(root)
    yield h
    h.server.shutdown()


@pytest.fixture
def hub_env(hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", "/nonexistent")
    hub.log.clear()
    return hub


def test_a_hub_repository_at_a_revision_converts_as_its_local_folder(tsm, hub_env, tmp_path):
    out = tsm.convert("hf://tsorg/tiny-qwen2@v1", tmp_path / "q.gguf", "-q")
    assert sha(out) == VECTORS["tiny-qwen2"]["f16"]["sha256"]
    asked = [p for p, _ in hub_env.log]
    assert all("/resolve/v1/" in p for p in asked)
    # The small files whole; the shards by range only.
    assert "/tsorg/tiny-qwen2/resolve/v1/config.json" in asked
    assert "/tsorg/tiny-qwen2/resolve/v1/tokenizer.json" in asked
    shards = [(p, r) for p, r in hub_env.log if p.endswith(".safetensors")]
    assert shards and all(r for _, r in shards)
    # With a llama-quantize mix, in one step.
    out = tsm.convert("hf://tsorg/tiny-qwen2@v1/", tmp_path / "m.gguf", "--quantize", "Q4_K_M",
                      "-q")
    assert sha(out) == VECTORS["tiny-qwen2"]["f16-Q4_K_M"]["sha256"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf", "q.gguf"]


def test_a_hub_repository_with_a_sentencepiece_model_and_one_file(tsm, hub_env, tmp_path):
    out = tsm.convert("hf://tsorg/tiny-mixtral", tmp_path / "x.gguf", "--dtype", "f32", "-q")
    assert sha(out) == VECTORS["tiny-mixtral"]["f32"]["sha256"]
    assert "/tsorg/tiny-mixtral/resolve/main/tokenizer.model" in [p for p, _ in hub_env.log]
    # The Python API takes the same URL.
    import tensorsmith
    py = tmp_path / "p.gguf"
    assert tensorsmith.convert("hf://tsorg/tiny-mixtral", py, dtype="F32") == [str(py)]
    assert sha(py) == VECTORS["tiny-mixtral"]["f32"]["sha256"]


def test_a_repository_folder_opens_for_every_command(tsm, hub_env):
    got = tsm.inspect("hf://tsorg/tiny-qwen2@v1")
    names = {t["name"] for t in got["tensors"]}
    assert "model.embed_tokens.weight" in names and "model.layers.2.mlp.down_proj.weight" in names


def test_a_repository_without_weights_or_at_a_missing_revision_is_refused(tsm, hub_env,
                                                                         tmp_path):
    for url in ("hf://tsorg/no-weights", "hf://tsorg/tiny-qwen2"):  # main has no tiny-qwen2
        p = tsm.run("convert", url, tmp_path / "n.gguf", expect=None)
        err = p.stderr.decode()
        assert p.returncode != 0 and "no model.safetensors.index.json nor model.safetensors" in err
        assert url in err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def moto_endpoint():
    yield from local_servers.moto()


def test_a_folder_on_s3_with_storage_options_converts_as_its_local_folder(
        tsm, folders, moto_endpoint, tmp_path, monkeypatch):
    boto3 = pytest.importorskip("boto3")
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", "/nonexistent")
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    s3.create_bucket(Bucket="hfmodels")
    m = "tiny-llama3-instruct"
    for f in folders[m].iterdir():
        s3.upload_file(str(f), "hfmodels", f"org/{m}/{f.name}")
    opts = [x for kv in (("key", KEY), ("secret", SECRET), ("endpoint_url", moto_endpoint),
                         ("region", "us-east-1"))
            for x in ("--storage-option", "=".join(kv))]
    out = tsm.convert(f"s3://hfmodels/org/{m}/", tmp_path / "l.gguf", "--dtype", "bf16",
                      "--quantize", "Q4_K_M", *opts, "-q")
    assert sha(out) == VECTORS[m]["bf16-Q4_K_M"]["sha256"]
