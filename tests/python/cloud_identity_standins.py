"""Stand-ins for the cloud identity services on 127.0.0.1, for the object-store credential
tests (issue #41): they refuse what a real service refuses, so a test passes only when the
client found and used the right identity.

- `Issuer`: hands out random opaque bearer tokens with a short lifetime, each issue logged (in
  process and to a JSON-lines file: source, identity, audience, a fingerprint of the token,
  never the token, and its expiry).
- Azure: the VM metadata service (IMDS) token endpoint, the App Service / Functions managed
  identity endpoint (IDENTITY_ENDPOINT + IDENTITY_HEADER), the Entra ID token endpoint
  (AZURE_AUTHORITY_HOST; client secret and federated client assertion), served over http and
  over https (a self-signed certificate for 127.0.0.1, since azure-identity/MSAL refuse an http
  authority), and a fake `az` CLI.
- GCP: the GCE metadata server (GCE_METADATA_HOST) and an STS token-exchange endpoint (workload
  identity federation).
- Bearer-checking reverse proxies in front of Azurite and fake-gcs-server: a request passes only
  with a token issued here for that cloud and unexpired; the token is stripped and the request
  forwarded (to Azurite anonymously against a public container, or with an account SAS).

Run as a program it prints one JSON line of endpoints and client settings, then serves until
its stdin closes (see `main`). Nothing here talks to 169.254.169.254.
"""

import argparse
import base64
import datetime
import hashlib
import http.client
import http.server
import json
import os
import secrets
import ssl
import stat
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

AZURE_STORAGE_RESOURCE = "https://storage.azure.com"
AZURE_AUDIENCE = "azure-storage"
GCS_AUDIENCE = "gcs"
AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's published development key (not a secret).
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")
# api-versions the IMDS identity endpoint answers (learn.microsoft.com, "IMDS versions").
IMDS_API_VERSIONS = {"2018-02-01", "2018-04-02", "2018-10-01", "2019-02-01", "2019-03-11",
                     "2019-04-30", "2019-06-01", "2019-06-04", "2019-08-01", "2019-08-15",
                     "2019-11-01", "2020-06-01", "2020-07-15", "2020-09-01", "2020-10-01",
                     "2020-12-01", "2021-01-01", "2021-02-01", "2021-03-01", "2021-05-01",
                     "2021-10-01", "2021-11-01", "2021-11-15", "2021-12-13", "2023-07-01",
                     "2023-11-15", "2024-03-15", "2025-04-07"}
GCS_SCOPES = {"https://www.googleapis.com/auth/cloud-platform",
              "https://www.googleapis.com/auth/cloud-platform.read-only",
              "https://www.googleapis.com/auth/devstorage.full_control",
              "https://www.googleapis.com/auth/devstorage.read_only",
              "https://www.googleapis.com/auth/devstorage.read_write"}
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
              "trailer", "trailers", "transfer-encoding", "upgrade", "host", "authorization",
              "expect"}  # the proxy answers Expect: 100-continue itself


