"""Python reading of s3:// URLs with `storage_options=`, against moto in server mode on
127.0.0.1 (started by a fixture): safe_open, load_file, inspect, stats and convert give what
the local file gives; unknown keys and missing objects are errors that show no secret."""

import os
import sys

import numpy as np
import pytest

import local_servers
import tensorsmith
from tensorsmith.errors import OptionError

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

KEY, SECRET = "AKIAPYTHONTEST", "pythonTestSecretDoNotPrint/xyz"


@pytest.fixture(scope="module")
def moto_endpoint():
    yield from local_servers.moto()


@pytest.fixture(scope="module")
def bucket(moto_endpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("s3")
    local = d / "m.safetensors"
    tensorsmith.save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4),
                           "b": np.ones(5, dtype=np.int16)}, str(local))
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    s3.create_bucket(Bucket="pybucket")
    s3.upload_file(str(local), "pybucket", "dir/m.safetensors")
    return local


@pytest.fixture
def opts(moto_endpoint, monkeypatch):
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", "/nonexistent")
    return {"key": KEY, "secret": SECRET, "endpoint_url": moto_endpoint, "region": "us-east-1"}


def test_safe_open_and_load_file_read_s3(bucket, opts):
    url = "s3://pybucket/dir/m.safetensors"
    want = tensorsmith.load_file(str(bucket))
    with tensorsmith.safe_open(url, framework="np", storage_options=opts) as f:
        assert sorted(f.keys()) == ["b", "w"]
        np.testing.assert_array_equal(f.get_tensor("w"), want["w"])
        np.testing.assert_array_equal(f.get_slice("w")[1:, :2], want["w"][1:, :2])
    got = tensorsmith.load_file("s3a://pybucket/dir/m.safetensors", storage_options=opts)
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    aws = {"aws_access_key_id": KEY, "aws_secret_access_key": SECRET,
           "aws_endpoint_url": opts["endpoint_url"], "anon": False}
    assert tensorsmith.inspect(url, storage_options=aws)["tensors"] == \
        tensorsmith.inspect(str(bucket))["tensors"]
    assert tensorsmith.stats(url, storage_options=opts)["w"]["max"] == 11.0


def test_convert_from_s3_equals_local(bucket, opts, tmp_path):
    a, b = tmp_path / "a.zt", tmp_path / "b.zt"
    tensorsmith.convert(str(bucket), str(a), zt_version="2")
    tensorsmith.convert("s3://pybucket/dir/m.safetensors", str(b), zt_version="2",
                        storage_options=opts)
    assert a.read_bytes() == b.read_bytes()


def test_bad_options_and_missing_objects(bucket, opts):
    with pytest.raises(OptionError, match='unknown key "bogus"'):
        tensorsmith.safe_open("s3://pybucket/dir/m.safetensors", storage_options={"bogus": 1})
    with pytest.raises(OptionError, match="dict"):
        tensorsmith.load_file("s3://pybucket/dir/m.safetensors", storage_options=[("key", "x")])
    with pytest.raises(FileNotFoundError) as e:
        tensorsmith.load_file("s3://pybucket/dir/none.safetensors", storage_options=opts)
    assert "not found: no object 'dir/none.safetensors' in bucket 'pybucket'" in str(e.value)
    assert SECRET not in str(e.value) and "Signature" not in str(e.value)
    with pytest.raises(FileNotFoundError, match="no such bucket 'nobucket'"):
        tensorsmith.inspect("s3://nobucket/m.safetensors", storage_options=opts)


def test_checks_hash_diff_and_report_read_s3(bucket, opts, tmp_path):
    """Every function that reads a model takes `storage_options` and gives on the URL what it
    gives on the local file (one that dropped them would send anonymous requests to AWS)."""
    url = "s3://pybucket/dir/m.safetensors"
    local = str(bucket)
    assert tensorsmith.hash(url, content=True, storage_options=opts) == \
        tensorsmith.hash(local, content=True)
    assert tensorsmith.hash(url, compat="weight-inspect", storage_options=opts) == \
        tensorsmith.hash(local, compat="weight-inspect")
    assert tensorsmith.validate(url, storage_options=opts) == tensorsmith.validate(local)
    assert tensorsmith.verify(url, storage_options=opts) == tensorsmith.verify(local)
    d = tensorsmith.diff(local, url, values=True, storage_options=opts)
    assert d == tensorsmith.diff(local, local, values=True) | {"b": url}, d
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    tensorsmith.report(url, b, title="t", stats=True, storage_options=opts)
    tensorsmith.report(local, a, title="t", stats=True)
    assert b.read_text().replace(url, local) == a.read_text()  # the page names its source
    calls = [lambda u, o: tensorsmith.hash(u, storage_options=o),
             lambda u, o: tensorsmith.validate(u, storage_options=o),
             lambda u, o: tensorsmith.verify(u, storage_options=o),
             lambda u, o: tensorsmith.diff(local, u, storage_options=o),
             lambda u, o: tensorsmith.report(u, tmp_path / "c.html", storage_options=o)]
    for call in calls:
        with pytest.raises(OptionError, match='unknown key "bogus"'):
            call(url, {"bogus": 1})
        # Also when the 404 comes without S3's NoSuchBucket code in a body (seen on moto, 2
        # runs in 4): the open then lists the key, and that listing's error says which.
        with pytest.raises(FileNotFoundError, match="no such bucket 'nobucket'"):
            call("s3://nobucket/m.safetensors", opts)


AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE = os.path.join(os.path.dirname(__file__), "..", "..", ".tools", "azurite",
                       "node_modules", ".bin", "azurite-blob")


@pytest.fixture(scope="module")
def azurite(tmp_path_factory, bucket):
    """Azurite (npm; scripts/test installs it into .tools/azurite) with the model in a private
    container, uploaded by the Azure SDK; its connection string."""
    assert os.path.exists(AZURITE), "run `npm install --prefix .tools/azurite azurite@3.37.0`"
    azblob = pytest.importorskip("azure.storage.blob")
    port = local_servers.free_port()
    p = local_servers.serve([
        AZURITE, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
        str(tmp_path_factory.mktemp("azurite")), "--silent", "--skipApiVersionCheck", "--loose",
    ], port)
    cs = (f"DefaultEndpointsProtocol=http;AccountName={AZ_ACCOUNT};AccountKey={AZ_KEY};"
          f"BlobEndpoint=http://127.0.0.1:{port}/{AZ_ACCOUNT};")
    svc = azblob.BlobServiceClient.from_connection_string(cs)
    svc.create_container("models").upload_blob("dir/m.safetensors", bucket.read_bytes())
    yield cs
    p.kill()  # Azurite waits for open connections to close on SIGTERM
    p.wait(10)


@pytest.fixture(scope="module")
def gcs(bucket):
    """gcp-storage-emulator (PyPI) with the model in bucket `models`; its endpoint."""
    import urllib.request
    pytest.importorskip("gcp_storage_emulator")
    port = local_servers.free_port()
    p = local_servers.serve([
        sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
        "--port", str(port), "--in-memory", "-q", "--default-bucket", "models",
    ], port)
    endpoint = f"http://127.0.0.1:{port}"
    urllib.request.urlopen(urllib.request.Request(
        f"{endpoint}/models/dir/m.safetensors", data=bucket.read_bytes(), method="PUT")).read()
    yield endpoint
    p.terminate()
    p.wait(10)


def test_azure_and_gcs_read_with_storage_options(bucket, azurite, gcs, monkeypatch):
    for k in list(os.environ):
        if k.startswith(("AZURE_", "GOOGLE_")) or k == "STORAGE_EMULATOR_HOST":
            monkeypatch.delenv(k)
    want = tensorsmith.load_file(str(bucket))
    az = {"connection_string": azurite}
    for url, opts in [("az://models/dir/m.safetensors", az),
                      ("gs://models/dir/m.safetensors", {"endpoint_url": gcs})]:
        got = tensorsmith.load_file(url, storage_options=opts)
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
        with tensorsmith.safe_open(url, framework="np", storage_options=opts) as f:
            np.testing.assert_array_equal(f.get_slice("w")[1:, :2], want["w"][1:, :2])
        assert tensorsmith.hash(url, storage_options=opts) == tensorsmith.hash(str(bucket))
    with pytest.raises(FileNotFoundError, match="no blob 'dir/none' in container 'models'"):
        tensorsmith.inspect("az://models/dir/none", storage_options=az)
    with pytest.raises(tensorsmith.errors.AccessDenied) as e:
        tensorsmith.inspect("az://models/dir/m.safetensors",
                            storage_options={"connection_string": azurite.replace(
                                AZ_KEY, "A" * 88)})
    assert AZ_KEY not in str(e.value) and "A" * 88 not in str(e.value)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs)
    assert tensorsmith.inspect("gs://models/dir/m.safetensors")["tensors"] == \
        tensorsmith.inspect(str(bucket))["tensors"]


