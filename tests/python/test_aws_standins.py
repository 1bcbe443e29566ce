"""The AWS credential stand-ins (aws_standins.py) checked with botocore, the reference SDK:
for each source (IMDSv2, container credentials with a token or a token file, web identity,
a profile's role_arn + source_profile, credential_process) botocore finds the credentials
and S3 calls through the SigV4-checking proxy succeed and are logged; unsigned, wrongly
signed, expired and token-less requests are refused with S3's errors; IMDS without a token,
a wrong web identity token and container calls without the right authorisation are refused;
short-lived credentials are refreshed with no failed call; the command line prints its
endpoints and stops when its stdin closes."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import aws_standins
import local_servers

boto3 = pytest.importorskip("boto3")
botocore = pytest.importorskip("botocore")
pytest.importorskip("moto.server")

from botocore import UNSIGNED  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError, CredentialRetrievalError  # noqa: E402

STATIC = ("AKIASTANDINSTATIC01", "standinStaticSecretDoNotPrint/abc")
WEB_TOKEN = "eyJhbGciOiJSUzI1NiJ9.standin-web-identity.sig"
CONTAINER_TOKEN = "container-auth-token-0123456789"
BUCKET, PUBLIC = "creds", "public-b"


@pytest.fixture(scope="module")
def moto_url():
    servers = local_servers.moto()
    url = next(servers)
    s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id="AKIAX", region_name="us-east-1",
                      aws_secret_access_key="x")
    s3.create_bucket(Bucket=BUCKET)
    s3.create_bucket(Bucket=PUBLIC)
    s3.put_object(Bucket=PUBLIC, Key="open.txt", Body=b"anyone may read this",
                  ACL="public-read")
    yield url
    next(servers, None)


@pytest.fixture(scope="module")
def standins(moto_url, tmp_path_factory):
    log = tmp_path_factory.mktemp("standins") / "log.jsonl"
    with aws_standins.Standins(moto_url, str(log), lifetime=3600, web_identity_token=WEB_TOKEN,
                               container_token=CONTAINER_TOKEN, static_keys=dict([STATIC]),
                               public_buckets=[PUBLIC]) as s:
        yield s


@pytest.fixture
def env(monkeypatch, tmp_path):
    """No AWS settings but empty config files, IMDS off, the region; returns a setter."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "config").write_text("")
    (tmp_path / "credentials").write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")

    def set_env(values):
        for k, v in values.items():
            monkeypatch.setenv(k, v)
    return set_env


def client(standins, session=None, **kw):
    session = session or boto3.Session()
    return session.client("s3", endpoint_url=standins.s3.url, region_name="us-east-1", **kw)


def exercise(standins, session, prefix):
    """Put, get, list and a ranged get through the proxy with `session`'s credentials;
    returns the key id they were signed with."""
    s3 = client(standins, session)
    body = os.urandom(300_000)
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/obj", Body=body)
    assert s3.get_object(Bucket=BUCKET, Key=f"{prefix}/obj")["Body"].read() == body
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]
    assert keys == [f"{prefix}/obj"]
    r = s3.get_object(Bucket=BUCKET, Key=f"{prefix}/obj", Range="bytes=1000-1999")
    assert r["ContentRange"] == f"bytes 1000-1999/{len(body)}"
    assert r["Body"].read() == body[1000:2000]
    key = session.get_credentials().get_frozen_credentials().access_key
    st = standins.s3.stats()[key]
    assert st["requests"] >= 4 and st["bytes_up"] >= len(body) and st["bytes_down"] >= len(body), (
        key, st, standins.issuer.events(key=key))
    return key


def issued(standins, source, key):
    ev = standins.issuer.issues(source)
    assert key in [e["key"] for e in ev], (source, key, ev)
    logged = [json.loads(line) for line in open(standins.log)]
    assert any(e["event"] == "issue" and e["key"] == key and e["source"] == source
               for e in logged)


def s3_code(exc_info):
    e = exc_info.value.response
    return e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"]


# ---------------------------------------------------------------------------------------
# Each source, found by botocore