def fingerprint(token):
    """What the logs show of a token: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def _now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


class Issuer:
    """Mints and checks bearer tokens. `lifetime` (seconds) applies to every source unless
    `lifetimes` names the source (e.g. {"imds": 310})."""

    def __init__(self, lifetime=15.0, log_path=None, lifetimes=None):
        self.lifetime = float(lifetime)
        self.lifetimes = dict(lifetimes or {})
        self.log_path = log_path
        self.events = []  # every issue and refusal, in order (dicts as logged)
        self._tokens = {}  # token -> record
        self._lock = threading.Lock()

    def log(self, event, **fields):
        rec = {"time": _now_iso(), "event": event, **fields}
        with self._lock:
            self.events.append(rec)
            if self.log_path:
                with open(self.log_path, "a") as f:
                    f.write(json.dumps(rec) + "\n")
        return rec

    def issue(self, source, audience, identity, lifetime=None):
        """A new token for `identity` valid at `audience` for `lifetime` seconds (the source's
        default when None); returns (token, record)."""
        token = secrets.token_urlsafe(32)
        life = float(lifetime if lifetime is not None else
                     self.lifetimes.get(source, self.lifetime))
        rec = {"source": source, "identity": identity, "audience": audience,
               "fingerprint": fingerprint(token), "issued_at": time.time(),
               "expires_at": time.time() + life, "lifetime": life, "requests": 0}
        with self._lock:
            self._tokens[token] = rec
        self.log("issue", source=source, identity=identity, audience=audience,
                 fingerprint=rec["fingerprint"], lifetime=life,
                 expires_at=datetime.datetime.fromtimestamp(
                     rec["expires_at"], datetime.timezone.utc).isoformat(timespec="milliseconds"))
        return token, rec

    def check(self, token, audience):
        """(record, None) when `token` was issued here for `audience` and is unexpired, else
        (record or None, reason) with reason one of "unknown", "expired", "audience"."""
        with self._lock:
            rec = self._tokens.get(token)
        if rec is None:
            return None, "unknown"
        if rec["audience"] != audience:
            return rec, "audience"
        if time.time() >= rec["expires_at"]:
            return rec, "expired"
        return rec, None

    def issues(self, source=None):
        return [e for e in self.events if e["event"] == "issue"
                and (source is None or e["source"] == source)]

    def refusals(self):
        return [e for e in self.events if e["event"] == "refuse"]


class _Handler(http.server.BaseHTTPRequestHandler):
    """Hands each request to the server's `route(handler)`; HTTP/1.1 with keep-alive."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _dispatch(self):
        try:
            self.server.route(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _dispatch

    def body(self):
        """The request body (Content-Length or chunked), read whole."""
        return b"".join(self.body_chunks())

    def body_chunks(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return
                yield self.rfile.read(size)
                self.rfile.readline()
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 16))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk

    def reply(self, status, body=b"", ctype="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def query(self):
        """The query as a dict of first values (keys case as sent)."""
        q = urllib.parse.urlsplit(self.path).query
        return {k: v[0] for k, v in urllib.parse.parse_qs(q, keep_blank_values=True).items()}

    def route_path(self):
        return urllib.parse.urlsplit(self.path).path


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, route, tls=None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.route = route
        self.scheme = "http"
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def origin(self):
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"

    def stop(self):
        self.shutdown()
        self.server_close()


def _self_signed_cert(directory):
    """A key and a self-signed certificate for 127.0.0.1 and localhost in `directory`; returns
    (cert_path, key_path). The certificate is also the CA file a client trusts."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tensorsmith test stand-in")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path = os.path.join(directory, "standin-cert.pem")
    key_path = os.path.join(directory, "standin-key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


# ---------------------------------------------------------------- Azure managed identity


class ManagedIdentities:
    """The identities a machine has: a system-assigned one (unless `system_assigned` is
    False) and one user-assigned identity, selectable by client id, object id or resource id."""

    def __init__(self, system_assigned=True, client_id=None, object_id=None, resource_id=None):
        self.system_assigned = system_assigned
        self.client_id = client_id or str(uuid.uuid4())
        self.object_id = object_id or str(uuid.uuid4())
        self.resource_id = resource_id or (
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/tests/providers/"
            "Microsoft.ManagedIdentity/userAssignedIdentities/tensorsmith-tests")
        self.system_client_id = str(uuid.uuid4())

    def select(self, q, names):
        """The identity label for a token request whose query is `q`, where `names` maps the
        selector parameters the endpoint understands to "client_id"/"object_id"/"resource_id";
        or an error message."""
        given = [(kind, q[p]) for p, kind in names.items() if p in q]
        if len(given) > 1:
            return None, "Multiple identities were specified; specify only one"
        if not given:
            if not self.system_assigned:
                return None, "Identity not found"
            return "system", None
        kind, value = given[0]
        want = {"client_id": self.client_id, "object_id": self.object_id,
                "resource_id": self.resource_id}[kind]
        if value.lower() != want.lower():
            return None, "Identity not found"
        return f"user:{self.client_id}", None


def _resource_audience(resource):
    """The audience a token for `resource` is valid at: Azure Storage for
    https://storage.azure.com[/], else the resource itself (which the proxy refuses)."""
    if resource.rstrip("/") == AZURE_STORAGE_RESOURCE:
        return AZURE_AUDIENCE
    return resource


def _imds_route(issuer, identities):
    """IMDS, GET /metadata/identity/oauth2/token: header `Metadata: true`, no
    X-Forwarded-For, a known api-version, a resource; client_id / object_id / msi_res_id (or
    mi_res_id) choose a user-assigned identity."""

    def refuse(h, status, error, description):
        issuer.log("refuse", source="imds", status=status, error=error, detail=description)
        h.reply(status, {"error": error, "error_description": description})

    def route(h):
        h.body()
        if h.route_path() != "/metadata/identity/oauth2/token":
            return h.reply(404, {"error": "not_found", "error_description": "Unknown path"})
        if h.command != "GET":
            return refuse(h, 405, "invalid_request", "Method not allowed")
        if "X-Forwarded-For" in h.headers:
            return refuse(h, 400, "invalid_request",
                          "Requests with an X-Forwarded-For header are rejected")
        if h.headers.get("Metadata", "").lower() != "true":
            return refuse(h, 400, "invalid_request", "Required metadata header not specified")
        q = h.query()
        if "api-version" not in q:
            return refuse(h, 400, "invalid_request", "Required query variable 'api-version' "
                          "is missing")
        if q["api-version"] not in IMDS_API_VERSIONS:
            return refuse(h, 400, "invalid_request", "Invalid or bad API version")
        if not q.get("resource"):
            return refuse(h, 400, "invalid_request",
                          "Required audience parameter not specified")
        identity, err = identities.select(q, {"client_id": "client_id",
                                              "object_id": "object_id",
                                              "msi_res_id": "resource_id",
                                              "mi_res_id": "resource_id"})
        if err:
            return refuse(h, 400, "invalid_request", err)
        token, rec = issuer.issue("imds", _resource_audience(q["resource"]), identity)
        life = int(rec["lifetime"])
        # IMDS sends every number as a string.
        h.reply(200, {"access_token": token, "client_id": identities.client_id
                      if identity.startswith("user:") else identities.system_client_id,
                      "expires_in": str(life), "expires_on": str(int(rec["expires_at"])),
                      "ext_expires_in": str(life), "not_before": str(int(rec["issued_at"])),
                      "resource": q["resource"], "token_type": "Bearer"})
    return route


def _app_service_route(issuer, identities, identity_header, path):
    """App Service / Functions: GET `path`?api-version=2019-08-01&resource=… with header
    X-IDENTITY-HEADER equal to IDENTITY_HEADER; client_id / object_id / mi_res_id choose a
    user-assigned identity (msi_res_id is IMDS's name and is not understood here)."""

    def refuse(h, status, message):
        issuer.log("refuse", source="app_service", status=status, detail=message)
        h.reply(status, {"statusCode": status, "message": message,
                         "correlationId": str(uuid.uuid4())})

    def route(h):
        h.body()
        if h.route_path() != path:
            return h.reply(404, {"statusCode": 404, "message": "Not found"})
        if h.command != "GET":
            return refuse(h, 405, "Method not allowed")
        got = h.headers.get("X-IDENTITY-HEADER")
        if got is None:
            return refuse(h, 400, "The request is missing the X-IDENTITY-HEADER header")
        if not secrets.compare_digest(got, identity_header):
            return refuse(h, 401, "The X-IDENTITY-HEADER value is not valid")
        q = h.query()
        if q.get("api-version") != "2019-08-01":
            return refuse(h, 400, f"Unsupported api-version {q.get('api-version')!r}; this "
                          "endpoint serves 2019-08-01")
        if not q.get("resource"):
            return refuse(h, 400, "The request is missing the resource parameter")
        identity, err = identities.select(q, {"client_id": "client_id",
                                              "object_id": "object_id",
                                              "mi_res_id": "resource_id"})
        if err:
            return refuse(h, 400, err)
        token, rec = issuer.issue("app_service", _resource_audience(q["resource"]), identity)
        h.reply(200, {"access_token": token, "expires_on": str(int(rec["expires_at"])),
                      "resource": q["resource"], "token_type": "Bearer",
                      "client_id": identities.client_id if identity.startswith("user:")
                      else identities.system_client_id})
    return route


# ---------------------------------------------------------------- Entra ID token endpoint


def _entra_route(issuer, tenant, client_id, client_secret, federated_token):
    """POST /{tenant}/oauth2/v2.0/token (client_credentials, with client_secret or a
    jwt-bearer client_assertion equal to the federated token) and the tenant's OpenID
    configuration, which MSAL reads first. AADSTS-shaped errors."""

    def refuse(h, status, error, code, message):
        issuer.log("refuse", source="entra", status=status, error=error, code=code)
        trace, corr = str(uuid.uuid4()), str(uuid.uuid4())
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
        h.reply(status, {
            "error": error,
            "error_description": f"AADSTS{code}: {message} Trace ID: {trace} Correlation ID: "
                                 f"{corr} Timestamp: {stamp}",
            "error_codes": [code], "timestamp": stamp, "trace_id": trace,
            "correlation_id": corr,
            "error_uri": f"https://login.microsoftonline.com/error?code={code}"})

    def route(h):
        raw = h.body()
        path = h.route_path().strip("/").split("/")
        origin = f"{h.server.scheme}://{h.headers.get('Host')}"
        if len(path) == 4 and path[1:] == ["v2.0", ".well-known", "openid-configuration"]:
            if path[0] != tenant:
                return refuse(h, 400, "invalid_tenant", 90002, f"Tenant '{path[0]}' not found.")
            base = f"{origin}/{tenant}"
            return h.reply(200, {
                "token_endpoint": f"{base}/oauth2/v2.0/token",
                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
                "issuer": f"{base}/v2.0",
                "token_endpoint_auth_methods_supported": [
                    "client_secret_post", "private_key_jwt", "client_secret_basic"],
                "response_types_supported": ["code", "id_token", "code id_token",
                                             "id_token token"],
                "jwks_uri": f"{base}/discovery/v2.0/keys", "tenant_region_scope": "EU"})
        if len(path) != 4 or path[1:] != ["oauth2", "v2.0", "token"]:
            return h.reply(404, {"error": "not_found"})
        if h.command != "POST":
            return refuse(h, 405, "invalid_request", 900561,
                          "The endpoint only accepts POST requests.")
        if path[0] != tenant:
            return refuse(h, 400, "invalid_request", 90002, f"Tenant '{path[0]}' not found. "
                          "Check to make sure you have the correct tenant ID.")
        if not h.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            return refuse(h, 400, "invalid_request", 900144, "The request body must contain "
                          "the following parameter: 'grant_type'.")
        form = {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()}
        if form.get("grant_type") != "client_credentials":
            return refuse(h, 400, "unsupported_grant_type", 70003,
                          "The app requested an unsupported grant type "
                          f"'{form.get('grant_type')}'.")
        scopes = [s for s in form.get("scope", "").split()
                  if s not in ("openid", "profile", "offline_access")]
        if not scopes:
            return refuse(h, 400, "invalid_request", 900144, "The request body must contain "
                          "the following parameter: 'scope'.")
        if len(scopes) != 1 or not scopes[0].endswith("/.default"):
            return refuse(h, 400, "invalid_scope", 1002012, f"The provided value for scope "
                          f"{form.get('scope')} is not valid. Client credential flows must have "
                          "a scope value with /.default suffixed to the resource identifier.")
        if form.get("client_id") != client_id:
            return refuse(h, 400, "unauthorized_client", 700016,
                          f"Application with identifier '{form.get('client_id')}' was not "
                          f"found in the directory '{tenant}'.")
        if "client_assertion" in form:
            if form.get("client_assertion_type") != JWT_BEARER:
                return refuse(h, 400, "invalid_request", 7000219,
                              "'client_assertion_type' is missing or invalid.")
            if not federated_token or not secrets.compare_digest(
                    form["client_assertion"].strip(), federated_token):
                return refuse(h, 401, "invalid_client", 700213,
                              "No matching federated identity record found for presented "
                              "assertion.")
            source = "workload_identity"
        elif "client_secret" in form:
            if not client_secret or not secrets.compare_digest(form["client_secret"],
                                                                client_secret):
                return refuse(h, 401, "invalid_client", 7000215,
                              "Invalid client secret provided. Ensure the secret being sent in "
                              "the request is the client secret value, not the client secret "
                              f"ID, for a secret added to app '{client_id}'.")
            source = "client_secret"
        else:
            return refuse(h, 401, "invalid_client", 7000218,
                          "The request body must contain the following parameter: "
                          "'client_assertion' or 'client_secret'.")
        resource = scopes[0][:-len("/.default")]
        token, rec = issuer.issue(source, _resource_audience(resource), f"app:{client_id}")
        life = int(rec["lifetime"])
        h.reply(200, {"token_type": "Bearer", "expires_in": life, "ext_expires_in": life,
                      "access_token": token})
    return route


# ---------------------------------------------------------------- fake az CLI

_AZ_SCRIPT = r'''#!{python}
# A stand-in for the Azure CLI made by cloud_identity_standins.py: answers
# `az account get-access-token` with a token from the stand-ins' issuer; nothing else.
import datetime, json, sys, urllib.error, urllib.request
URL = {url!r}
SECRET = {secret!r}
args = sys.argv[1:]
if args[:2] != ["account", "get-access-token"]:
    sys.stderr.write("ERROR: '%s' is misspelled or not recognized by the system.\n"
                     % " ".join(args[:2]))
    sys.exit(2)
opts, i = {{}}, 2
while i < len(args):
    if not args[i].startswith("--") or i + 1 >= len(args):
        sys.stderr.write("ERROR: unrecognized arguments: %s\n" % args[i])
        sys.exit(2)
    opts[args[i]] = args[i + 1]
    i += 2
if opts.get("--output", "json") != "json":
    sys.stderr.write("ERROR: this stand-in writes only --output json\n")
    sys.exit(2)
resource = opts.get("--resource")
if "--scope" in opts:
    if resource:
        sys.stderr.write("ERROR: usage error: --resource/--resource-type/--scope are "
                         "mutually exclusive\n")
        sys.exit(2)
    resource = opts["--scope"][:-len("/.default")] if opts["--scope"].endswith("/.default") \
        else opts["--scope"]
req = urllib.request.Request(URL, data=json.dumps(
    {{"resource": resource or "https://management.core.windows.net/",
     "tenant": opts.get("--tenant")}}).encode(),
    headers={{"X-Standin-Secret": SECRET, "Content-Type": "application/json"}})
try:
    got = json.load(urllib.request.urlopen(req, timeout=30))
except urllib.error.HTTPError as e:
    sys.stderr.write(json.load(e)["stderr"])
    sys.exit(1)
exp = got["expires_on"]
print(json.dumps({{
    "accessToken": got["access_token"],
    "expiresOn": datetime.datetime.fromtimestamp(exp).strftime("%Y-%m-%d %H:%M:%S.%f"),
    "expires_on": exp, "subscription": got["subscription"], "tenant": got["tenant"],
    "tokenType": "Bearer"}}, indent=2))
'''


def _az_control_route(issuer, secret, state):
    """The issuer's side of the fake `az`: POST /az/token with the script's secret."""

    def route(h):
        raw = h.body()
        if h.route_path() != "/az/token" or h.command != "POST":
            return h.reply(404, {"stderr": "not found\n"})
        if not secrets.compare_digest(h.headers.get("X-Standin-Secret", ""), secret):
            return h.reply(403, {"stderr": "ERROR: stand-in secret mismatch\n"})
        req = json.loads(raw)
        if not state["logged_in"]:
            issuer.log("refuse", source="azure_cli", detail="logged out")
            return h.reply(401, {"stderr": "ERROR: Please run 'az login' to setup account.\n"})
        if req.get("tenant") and req["tenant"] != state["tenant"]:
            issuer.log("refuse", source="azure_cli", detail="tenant")
            return h.reply(400, {"stderr": f"ERROR: AADSTS90002: Tenant '{req['tenant']}' "
                                           "not found.\n"})
        token, rec = issuer.issue("azure_cli", _resource_audience(req["resource"]),
                                  f"user:{state['user']}")
        h.reply(200, {"access_token": token, "expires_on": int(rec["expires_at"]),
                      "subscription": state["subscription"], "tenant": state["tenant"]})
    return route


def write_fake_az(directory, control_url, secret):
    """Writes the executable `az` into `directory` (put it first on PATH); returns its path."""
    path = os.path.join(directory, "az")
    with open(path, "w") as f:
        f.write(_AZ_SCRIPT.format(python=sys.executable, url=control_url, secret=secret))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# ---------------------------------------------------------------- GCP


def _gce_metadata_route(issuer, email, project_id, numeric_project_id, scopes):
    """The GCE metadata server: `/` (google-auth's ping) answers with `Metadata-Flavor:
    Google`; everything under /computeMetadata/v1/ needs the request header
    `Metadata-Flavor: Google` and no X-Forwarded-For."""
    flavor = [("Metadata-Flavor", "Google"), ("Server", "Metadata Server for VM")]
    sa = "/computeMetadata/v1/instance/service-accounts/"

    def text(h, status, body, ctype="application/text"):
        h.reply(status, body, ctype, flavor)

    def route(h):
        h.body()
        path = h.route_path()
        q = h.query()
        if path == "/":
            return text(h, 200, "computeMetadata/\n")
        if not path.startswith("/computeMetadata/v1"):
            return text(h, 404, "Not Found\n", "text/html")
        if "X-Forwarded-For" in h.headers:
            issuer.log("refuse", source="gce_metadata", status=403, detail="X-Forwarded-For")
            return text(h, 403, "Request denied: X-Forwarded-For header present\n", "text/html")
        if h.headers.get("Metadata-Flavor") != "Google":
            issuer.log("refuse", source="gce_metadata", status=403, detail="Metadata-Flavor")
            return text(h, 403, "Your client does not have permission to get URL "
                        f"<code>{path}</code> from this server. Missing Metadata-Flavor:Google "
                        "header.\n", "text/html")
        if h.command not in ("GET", "HEAD"):
            return text(h, 405, "Method not allowed\n", "text/html")
        if path in ("/computeMetadata/v1", "/computeMetadata/v1/"):
            return text(h, 200, "instance/\nproject/\nuniverse/\n")
        if path == "/computeMetadata/v1/project/project-id":
            return text(h, 200, project_id)
        if path == "/computeMetadata/v1/project/numeric-project-id":
            return text(h, 200, numeric_project_id)
        if path == "/computeMetadata/v1/universe/universe-domain":
            return text(h, 200, "googleapis.com")
        if path.startswith(sa):
            parts = path[len(sa):].split("/")
            if parts[0] not in ("default", email):
                return text(h, 404, "Not Found\n", "text/html")
            leaf = "/".join(parts[1:])
            if leaf == "":
                if q.get("recursive") == "true":
                    return h.reply(200, {"aliases": ["default"], "email": email,
                                         "scopes": scopes}, "application/json", flavor)
                return text(h, 200, "aliases\nemail\nidentity\nscopes\ntoken\n")
            if leaf == "email":
                return text(h, 200, email)
            if leaf == "scopes":
                return text(h, 200, "".join(s + "\n" for s in scopes))
            if leaf == "aliases":
                return text(h, 200, "default\n")
            if leaf == "token":
                # The server mints tokens for the scopes asked (default: the instance's);
                # one without a Cloud Storage scope is refused by the GCS proxy.
                want = q["scopes"].split(",") if q.get("scopes") else scopes
                audience = GCS_AUDIENCE if set(want) & GCS_SCOPES else "gcp-scopes:" + \
                    ",".join(want)
                token, rec = issuer.issue("gce_metadata", audience, f"sa:{email}")
                return h.reply(200, {"access_token": token,
                                     "expires_in": int(rec["lifetime"]),
                                     "token_type": "Bearer"}, "application/json", flavor)
        if path == sa.rstrip("/") or path == sa:
            return text(h, 200, f"default/\n{email}/\n")
        return text(h, 404, "Not Found\n", "text/html")
    return route


def _sts_route(issuer, subject_token, audience_want):
    """Google STS, POST /v1/token: an RFC 8693 token exchange of `subject_token` (the file
    an external_account credential names) for a GCS access token."""

    def refuse(h, status, error, description):
        issuer.log("refuse", source="sts", status=status, error=error)
        h.reply(status, {"error": error, "error_description": description})

    def route(h):
        raw = h.body()
        if h.route_path() != "/v1/token":
            return h.reply(404, {"error": "not_found"})
        if h.command != "POST":
            return refuse(h, 405, "invalid_request", "Method not allowed")
        ctype = h.headers.get("Content-Type", "")
        if ctype.startswith("application/json"):
            form = json.loads(raw or b"{}")
        else:
            form = {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()}
        if form.get("grant_type") != TOKEN_EXCHANGE:
            return refuse(h, 400, "unsupported_grant_type",
                          f"Unsupported grant type: {form.get('grant_type')}")
        if form.get("requested_token_type") != "urn:ietf:params:oauth:token-type:access_token":
            return refuse(h, 400, "invalid_request", "Invalid requested_token_type")
        if form.get("subject_token_type") not in ("urn:ietf:params:oauth:token-type:jwt",
                                                  "urn:ietf:params:oauth:token-type:id_token"):
            return refuse(h, 400, "invalid_request", "Invalid subject_token_type")
        if form.get("audience") != audience_want:
            return refuse(h, 400, "invalid_target", "The target service indicated by the "
                          "\"audience\" parameters is invalid.")
        if not secrets.compare_digest(form.get("subject_token", "").strip(), subject_token):
            return refuse(h, 400, "invalid_grant", "The subject token is invalid.")
        token, rec = issuer.issue("sts", GCS_AUDIENCE, f"federated:{audience_want}")
        h.reply(200, {"access_token": token, "expires_in": int(rec["lifetime"]),
                      "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                      "token_type": "Bearer"})
    return route


# ---------------------------------------------------------------- bearer-checking proxies


def _azure_refusal(h, issuer, status, code, message, detail, tenant):
    issuer.log("refuse", source="azure_proxy", status=status, code=code, detail=detail)
    rid = str(uuid.uuid4())
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f0Z")
    body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>'
            f'{message}\nRequestId:{rid}\nTime:{stamp}</Message>'
            + (f"<AuthenticationErrorDetail>{detail}</AuthenticationErrorDetail>" if detail
               else "") + "</Error>")
    headers = [("x-ms-error-code", code), ("x-ms-request-id", rid), ("x-ms-version", "2023-11-03")]
    if status == 401:
        challenge = (f"Bearer authorization_uri=https://login.microsoftonline.com/{tenant}/"
                     f"oauth2/authorize resource_id={AZURE_STORAGE_RESOURCE}")
        headers.append(("WWW-Authenticate", challenge))
    _drain_or_close(h)
    h.reply(status, body, "application/xml", headers)


def _gcs_refusal(h, issuer, missing, detail):
    issuer.log("refuse", source="gcs_proxy", status=401, detail=detail)
    _drain_or_close(h)
    path = h.route_path()
    headers = [("WWW-Authenticate", 'Bearer realm="https://accounts.google.com/"'
                + ("" if missing else ', error="invalid_token"'))]
    if path.startswith(("/storage/", "/upload/storage/", "/download/storage/", "/batch/")):
        message = ("Anonymous caller does not have storage.objects.get access to the Google "
                   "Cloud Storage object." if missing else "Invalid Credentials")
        reason = "required" if missing else "authError"
        return h.reply(401, {"error": {"code": 401, "message": message, "errors": [
            {"message": message, "domain": "global", "reason": reason,
             "locationType": "header", "location": "Authorization"}]}},
            "application/json; charset=UTF-8", headers)
    code, message = (("AuthenticationRequired", "Authentication required.") if missing else
                     ("AuthenticationRequired", "Invalid Credentials"))
    h.reply(401, "<?xml version='1.0' encoding='UTF-8'?><Error><Code>" + code + "</Code>"
            "<Message>" + message + "</Message><Details>" + detail + "</Details></Error>",
            "application/xml; charset=UTF-8", headers)


def _drain_or_close(h):
    """Reads a small request body so the connection stays usable; closes after a large one."""
    if int(h.headers.get("Content-Length") or 0) <= (1 << 20) and \
            h.headers.get("Transfer-Encoding", "").lower() != "chunked":
        h.body()
    else:
        h.close_connection = True


class ProxyStats:
    """Per-proxy counters: requests forwarded (in total and per token fingerprint), refused,
    request-body bytes up and response-body bytes down."""

    def __init__(self):
        self.lock = threading.Lock()
        self.forwarded = 0
        self.refused = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.per_token = {}
        self.statuses = {}

    def snapshot(self):
        with self.lock:
            return {"forwarded": self.forwarded, "refused": self.refused,
                    "bytes_up": self.bytes_up, "bytes_down": self.bytes_down,
                    "per_token": dict(self.per_token), "statuses": dict(self.statuses)}


def _proxy_route(issuer, upstream, audience, stats, refuse, extra_query=None):
    """Checks `Authorization: Bearer <token>` (issued here for `audience`, unexpired),
    strips it and forwards the request to `upstream` (an origin), streaming both bodies.
    `refuse(h, kind, detail)` answers a refused request; `extra_query()` returns query text
    to append (an upstream SAS) or None."""
    up = urllib.parse.urlsplit(upstream)

    def route(h):
        auth = h.headers.get("Authorization")
        if auth is None:
            with stats.lock:
                stats.refused += 1
            return refuse(h, "missing", "no Authorization header")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            with stats.lock:
                stats.refused += 1
            return refuse(h, "scheme", f"the {scheme or 'empty'} authorization scheme is not "
                                        "accepted here; only issued bearer tokens are")
        rec, why = issuer.check(token.strip(), audience)
        if why:
            with stats.lock:
                stats.refused += 1
            return refuse(h, why, {"unknown": "the token was not issued by the stand-in issuer",
                                   "expired": "the token is expired",
                                   "audience": f"the token was issued for "
                                               f"{rec and rec['audience']}, not {audience}",
                                   }[why])
        with stats.lock:
            stats.per_token[rec["fingerprint"]] = stats.per_token.get(rec["fingerprint"], 0) + 1
            rec["requests"] += 1
        target = h.path
        extra = extra_query() if extra_query else None
        if extra:
            target += ("&" if "?" in target else "?") + extra
        headers = {}
        for k, v in h.headers.items():
            if k.lower() not in HOP_BY_HOP:
                headers[k] = v
        headers["Host"] = up.netloc
        chunked = h.headers.get("Transfer-Encoding", "").lower() == "chunked"
        has_body = chunked or "Content-Length" in h.headers

        def counted_body():
            for chunk in h.body_chunks():
                with stats.lock:
                    stats.bytes_up += len(chunk)
                yield chunk

        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        try:
            conn.request(h.command, target, body=counted_body() if has_body else None,
                         headers=headers, encode_chunked=chunked)
            resp = conn.getresponse()
        except OSError as e:
            conn.close()
            h.close_connection = True
            return h.reply(502, f"upstream {upstream} failed: {e}\n", "text/plain")
        with stats.lock:
            stats.forwarded += 1
            stats.statuses[resp.status] = stats.statuses.get(resp.status, 0) + 1
        h.send_response_only(resp.status, resp.reason)
        length = resp.getheader("Content-Length")
        no_body = h.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
        for k, v in resp.getheaders():
            if k.lower() in HOP_BY_HOP:
                continue
            if k.lower() == "location":  # keep redirects and upload sessions on the proxy
                v = v.replace(f"{up.scheme}://{up.netloc}", h.server.origin)
            h.send_header(k, v)
        rechunk = not no_body and length is None
        if rechunk:
            h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        try:
            if not no_body:
                while True:
                    chunk = resp.read1(1 << 16) if hasattr(resp, "read1") else resp.read(1 << 16)
                    if not chunk:
                        break
                    with stats.lock:
                        stats.bytes_down += len(chunk)
                    if rechunk:
                        h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    else:
                        h.wfile.write(chunk)
                if rechunk:
                    h.wfile.write(b"0\r\n\r\n")
            else:
                resp.read()
        finally:
            conn.close()
        if resp.getheader("Connection", "").lower() == "close" and length is None and not rechunk:
            h.close_connection = True
    return route


def _azurite_account_sas(blob_endpoint):
    """An account SAS (query text) for Azurite's development account, all permissions, a day."""
    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas
    return generate_account_sas(
        AZURITE_ACCOUNT, AZURITE_KEY,
        resource_types=ResourceTypes(service=True, container=True, object=True),
        permission=AccountSasPermissions(read=True, write=True, delete=True, list=True,
                                         add=True, create=True, update=True, process=True,
                                         tag=True, filter_by_tags=True,
                                         delete_previous_version=True),
        expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1))


def make_public_container(blob_endpoint, name, blobs=None, access="container"):
    """Creates container `name` in Azurite at `blob_endpoint` (…/devstoreaccount1) with public
    access `access` ("container": anonymous list and read; "blob": anonymous read) using the
    development key, and uploads `blobs` ({name: bytes})."""
    from azure.storage.blob import BlobServiceClient
    cs = (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
          f"AccountKey={AZURITE_KEY};BlobEndpoint={blob_endpoint.rstrip('/')};")
    svc = BlobServiceClient.from_connection_string(cs)
    c = svc.get_container_client(name)
    if not c.exists():
        c = svc.create_container(name, public_access=access)
    for k, v in (blobs or {}).items():
        c.upload_blob(k, v, overwrite=True)
    return c


# ---------------------------------------------------------------- all of them


class CloudIdentityStandins:
    """Every stand-in on its own free port of 127.0.0.1; a context manager.

    `azurite_blob_endpoint` (http://127.0.0.1:P/devstoreaccount1) and `fake_gcs_endpoint`
    (http://127.0.0.1:P) are optional; without one its proxy is not started. `azure_upstream`
    is "anonymous" (the container must be public; reads and lists only) or "sas" (an account
    SAS is appended, so writes pass too)."""

    def __init__(self, azurite_blob_endpoint=None, fake_gcs_endpoint=None, log_path=None,
                 lifetime=15.0, lifetimes=None, tenant=None, client_id=None,
                 client_secret=None, federated_token=None, workdir=None,
                 azure_upstream="anonymous", gcp_project="tensorsmith-tests",
                 gcp_email=None, identities=None):
        self.issuer = Issuer(lifetime, log_path, lifetimes)
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="cloud-identity-")
            workdir = self._tmp.name
        self.workdir = workdir
        self.tenant = tenant or str(uuid.uuid4())
        self.client_id = client_id or str(uuid.uuid4())
        self.client_secret = client_secret or secrets.token_urlsafe(24)
        if federated_token is None:
            federated_token = _fake_jwt({"iss": "https://oidc.tests.invalid",
                                         "sub": "system:serviceaccount:tests:tensorsmith",
                                         "aud": "api://AzureADTokenExchange"})
        self.federated_token = federated_token
        self.federated_token_file = os.path.join(workdir, "azure-federated-token")
        _write_private(self.federated_token_file, federated_token)
        self.identities = identities or ManagedIdentities()
        self.identity_header = secrets.token_urlsafe(18)
        self.gcp_project = gcp_project
        self.gcp_email = gcp_email or f"tensorsmith@{gcp_project}.iam.gserviceaccount.com"
        self.gcp_subject_token = _fake_jwt({"iss": "https://oidc.tests.invalid",
                                            "sub": "tensorsmith-ci"})
        self.gcp_subject_token_file = os.path.join(workdir, "gcp-subject-token")
        _write_private(self.gcp_subject_token_file, self.gcp_subject_token)
        self.gcp_sts_audience = ("//iam.googleapis.com/projects/123456789/locations/global/"
                                 "workloadIdentityPools/tests/providers/tensorsmith")
        self.az_state = {"logged_in": True, "tenant": self.tenant,
                         "user": "tester@tests.invalid",
                         "subscription": "00000000-0000-0000-0000-000000000000"}
        self._az_secret = secrets.token_urlsafe(18)
        self.azurite_blob_endpoint = azurite_blob_endpoint
        self.fake_gcs_endpoint = fake_gcs_endpoint
        self.azure_upstream = azure_upstream
        self.azure_proxy_stats = ProxyStats()
        self.gcs_proxy_stats = ProxyStats()
        self.servers = {}
        self.tls_cert = None

    def start(self):
        i = self.issuer
        try:
            self.tls_cert, key = _self_signed_cert(self.workdir)
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(self.tls_cert, key)
            self.servers["imds"] = _Server(_imds_route(i, self.identities))
            self.servers["app_service"] = _Server(_app_service_route(
                i, self.identities, self.identity_header, "/msi/token"))
            entra = _entra_route(i, self.tenant, self.client_id, self.client_secret,
                                 self.federated_token)
            self.servers["entra"] = _Server(entra)
            self.servers["entra_tls"] = _Server(entra, tls)
            self.servers["az_control"] = _Server(_az_control_route(i, self._az_secret,
                                                                   self.az_state))
            self.servers["gce_metadata"] = _Server(_gce_metadata_route(
                i, self.gcp_email, self.gcp_project, "123456789",
                ["https://www.googleapis.com/auth/cloud-platform",
                 "https://www.googleapis.com/auth/devstorage.read_write"]))
            self.servers["sts"] = _Server(_sts_route(i, self.gcp_subject_token,
                                                     self.gcp_sts_audience))
            if self.azurite_blob_endpoint:
                sas = None
                if self.azure_upstream == "sas":
                    sas_text = _azurite_account_sas(self.azurite_blob_endpoint)
                    sas = lambda: sas_text  # noqa: E731
                elif self.azure_upstream != "anonymous":
                    raise ValueError(f"azure_upstream: {self.azure_upstream!r}")
                upstream = urllib.parse.urlsplit(self.azurite_blob_endpoint)
                self.servers["azure_proxy"] = _Server(_proxy_route(
                    i, f"{upstream.scheme}://{upstream.netloc}", AZURE_AUDIENCE,
                    self.azure_proxy_stats,
                    lambda h, kind, detail: self._azure_refuse(h, kind, detail), sas))
            if self.fake_gcs_endpoint:
                self.servers["gcs_proxy"] = _Server(_proxy_route(
                    i, self.fake_gcs_endpoint.rstrip("/"), GCS_AUDIENCE, self.gcs_proxy_stats,
                    lambda h, kind, detail: _gcs_refusal(h, i, kind == "missing", detail)))
            self.az_dir = os.path.join(self.workdir, "az-bin")
            os.makedirs(self.az_dir, exist_ok=True)
            self.az_path = write_fake_az(
                self.az_dir, self.servers["az_control"].origin + "/az/token", self._az_secret)
        except BaseException:
            self.stop()
            raise
        return self

    def _azure_refuse(self, h, kind, detail):
        if kind == "missing":
            return _azure_refusal(h, self.issuer, 401, "NoAuthenticationInformation",
                                  "Server failed to authenticate the request. Please refer to "
                                  "the information in the www-authenticate header.", None,
                                  self.tenant)
        if kind == "scheme":
            return _azure_refusal(h, self.issuer, 403, "AuthenticationFailed",
                                  "Server failed to authenticate the request. Make sure the "
                                  "value of Authorization header is formed correctly including "
                                  "the signature.", detail, self.tenant)
        detail = {"expired": "Lifetime validation failed. The token is expired.",
                  "audience": "Audience validation failed. Audience did not match.",
                  "unknown": "Signature validation failed. Signature verification failed."
                  }[kind]
        return _azure_refusal(h, self.issuer, 401, "InvalidAuthenticationInfo",
                              "Server failed to authenticate the request. Please refer to the "
                              "information in the www-authenticate header.", detail, self.tenant)

    def stop(self):
        for s in self.servers.values():
            s.stop()
        self.servers = {}
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def origin(self, name):
        return self.servers[name].origin

    def describe(self):
        """The endpoints and, per credential source, the environment a client sets (and the
        object_store 0.14 option names), as one JSON-able dict."""
        o = self.origin
        imds_url = o("imds") + "/metadata/identity/oauth2/token"
        app_url = o("app_service") + "/msi/token"
        gce_hostport = o("gce_metadata").split("://", 1)[1]
        d = {
            "log": self.issuer.log_path,
            "lifetime": self.issuer.lifetime,
            "tls_ca_file": self.tls_cert,
            "azure": {
                "tenant_id": self.tenant,
                "client_id": self.client_id,
                "client_secret": self.client_secret,
                "federated_token_file": self.federated_token_file,
                "authority_host": o("entra"),
                "authority_host_https": o("entra_tls"),
                "token_url": f"{o('entra')}/{self.tenant}/oauth2/v2.0/token",
                "imds_token_url": imds_url,
                "app_service_endpoint": app_url,
                "identity_header": self.identity_header,
                "user_assigned": {"client_id": self.identities.client_id,
                                  "object_id": self.identities.object_id,
                                  "msi_res_id": self.identities.resource_id},
                "az_path_dir": self.az_dir,
                "blob_endpoint": (o("azure_proxy") + "/" + AZURITE_ACCOUNT
                                  if "azure_proxy" in self.servers else None),
                "account": AZURITE_ACCOUNT,
                "env": {
                    # Where the data is (object_store: account name, endpoint, http allowed).
                    "storage": ({"AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT,
                                 "AZURE_STORAGE_ENDPOINT": o("azure_proxy") + "/"
                                 + AZURITE_ACCOUNT, "AZURE_ALLOW_HTTP": "true"}
                                if "azure_proxy" in self.servers else {}),
                    # object_store needs AZURE_ALLOW_HTTP=true for an http authority host too
                    # (its token client is https-only otherwise); azure-identity wants https:
                    # authority_host_https with tls_ca_file.
                    "client_secret": {"AZURE_CLIENT_ID": self.client_id,
                                      "AZURE_CLIENT_SECRET": self.client_secret,
                                      "AZURE_TENANT_ID": self.tenant,
                                      "AZURE_AUTHORITY_HOST": o("entra")},
                    "workload_identity": {"AZURE_CLIENT_ID": self.client_id,
                                          "AZURE_TENANT_ID": self.tenant,
                                          "AZURE_FEDERATED_TOKEN_FILE": self.federated_token_file,
                                          "AZURE_AUTHORITY_HOST": o("entra")},
                    # object_store reads AZURE_MSI_ENDPOINT (azure_msi_endpoint); azure-identity
                    # and MSAL read AZURE_POD_IDENTITY_AUTHORITY_HOST (an origin).
                    "imds": {"AZURE_MSI_ENDPOINT": imds_url,
                             "AZURE_POD_IDENTITY_AUTHORITY_HOST": o("imds")},
                    "app_service": {"IDENTITY_ENDPOINT": app_url,
                                    "IDENTITY_HEADER": self.identity_header},
                    "azure_cli": {"PATH_PREPEND": self.az_dir, "AZURE_USE_AZURE_CLI": "true"},
                },
                "object_store_options": {
                    "client_secret": {"azure_client_id": self.client_id,
                                      "azure_client_secret": self.client_secret,
                                      "azure_tenant_id": self.tenant,
                                      "azure_authority_host": o("entra"),
                                      "azure_allow_http": "true"},
                    "workload_identity": {"azure_client_id": self.client_id,
                                          "azure_tenant_id": self.tenant,
                                          "azure_federated_token_file":
                                              self.federated_token_file,
                                          "azure_authority_host": o("entra"),
                                          "azure_allow_http": "true"},
                    "managed_identity": {"azure_msi_endpoint": imds_url},
                    "azure_cli": {"azure_use_azure_cli": "true"},
                },
            },
            "gcp": {
                "metadata_host": gce_hostport,
                "metadata_origin": o("gce_metadata"),
                "email": self.gcp_email,
                "project_id": self.gcp_project,
                "sts_token_url": o("sts") + "/v1/token",
                "sts_audience": self.gcp_sts_audience,
                "subject_token_file": self.gcp_subject_token_file,
                "gcs_endpoint": o("gcs_proxy") if "gcs_proxy" in self.servers else None,
                "env": {
                    # object_store: GOOGLE_BASE_URL (google_base_url); http is allowed there.
                    "storage": ({"GOOGLE_BASE_URL": o("gcs_proxy")}
                                if "gcs_proxy" in self.servers else {}),
                    # GCE_METADATA_IP too: object_store retries the IP (default 169.254.169.254)
                    # after any failure on GCE_METADATA_HOST, and google-auth pings the IP.
                    "gce_metadata": {"GCE_METADATA_HOST": gce_hostport,
                                     "GCE_METADATA_IP": gce_hostport},
                },
            },
        }
        return d

    def external_account_config(self):
        """A google-auth external_account (identity pool, file-sourced) credentials dict
        pointing at the STS stand-in."""
        return {"type": "external_account", "audience": self.gcp_sts_audience,
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": self.origin("sts") + "/v1/token",
                "credential_source": {"file": self.gcp_subject_token_file}}