class _CountingProxy(local_servers.Forwarder):
    """A forwarder in front of moto that counts the requests sent through it (to see the part
    size of a download) and the bytes the server sent back, headers included."""

    def __init__(self, upstream):
        self.requests = 0
        self.down_bytes = 0
        super().__init__(upstream)

    def up(self, data, state):
        with self._lock:
            self.requests += data.count(b"GET ")

    def down(self, data, state):
        with self._lock:
            self.down_bytes += len(data)
        return data


def test_transfer_storage_options_reach_the_reader(moto_endpoint, opts, tmp_path):
    # A 12 MiB tensor: past the first 256 KiB read at open, 5 MiB parts make 3 requests, the
    # default 8 MiB parts 2.
    local = tmp_path / "big.safetensors"
    want = {"w": np.arange(3 << 20, dtype=np.float32)}
    tensorsmith.save_file(want, str(local))
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    s3.upload_file(str(local), "pybucket", "big/m.safetensors")
    for extra, gets in [({"part_size": "5MiB", "max_concurrency": 4, "max_attempts": 2}, 1 + 3),
                        ({}, 1 + 2)]:
        proxy = _CountingProxy(moto_endpoint)
        got = tensorsmith.load_file("s3://pybucket/big/m.safetensors",
                                    storage_options={**opts, **extra,
                                                     "endpoint_url": proxy.endpoint})
        np.testing.assert_array_equal(got["w"], want["w"])
        assert proxy.requests == gets, (extra, proxy.requests)
    with pytest.raises(OptionError, match="max_concurrency must be a whole number"):
        tensorsmith.load_file("s3://pybucket/big/m.safetensors",
                              storage_options={**opts, "max_concurrency": 0})


@pytest.mark.parametrize("ext", ["safetensors", "gguf", "zt"])
def test_save_file_and_convert_to_azure_and_gcs(azurite, gcs, tmp_path, monkeypatch, ext):
    """save_file and convert write az:// and gs:// outputs (multi-part at part_size=5MiB)
    that are the bytes of the local ones, read back through the URL."""
    for k in list(os.environ):
        if k.startswith(("AZURE_", "GOOGLE_")) or k == "STORAGE_EMULATOR_HOST":
            monkeypatch.delenv(k)
    t = {f"t{i}": np.full(1 << 19, i, dtype=np.float32) for i in range(6)}  # 12 MiB
    src = tmp_path / "in.safetensors"
    tensorsmith.save_file(t, str(src))
    local = tmp_path / f"out.{ext}"
    tensorsmith.convert(str(src), str(local))
    for url, opts in [(f"az://models/w/out.{ext}", {"connection_string": azurite}),
                      (f"gs://models/w/out.{ext}", {"endpoint_url": gcs})]:
        opts = {**opts, "part_size": "5MiB", "max_concurrency": "3"}
        assert tensorsmith.convert(str(src), url, storage_options=opts) == [url]
        assert tensorsmith.hash(url, storage_options=opts) == tensorsmith.hash(str(local))
        if ext == "safetensors":
            saved = url.replace("out.", "saved.")
            tensorsmith.save_file(t, saved, storage_options=opts)
            got = tensorsmith.load_file(saved, storage_options=opts)
            for k in t:
                np.testing.assert_array_equal(got[k], t[k])
    with pytest.raises(tensorsmith.errors.AccessDenied) as e:
        tensorsmith.save_file(t, "az://models/w/denied.safetensors", storage_options={
            "connection_string": azurite.replace(AZ_KEY, "A" * 88)})
    assert "az://models/w/denied.safetensors" in str(e.value)
    assert AZ_KEY not in str(e.value) and "A" * 88 not in str(e.value)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork(2)")
def test_azure_reads_in_forked_children(bucket, azurite, monkeypatch):
    """The I/O runtime of the parent (started by its first read) is not in a forked child
    (DataLoader workers, Spark's Python workers fork): the child makes its own and reads."""
    for k in list(os.environ):
        if k.startswith("AZURE_"):
            monkeypatch.delenv(k)
    az = {"connection_string": azurite}
    url = "az://models/dir/m.safetensors"
    want = tensorsmith.hash(url, storage_options=az)
    children = []
    for _ in range(2):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: read, report, exit without the parent's cleanup
            os.close(r)
            try:
                got = tensorsmith.hash(url, storage_options=az)
                os.write(w, got.encode() if isinstance(got, str) else repr(got).encode())
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                os.write(w, f"error: {e}".encode())
            finally:
                os._exit(0)
        os.close(w)
        children.append((pid, r))
    for pid, r in children:
        with os.fdopen(r, "rb") as f:
            got = f.read().decode()
        os.waitpid(pid, 0)
        assert got == (want if isinstance(want, str) else repr(want)), got
    # The parent's runtime still serves it.
    assert tensorsmith.hash(url, storage_options=az) == want