def test_imds_v2(standins, env, tmp_path):
    env(standins.envs(str(tmp_path))["imds"])
    session = boto3.Session()
    assert session.get_credentials().method == "iam-role"
    key = exercise(standins, session, "imds")
    assert key.startswith("ASIA")
    issued(standins, "imds", key)
    # The region as SDKs read it (IMDSRegionProvider), through IMDSv2.
    fetcher = botocore.utils.InstanceMetadataRegionFetcher(
        config={"ec2_metadata_service_endpoint": standins.imds.url})
    assert fetcher.retrieve_region() == "us-east-1"


def test_container_full_uri_with_token(standins, env, tmp_path):
    env(standins.envs(str(tmp_path))["container"])
    session = boto3.Session()
    assert session.get_credentials().method == "container-role"
    issued(standins, "container", exercise(standins, session, "container"))


def test_container_token_file(standins, env, tmp_path):
    e = standins.envs(str(tmp_path))["container_token_file"]
    assert "AWS_CONTAINER_AUTHORIZATION_TOKEN" not in e
    env(e)
    session = boto3.Session()
    assert session.get_credentials().method == "container-role"
    issued(standins, "container", exercise(standins, session, "container-file"))


def test_web_identity(standins, env, tmp_path):
    env(standins.envs(str(tmp_path))["web_identity"])
    session = boto3.Session()
    assert session.get_credentials().method == "assume-role-with-web-identity"
    issued(standins, "web_identity", exercise(standins, session, "web"))


def test_profile_role_arn_with_source_profile(standins, env, tmp_path):
    env({**standins.write_profiles(str(tmp_path)), "AWS_PROFILE": "role"})
    session = boto3.Session()
    assert session.get_credentials().method == "assume-role"
    key = exercise(standins, session, "role")
    issued(standins, "assume_role", key)
    # Signed by the source profile's static key.
    assert standins.issuer.events("assume_role", key=key)[0]["by_key"] == STATIC[0]


def test_profile_role_arn_through_env_sts_endpoint(standins, env, tmp_path):
    (tmp_path / "config").write_text(
        f"[profile r2]\nrole_arn = {aws_standins.ROLE_ARN}\nsource_profile = src\n"
        "[profile src]\n")
    (tmp_path / "credentials").write_text(
        f"[src]\naws_access_key_id = {STATIC[0]}\naws_secret_access_key = {STATIC[1]}\n")
    env({"AWS_PROFILE": "r2", "AWS_ENDPOINT_URL_STS": standins.sts.url})
    session = boto3.Session()
    issued(standins, "assume_role", exercise(standins, session, "role-env"))


def test_credential_process(standins, env, tmp_path):
    env({**standins.write_profiles(str(tmp_path)), "AWS_PROFILE": "process"})
    session = boto3.Session()
    assert session.get_credentials().method == "custom-process"
    issued(standins, "credential_process", exercise(standins, session, "process"))


def test_static_key_and_sts_caller_identity(standins, env, tmp_path):
    env(standins.envs(str(tmp_path))["static"])
    session = boto3.Session()
    assert exercise(standins, session, "static") == STATIC[0]
    sts = session.client("sts", endpoint_url=standins.sts.url)
    assert sts.get_caller_identity()["UserId"] == STATIC[0]


def test_public_bucket_unsigned_read(standins, env):
    s3 = client(standins, config=Config(signature_version=UNSIGNED))
    assert s3.get_object(Bucket=PUBLIC, Key="open.txt")["Body"].read() == b"anyone may read this"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=PUBLIC, Key="w.txt", Body=b"no")
    assert s3_code(e) == (403, "AccessDenied")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key="imds/obj")
    assert s3_code(e) == (403, "AccessDenied")
    assert standins.s3.stats()["anonymous"]["requests"] >= 1