def _fake_jwt(claims):
    """An unsigned JWT-shaped string: the stand-ins compare it, nobody verifies it."""
    def b64(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    now = int(time.time())
    return ".".join([b64({"alg": "none", "typ": "JWT"}),
                     b64({"iat": now, "exp": now + 86400, "jti": secrets.token_hex(8),
                          **claims}),
                     secrets.token_urlsafe(16)])


def _write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--azurite-blob-endpoint", help="http://127.0.0.1:PORT/devstoreaccount1")
    p.add_argument("--fake-gcs-endpoint", help="http://127.0.0.1:PORT")
    p.add_argument("--log", required=True, help="JSON-lines file of issues and refusals")
    p.add_argument("--lifetime", type=float, default=15.0, help="token lifetime, seconds")
    p.add_argument("--lifetime-for", action="append", default=[], metavar="SOURCE=S",
                   help="a source's own lifetime (imds, app_service, client_secret, "
                        "workload_identity, azure_cli, gce_metadata, sts)")
    p.add_argument("--tenant")
    p.add_argument("--client-id")
    p.add_argument("--client-secret")
    p.add_argument("--federated-token", help="the federated token (the text, not a file)")
    p.add_argument("--azure-upstream", choices=["anonymous", "sas"], default="anonymous")
    p.add_argument("--public-container", action="append", default=[],
                   help="create this container in Azurite with public (container) access")
    p.add_argument("--workdir", help="where token files, the certificate and `az` go")
    a = p.parse_args(argv)
    lifetimes = {}
    for item in a.lifetime_for:
        k, _, v = item.partition("=")
        lifetimes[k] = float(v)
    for name in a.public_container:
        if not a.azurite_blob_endpoint:
            p.error("--public-container needs --azurite-blob-endpoint")
        make_public_container(a.azurite_blob_endpoint, name)
    s = CloudIdentityStandins(a.azurite_blob_endpoint, a.fake_gcs_endpoint, a.log, a.lifetime,
                              lifetimes, a.tenant, a.client_id, a.client_secret,
                              a.federated_token, a.workdir, a.azure_upstream)
    s.start()
    print(json.dumps(s.describe()), flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    s.stop()


if __name__ == "__main__":
    main()