def test_slices_of_azure_and_gcs_objects_read_only_their_bytes(azurite, gcs, tmp_path,
                                                                monkeypatch):
    """`get_slice` on az:// and gs:// reads the rows it keeps (one span) and, cut along the
    second dimension, one span per row (the per-rank reads of tensor-parallel loading): the
    byte layer's counter and the bytes the server sent (through a counting proxy) agree."""
    import urllib.request
    for k in list(os.environ):
        if k.startswith(("AZURE_", "GOOGLE_")) or k == "STORAGE_EMULATOR_HOST":
            monkeypatch.delenv(k)
    w = np.arange(1024 * 512, dtype=np.float32).reshape(1024, 512)  # 2 MiB
    local = tmp_path / "tp.safetensors"
    tensorsmith.save_file({"w": w}, str(local))
    azblob = pytest.importorskip("azure.storage.blob")
    azblob.BlobServiceClient.from_connection_string(azurite).get_container_client(
        "models").upload_blob("tp/tp.safetensors", local.read_bytes(), overwrite=True)
    urllib.request.urlopen(urllib.request.Request(
        f"{gcs}/models/tp/tp.safetensors", data=local.read_bytes(), method="PUT")).read()
    az_endpoint = azurite.split("BlobEndpoint=")[1].split(";")[0].removesuffix(f"/{AZ_ACCOUNT}")
    az_proxy, gs_proxy = _CountingProxy(az_endpoint), _CountingProxy(gcs)
    cases = [
        ("az://models/tp/tp.safetensors", az_proxy,
         {"connection_string": azurite.replace(az_endpoint, az_proxy.endpoint)}),
        ("gs://models/tp/tp.safetensors", gs_proxy, {"endpoint_url": gs_proxy.endpoint}),
    ]
    for url, proxy, opts in cases:
        with tensorsmith.safe_open(url, framework="np", storage_options=opts) as f:
            # Rows 512..768: one span of 256 rows, past the first 256 KiB read at open.
            before, down, requests = f._f.bytes_read()[0], proxy.down_bytes, proxy.requests
            np.testing.assert_array_equal(f.get_slice("w")[512:768], w[512:768])
            kept = 256 * 512 * 4
            assert f._f.bytes_read()[0] - before == kept, url
            sent = proxy.down_bytes - down
            assert kept <= sent <= kept + 4096 * (proxy.requests - requests), (url, sent)
            # Columns 128..256 of rows 640..1024: 384 runs of 512 bytes, 1,536 bytes apart,
            # merged under the 256 KiB rule for URLs into reads of at most 8 MiB: the rows'
            # bytes past the first 256 KiB, far from the whole tensor's 2 MiB.
            before, down = f._f.bytes_read()[0], proxy.down_bytes
            np.testing.assert_array_equal(f.get_slice("w")[640:, 128:256], w[640:, 128:256])
            read = f._f.bytes_read()[0] - before
            assert 384 * 512 <= read <= 384 * 2048, (url, read)
            assert proxy.down_bytes - down <= read + 64 * 1024, url


KEYS = ["模型/权重.safetensors", "t~/m~.safetensors", "p/m%41.safetensors", "b/m[1]#?*.safetensors",
        "q/it's \"x\".safetensors", "sp ace/a+b;c=d&e:f@g.safetensors"]