def test_presigned_urls(standins, env):
    c = standins.issuer.issue("test")
    s3 = client(standins, aws_access_key_id=c.key, aws_secret_access_key=c.secret,
                aws_session_token=c.token, config=Config(signature_version="s3v4"))
    put = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "pre/a b+c"})
    req = urllib.request.Request(put, data=b"presigned body", method="PUT",
                                 headers={"Content-Type": "application/octet-stream"})
    assert urllib.request.urlopen(req, timeout=10).status == 200
    get = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "pre/a b+c"})
    assert urllib.request.urlopen(get, timeout=10).read() == b"presigned body"
    # A presigned URL stops working when its X-Amz-Expires has passed.
    short = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "pre/a b+c"},
                                      ExpiresIn=1)
    deadline = time.time() + 10
    while True:
        try:
            urllib.request.urlopen(short, timeout=10).read()
        except urllib.error.HTTPError as e:
            assert e.code == 403 and b"Request has expired" in e.read()
            break
        assert time.time() < deadline, "the presigned URL did not expire"
        time.sleep(0.2)
    v2 = client(standins, aws_access_key_id=c.key, aws_secret_access_key=c.secret,
                aws_session_token=c.token)  # botocore presigns S3 with SigV2 by default
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(v2.generate_presigned_url(
            "get_object", Params={"Bucket": BUCKET, "Key": "pre/a b+c"}), timeout=10)
    assert e.value.code == 400 and b"SigV2" in e.value.read()
    for bad in (get.replace("X-Amz-Signature=", "X-Amz-Signature=0"),
                get.replace(urllib.parse.quote(c.token, safe=""), "wrong")):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(bad, timeout=10)
        assert e.value.code in (400, 403)


class FixedPayloadAuth(botocore.auth.S3SigV4Auth):
    """botocore's S3 signer with a given x-amz-content-sha256 (UNSIGNED-PAYLOAD, STREAMING-…,
    or a hash), for the payload modes botocore itself only uses over https."""

    def __init__(self, creds, payload_hash):
        super().__init__(botocore.credentials.Credentials(creds.key, creds.secret, creds.token),
                         "s3", "us-east-1")
        self._payload_hash = payload_hash

    def payload(self, request):
        return self._payload_hash


def send_signed(url, creds, payload_hash, body, headers=None, method="PUT"):
    # (urllib would send a form Content-Type, which moto then parses as a form.)
    headers = {"Content-Type": "application/octet-stream", **(headers or {})}
    req = botocore.awsrequest.AWSRequest(method=method, url=url, data=body, headers=headers)
    FixedPayloadAuth(creds, payload_hash).add_auth(req)
    p = req.prepare()
    try:
        with urllib.request.urlopen(urllib.request.Request(
                p.url, data=p.body, headers=dict(p.headers), method=method), timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def aws_chunked(data, size=65536):
    """`data` in aws-chunked framing with a CRC32 trailer (STREAMING-UNSIGNED-PAYLOAD-TRAILER)."""
    import base64
    import zlib
    out = b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + size]), data[i:i + size])
                   for i in range(0, len(data), size))
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big"))
    return out + b"0\r\nx-amz-checksum-crc32:" + crc + b"\r\n\r\n"


def test_payload_modes(standins):
    c = standins.issuer.issue("test")
    url = f"{standins.s3.url}/{BUCKET}/modes/"
    get = boto3.client("s3", endpoint_url=standins.s3.url, region_name="us-east-1",
                       aws_access_key_id=c.key, aws_secret_access_key=c.secret,
                       aws_session_token=c.token)
    assert send_signed(url + "unsigned", c, "UNSIGNED-PAYLOAD", b"u" * 1000)[0] == 200
    assert get.get_object(Bucket=BUCKET, Key="modes/unsigned")["Body"].read() == b"u" * 1000
    data = os.urandom(200_000)
    streaming = {"Content-Encoding": "aws-chunked", "x-amz-trailer": "x-amz-checksum-crc32",
                 "x-amz-decoded-content-length": str(len(data))}
    status, _ = send_signed(url + "streamed", c, "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                            aws_chunked(data), streaming)
    assert status == 200
    assert get.get_object(Bucket=BUCKET, Key="modes/streamed")["Body"].read() == data
    # The seed signature of a streaming upload is checked.
    wrong = aws_standins.Credentials(c.key, c.secret + "x", c.token, c.expires, "", "", 0)
    status, body = send_signed(url + "streamed2", wrong, "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                               aws_chunked(data), streaming)
    assert status == 403 and b"SignatureDoesNotMatch" in body
    # A signed hash that is not the body's.
    import hashlib
    status, body = send_signed(url + "mismatch", c, hashlib.sha256(b"other").hexdigest(), b"x")
    assert status == 400 and b"XAmzContentSHA256Mismatch" in body


def test_chunked_upload_and_keep_alive(standins):
    """A Transfer-Encoding: chunked upload (UNSIGNED-PAYLOAD) is forwarded whole, and the
    connection stays usable after it and after refusals."""
    import http.client
    c = standins.issuer.issue("test")
    req = botocore.awsrequest.AWSRequest(
        method="PUT", url=f"{standins.s3.url}/{BUCKET}/chunked/obj",
        headers={"Content-Type": "application/octet-stream", "Transfer-Encoding": "chunked"})
    FixedPayloadAuth(c, "UNSIGNED-PAYLOAD").add_auth(req)
    conn = http.client.HTTPConnection(f"127.0.0.1:{standins.s3.port}", timeout=30)
    parts = [os.urandom(100_000) for _ in range(3)]
    conn.request("PUT", f"/{BUCKET}/chunked/obj", body=iter(parts), headers=dict(req.headers),
                 encode_chunked=True)
    r = conn.getresponse()
    assert (r.status, r.read()) == (200, b"")
    for _ in range(2):
        conn.request("GET", f"/{BUCKET}/chunked/obj")
        r = conn.getresponse()
        assert r.status == 403 and b"AccessDenied" in r.read()
    get = botocore.awsrequest.AWSRequest(method="GET",
                                         url=f"{standins.s3.url}/{BUCKET}/chunked/obj")
    FixedPayloadAuth(c, "UNSIGNED-PAYLOAD").add_auth(get)
    conn.request("GET", f"/{BUCKET}/chunked/obj", headers=dict(get.headers))
    r = conn.getresponse()
    assert r.status == 200 and r.read() == b"".join(parts)
    conn.close()
    assert standins.s3.stats()[c.key]["bytes_up"] == 300_000


def test_large_bodies_concurrent_and_counted(standins, tmp_path):
    from boto3.s3.transfer import TransferConfig
    c = standins.issuer.issue("large")
    s3 = client(standins, aws_access_key_id=c.key, aws_secret_access_key=c.secret,
                aws_session_token=c.token)
    big = os.urandom(20 << 20)  # over the proxy's whole-body hash check: streamed
    s3.put_object(Bucket=BUCKET, Key="large/single", Body=big)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(big[: 24 << 20] + big[:4 << 20])
    cfg = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20,
                         max_concurrency=4)
    s3.upload_file(str(src), BUCKET, "large/multi", Config=cfg)
    s3.download_file(BUCKET, "large/multi", str(dst), Config=cfg)
    assert dst.read_bytes() == src.read_bytes()
    st = standins.s3.stats()[c.key]
    size = src.stat().st_size
    assert st["bytes_up"] >= len(big) + size and st["bytes_down"] >= size
    assert st["requests"] >= 1 + 1 + 3 + 1 + 1 + 3  # put; create, 3 parts, complete; head, 3 gets


# ---------------------------------------------------------------------------------------
# Refusals


def test_unsigned_request_is_refused(standins):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{standins.s3.url}/{BUCKET}/imds/obj", timeout=10)
    assert e.value.code == 403 and b"<Code>AccessDenied</Code>" in e.value.read()


@pytest.mark.parametrize("case, want", [
    ("wrong secret", (403, "SignatureDoesNotMatch")),
    ("expired", (400, "ExpiredToken")),
    ("no session token", (403, "InvalidAccessKeyId")),
    ("wrong session token", (400, "InvalidToken")),
    ("unknown key", (403, "InvalidAccessKeyId")),
    ("static key, wrong secret", (403, "SignatureDoesNotMatch")),
])
def test_bad_credentials_are_refused(standins, env, case, want):
    c = standins.issuer.issue("test", lifetime=-60 if case == "expired" else None)
    key, secret, token = c.key, c.secret, c.token
    if case == "wrong secret":
        secret = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    elif case == "no session token":
        token = None
    elif case == "wrong session token":
        token = token[::-1]
    elif case == "unknown key":
        key = "ASIA" + "Z" * 16
    elif case.startswith("static"):
        key, secret, token = STATIC[0], STATIC[1] + "x", None
    s3 = client(standins, aws_access_key_id=key, aws_secret_access_key=secret,
                aws_session_token=token, config=Config(retries={"max_attempts": 1}))
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=BUCKET, Key="refused", Body=b"x" * 5000)
    assert s3_code(e) == want
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=BUCKET)
    assert s3_code(e) == want
    assert standins.issuer.events("s3_refused", code=want[1])