def test_keys_are_the_objects_names_byte_for_byte(bucket, opts, azurite, gcs, monkeypatch):
    """An object's key is its name as the URL gives it, on every store: what we write, boto3
    and the Azure SDK list under that name, and what they wrote under it, we read (object
    keys were percent-encoded into other names: 模型 written as %E6%A8%A1..., ~ read as
    %257E). A key the store client cannot name as it is (`a//m`, which read `a/m`: another
    object) is refused, naming it."""
    for k in list(os.environ):
        if k.startswith(("AZURE_", "GOOGLE_")) or k == "STORAGE_EMULATOR_HOST":
            monkeypatch.delenv(k)
    azblob = pytest.importorskip("azure.storage.blob")
    s3 = boto3.client("s3", endpoint_url=opts["endpoint_url"], aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    container = azblob.BlobServiceClient.from_connection_string(azurite) \
        .get_container_client("models")
    want = tensorsmith.load_file(str(bucket))
    stores = [("s3://pybucket", opts,
               lambda p: [o["Key"] for o in s3.list_objects_v2(Bucket="pybucket", Prefix=p)
                          .get("Contents", [])],
               lambda key: s3.put_object(Bucket="pybucket", Key=key, Body=bucket.read_bytes())),
              ("az://models", {"connection_string": azurite},
               lambda p: list(container.list_blob_names(name_starts_with=p)),
               lambda key: container.upload_blob(key, bucket.read_bytes(), overwrite=True))]
    for base, o, listed, put in stores:
        for i, key in enumerate(KEYS):
            ours, theirs = f"ours{i}/{key}", f"theirs{i}/{key}"
            tensorsmith.convert(str(bucket), f"{base}/{ours}", storage_options=o)
            assert listed(f"ours{i}/") == [ours], base
            put(theirs)
            got = tensorsmith.load_file(f"{base}/{theirs}", storage_options=o)
            assert all(np.array_equal(got[k], want[k]) for k in want), (base, key)
        put("dbl/m.safetensors")
        for bad in ("dbl//m.safetensors", "dbl/./m.safetensors", "dbl/../dbl/m.safetensors"):
            with pytest.raises(OptionError, match="cannot name"):
                tensorsmith.load_file(f"{base}/{bad}", storage_options=o)
            with pytest.raises(OptionError, match="cannot name"):
                tensorsmith.convert(str(bucket), f"{base}/{bad}", storage_options=o)
    # Cloud Storage names objects through its JSON API, each name encoded once.
    for i, key in enumerate(KEYS):
        url = f"gs://models/ours{i}/{key}"
        tensorsmith.convert(str(bucket), url, storage_options={"endpoint_url": gcs})
        got = tensorsmith.load_file(url, storage_options={"endpoint_url": gcs})
        assert all(np.array_equal(got[k], want[k]) for k in want), key


def test_a_scheme_alone_names_no_local_folder(tmp_path, monkeypatch):
    """`s3://` with nothing after it was read as the local folder `s3:` (a model there was
    loaded); it is refused as a URL without a bucket."""
    monkeypatch.chdir(tmp_path)
    for folder in ("s3:", "az:", "gs:"):
        (tmp_path / folder).mkdir()
        tensorsmith.save_file({"w": np.zeros(2, np.float32)},
                              str(tmp_path / folder / "model.safetensors"))
    for url in ("s3://", "az://", "gs://", "s3:///"):
        with pytest.raises(OptionError, match="BUCKET/KEY"):
            tensorsmith.load_file(url)


def test_a_store_that_stops_answering_fails_within_about_the_timeout(opts, azurite, monkeypatch):
    """A server that accepts and never answers: S3 and Azure give up once `timeout` is spent
    on the attempts and their waits (the retries had a 30 s floor of their own: 16 s for
    timeout=3), not max_attempts times over."""
    import socket
    import time
    for k in list(os.environ):
        if k.startswith("AZURE_"):
            monkeypatch.delenv(k)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    port = silent.getsockname()[1]
    try:
        for url, o in (("s3://b/m.safetensors", {**opts, "endpoint_url": f"http://127.0.0.1:{port}"}),
                       ("az://models/m.safetensors", {"connection_string": azurite.replace(
                           azurite.split("BlobEndpoint=")[1].split("/")[2], f"127.0.0.1:{port}")})):
            start = time.monotonic()
            with pytest.raises(tensorsmith.TensorsmithError, match="no answer within the "
                               "timeout \\(the timeout storage option"):
                tensorsmith.load_file(url, storage_options={**o, "timeout": "2",
                                                            "max_attempts": "5"})
            took = time.monotonic() - start
            assert took < 7, (url, took)
    finally:
        silent.close()


def test_an_empty_object_is_read_as_an_empty_file(opts, azurite, monkeypatch):
    """Byte 0 of an empty object cannot be asked for (416): its metadata alone is read, and
    the format's own rule refuses it, as for an empty local file."""
    for k in list(os.environ):
        if k.startswith("AZURE_"):
            monkeypatch.delenv(k)
    azblob = pytest.importorskip("azure.storage.blob")
    s3 = boto3.client("s3", endpoint_url=opts["endpoint_url"], aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    s3.put_object(Bucket="pybucket", Key="empty/e.safetensors", Body=b"")
    azblob.BlobServiceClient.from_connection_string(azurite).get_container_client("models") \
        .upload_blob("empty/e.safetensors", b"", overwrite=True)
    for url, o in (("s3://pybucket/empty/e.safetensors", opts),
                   ("az://models/empty/e.safetensors", {"connection_string": azurite})):
        with pytest.raises(tensorsmith.errors.InvalidFile, match="file is 0 bytes"):
            tensorsmith.load_file(url, storage_options=o)