def test_imds_needs_a_token(standins):
    base = standins.imds.url + "/latest/meta-data/iam/security-credentials/"
    for headers in ({}, {"X-aws-ec2-metadata-token": "not-a-token"}):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(base, headers=headers), timeout=10)
        assert e.value.code == 401
    put = urllib.request.Request(standins.imds.url + "/latest/api/token", method="PUT")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(put, timeout=10)
    assert e.value.code == 400
    put.add_header("X-aws-ec2-metadata-token-ttl-seconds", "60")
    token = urllib.request.urlopen(put, timeout=10).read().decode()
    get = urllib.request.Request(base, headers={"X-aws-ec2-metadata-token": token})
    assert urllib.request.urlopen(get, timeout=10).read().decode() == aws_standins.ROLE_NAME
    get.full_url = base + aws_standins.ROLE_NAME
    doc = json.loads(urllib.request.urlopen(get, timeout=10).read())
    assert doc["Code"] == "Success" and doc["Type"] == "AWS-HMAC"
    assert doc["AccessKeyId"].startswith("ASIA") and doc["Expiration"].endswith("Z")


def test_wrong_web_identity_token(standins, env, tmp_path):
    e = standins.envs(str(tmp_path))["web_identity"]
    (tmp_path / "wrong").write_text("not-the-token")
    env({**e, "AWS_WEB_IDENTITY_TOKEN_FILE": str(tmp_path / "wrong")})
    with pytest.raises(ClientError) as exc:
        boto3.Session().get_credentials().get_frozen_credentials()
    assert exc.value.response["Error"]["Code"] == "InvalidIdentityToken"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # The query (GET) form, as some SDKs send it.
    q = {"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15",
         "RoleArn": aws_standins.ROLE_ARN, "RoleSessionName": "q", "WebIdentityToken": WEB_TOKEN}
    xml = urllib.request.urlopen(f"{standins.sts.url}/?{urllib.parse.urlencode(q)}",
                                 timeout=10).read().decode()
    assert "<AssumeRoleWithWebIdentityResult>" in xml and "<AccessKeyId>ASIA" in xml
    q["WebIdentityToken"] = "wrong"
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(f"{standins.sts.url}/?{urllib.parse.urlencode(q)}", timeout=10)
    assert exc.value.code == 400 and b"<Code>InvalidIdentityToken</Code>" in exc.value.read()


def test_sts_assume_role_refusals(standins, env):
    arn = aws_standins.ROLE_ARN
    sts = boto3.client("sts", endpoint_url=standins.sts.url, aws_access_key_id=STATIC[0],
                       aws_secret_access_key="wrong", region_name="us-east-1")
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=arn, RoleSessionName="sess")
    assert s3_code(e) == (403, "SignatureDoesNotMatch")
    sts = boto3.client("sts", endpoint_url=standins.sts.url, region_name="us-east-1",
                       config=Config(signature_version=UNSIGNED))
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=arn, RoleSessionName="sess")
    assert s3_code(e) == (403, "MissingAuthenticationToken")
    expired = standins.issuer.issue("test", lifetime=-1)
    sts = boto3.client("sts", endpoint_url=standins.sts.url, aws_access_key_id=expired.key,
                       aws_secret_access_key=expired.secret, aws_session_token=expired.token,
                       region_name="us-east-1")
    with pytest.raises(ClientError) as e:
        sts.assume_role(RoleArn=arn, RoleSessionName="sess")
    assert s3_code(e) == (400, "ExpiredToken")
    # Role chaining: live issued credentials may assume a role.
    live = standins.issuer.issue("test")
    sts = boto3.client("sts", endpoint_url=standins.sts.url, aws_access_key_id=live.key,
                       aws_secret_access_key=live.secret, aws_session_token=live.token,
                       region_name="us-east-1")
    assert sts.assume_role(RoleArn=arn, RoleSessionName="sess")["Credentials"][
        "AccessKeyId"].startswith("ASIA")


def test_container_refuses_without_the_token(standins, env):
    for headers, status in (({}, 401), ({"Authorization": "wrong"}, 403)):
        req = urllib.request.Request(standins.container.uri, headers=headers)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == status
    # botocore's provider, its retry pause skipped.
    fetcher = botocore.utils.ContainerMetadataFetcher(sleep=lambda s: None)
    for extra in ({}, {"AWS_CONTAINER_AUTHORIZATION_TOKEN": "wrong"}):
        provider = botocore.credentials.ContainerProvider(
            environ={"AWS_CONTAINER_CREDENTIALS_FULL_URI": standins.container.uri, **extra},
            fetcher=fetcher)
        with pytest.raises(CredentialRetrievalError):
            provider.load()


# ---------------------------------------------------------------------------------------
# Refresh, and the command line


def test_short_lived_credentials_are_refreshed(moto_url, env, tmp_path):
    """Container credentials of 6 s, read for 9 s; botocore's refresh windows (15 and 10
    minutes, so every call would refresh) narrowed to 2 and 1 s so that each set is used
    until near its end."""
    log = tmp_path / "refresh.jsonl"
    with aws_standins.Standins(moto_url, str(log), lifetime=6,
                               container_token=CONTAINER_TOKEN) as s:
        env(s.envs(str(tmp_path))["container"])
        session = boto3.Session()
        creds = session.get_credentials()
        creds._advisory_refresh_timeout, creds._mandatory_refresh_timeout = 2, 1
        s3 = client(s, session)
        s3.put_object(Bucket=BUCKET, Key="refresh/obj", Body=b"r" * 1000)
        deadline = time.time() + 9
        reads = 0
        while time.time() < deadline:
            assert s3.get_object(Bucket=BUCKET, Key="refresh/obj")["Body"].read() == b"r" * 1000
            reads += 1
            time.sleep(0.1)
        keys = {e["key"] for e in s.issuer.issues("container")}
        assert len(keys) >= 2, keys
        assert not s.issuer.events("s3_refused")
        used = {k for k, v in s.s3.stats().items() if v["requests"]}
        assert len(used) >= 2 and used <= keys
        assert sum(1 for line in open(log) if json.loads(line)["event"] == "issue") >= 2


@pytest.mark.parametrize("own_moto", [False, True])
def test_command_line(moto_url, tmp_path, own_moto):
    log = tmp_path / "cli.jsonl"
    p = subprocess.Popen(
        [sys.executable, aws_standins.__file__, "--moto-endpoint",
         "start" if own_moto else moto_url, "--log", str(log),
         "--lifetime", "60", "--web-identity-token", WEB_TOKEN, "--container-token",
         CONTAINER_TOKEN, "--static-key", ":".join(STATIC), "--public-bucket", PUBLIC],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(p.stdout.readline())
        for k in ("imds", "container_uri", "sts", "s3"):
            assert info[k].startswith("http://127.0.0.1:")
        assert set(info["env"]) >= {"imds", "container", "container_token_file",
                                    "web_identity", "static", "profile_role",
                                    "profile_process"}
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(info["env"]["profile_process"], HOME=str(tmp_path))
        code = ("import boto3; c = boto3.Session().client('s3');"
                "c.create_bucket(Bucket='cli-bucket'); c.put_object(Bucket='cli-bucket', "
                "Key='k', Body=b'cli'); print(c.get_object(Bucket='cli-bucket', "
                "Key='k')['Body'].read().decode())")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0 and out.stdout == "cli\n", out.stderr
        assert (info["moto"] != moto_url) == own_moto
        assert any(json.loads(line)["source"] == "credential_process"
                   for line in open(log) if '"issue"' in line)
    finally:
        p.stdin.close()
    assert p.wait(10) == 0
