"""Stand-ins for the AWS services an SDK gets credentials from, on 127.0.0.1 over plain HTTP,
strict enough that a client passes only with the identity it was meant to find:

- `Issuer`: temporary credentials (`ASIA…` key, secret, session token, lifetime in seconds),
  every issue logged to a JSON-lines file and kept in memory;
- `Imds`: EC2 instance metadata, IMDSv2 only (a GET without a valid token is 401);
- `Container`: ECS / EKS Pod Identity container credentials, `Authorization` checked;
- `Sts`: AssumeRoleWithWebIdentity (one accepted token) and AssumeRole / GetCallerIdentity
  (SigV4-signed with a static key or live issued credentials), STS's XML and errors;
- `S3Proxy`: a reverse proxy in front of moto that verifies SigV4 (header and presigned,
  payload modes signed, UNSIGNED-PAYLOAD and STREAMING-*: for streaming bodies only the seed
  signature) against the issued and allowed keys, and counts requests and bytes per key;
- `Standins`: all of them as a context manager; `python aws_standins.py --moto-endpoint URL
  --log FILE …` starts them, prints one JSON line of endpoints and environments, and serves
  until its stdin closes (so stdin must be a pipe the parent holds open).

Nothing here touches a link-local address."""

import argparse
import base64
import datetime
import hashlib
import hmac
import http.client
import http.server
import json
import os
import secrets
import string
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from xml.sax.saxutils import escape


ACCOUNT = "123456789012"
REGION = "us-east-1"
ROLE_NAME = "tensorsmith-test-role"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{ROLE_NAME}"
STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
MAX_SKEW = 15 * 60
# Request bodies up to this size are read whole to check their signed SHA-256; larger ones
# are streamed to moto unchecked (their header signature is still verified).
HASH_CHECK_LIMIT = 16 << 20
CHUNK = 1 << 20


def iso(t):
    """Epoch seconds as the ISO-8601 Z form the credential services use (no fraction)."""
    return datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def _random(alphabet, n):
    return "".join(secrets.choice(alphabet) for _ in range(n))


class Credentials:
    __slots__ = ("key", "secret", "token", "expires", "source", "role_arn", "issued")

    def __init__(self, key, secret, token, expires, source, role_arn, issued):
        self.key, self.secret, self.token = key, secret, token
        self.expires, self.source, self.role_arn, self.issued = expires, source, role_arn, issued

    @property
    def expiration(self):
        return iso(self.expires)

    def expired(self, now=None):
        return (time.time() if now is None else now) >= self.expires


class Issuer:
    """Hands out temporary credentials and records each issue; `static` maps long-term key
    ids to secrets that are also accepted (with no session token)."""

    def __init__(self, log_path=None, lifetime=900, static=None):
        self.lifetime = lifetime
        self.static = dict(static or {})
        self._log_path = log_path
        self._lock = threading.Lock()
        self._by_key = {}
        self._events = []

    def issue(self, source, role_arn=ROLE_ARN, lifetime=None):
        """Fresh credentials for `source` (a name for the log: "imds", "container", …) that
        expire `lifetime` seconds from now (the issuer's default when None; ≤0: already)."""
        now = time.time()
        life = self.lifetime if lifetime is None else lifetime
        c = Credentials(
            key="ASIA" + _random(string.ascii_uppercase + string.digits, 16),
            secret=_random(string.ascii_letters + string.digits + "+/", 40),
            # Standard base64 with "+", "/" and "=" as real session tokens have, so clients
            # must encode it in presigned URLs.
            token=base64.b64encode(b"standin" + secrets.token_bytes(195)).decode(),
            expires=int(now) + int(life),
            source=source, role_arn=role_arn, issued=now)
        with self._lock:
            self._by_key[c.key] = c
        self.log({"event": "issue", "source": source, "key": c.key, "role_arn": role_arn,
                  "expiration": c.expiration, "lifetime": int(life)})
        return c

    def lookup(self, key):
        """The issued credentials of `key` (expired ones too), or None."""
        with self._lock:
            return self._by_key.get(key)

    def log(self, event):
        event = {"time": round(time.time(), 3), **event}
        with self._lock:
            self._events.append(event)
            if self._log_path:
                with open(self._log_path, "a") as f:
                    f.write(json.dumps(event) + "\n")

    def events(self, event=None, **match):
        """The logged events, those of kind `event` with the fields in `match` when given."""
        with self._lock:
            evs = list(self._events)
        return [e for e in evs if (event is None or e["event"] == event)
                and all(e.get(k) == v for k, v in match.items())]

    def issues(self, source=None):
        return self.events("issue", **({"source": source} if source else {}))


# ---------------------------------------------------------------------------------------
# SigV4 verification


class AuthError(Exception):
    """A refusal: HTTP status, AWS error code, message."""

    def __init__(self, status, code, message, key=None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.key = status, code, message, key
        self.unsigned = False


def _same(a, b):
    """Constant-time equality of two strings (any characters)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogateescape"),
                               b.encode("utf-8", "surrogateescape"))


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def _canonical_query(raw_query, drop=()):
    pairs = []
    for piece in raw_query.split("&"):
        if not piece:
            continue
        k, _, v = piece.partition("=")
        k, v = urllib.parse.unquote(k), urllib.parse.unquote(v)
        if k in drop:
            continue
        pairs.append((urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~")))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _canonical_uri(raw_path, service):
    if service == "s3":
        # S3: the decoded path encoded once, not normalised.
        return urllib.parse.quote(urllib.parse.unquote(raw_path or "/"), safe="/~")
    # Other services encode the (already encoded) path once more.
    return urllib.parse.quote(raw_path or "/", safe="/~")


def _header_value(headers, name):
    values = headers.get_all(name) or []
    return ",".join(" ".join(v.strip().split()) for v in values)


def _parse_amz_date(s):
    try:
        return datetime.datetime.strptime(s, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (TypeError, ValueError):
        raise AuthError(403, "AccessDenied", f"bad X-Amz-Date {s!r}") from None


class SignedRequest:
    """The SigV4 parts of a request (header form or presigned query form)."""

    def __init__(self, method, raw_path, raw_query, headers, service):
        self.method, self.raw_path, self.raw_query = method, raw_path, raw_query
        self.headers, self.service = headers, service
        q = dict(urllib.parse.parse_qsl(raw_query, keep_blank_values=True))
        auth = headers.get("Authorization")
        if "AWSAccessKeyId" in q or (auth or "").startswith("AWS "):
            raise AuthError(400, "InvalidRequest", "SigV2 is not accepted here: sign with "
                            "AWS4-HMAC-SHA256", q.get("AWSAccessKeyId"))
        self.presigned = "X-Amz-Signature" in q
        if self.presigned:
            if q.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
                raise AuthError(400, "AuthorizationQueryParametersError",
                                "X-Amz-Algorithm must be AWS4-HMAC-SHA256")
            credential, signed = q.get("X-Amz-Credential", ""), q.get("X-Amz-SignedHeaders", "")
            self.signature, self.amz_date = q["X-Amz-Signature"], q.get("X-Amz-Date")
            self.token = q.get("X-Amz-Security-Token")
            self.payload_hash = q.get("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
            try:
                self.expires_in = int(q.get("X-Amz-Expires", ""))
            except ValueError:
                raise AuthError(400, "AuthorizationQueryParametersError",
                                "X-Amz-Expires must be a number") from None
        elif auth and auth.startswith("AWS4-HMAC-SHA256 "):
            fields = {}
            for part in auth[len("AWS4-HMAC-SHA256 "):].split(","):
                k, _, v = part.strip().partition("=")
                fields[k] = v
            if not {"Credential", "SignedHeaders", "Signature"} <= fields.keys():
                raise AuthError(400, "AuthorizationHeaderMalformed",
                                "Authorization lacks Credential, SignedHeaders or Signature")
            credential, signed = fields["Credential"], fields["SignedHeaders"]
            self.signature = fields["Signature"]
            self.amz_date = headers.get("X-Amz-Date") or headers.get("Date")
            self.token = headers.get("X-Amz-Security-Token")
            self.payload_hash = headers.get("X-Amz-Content-SHA256")
            if service == "s3" and not self.payload_hash:
                raise AuthError(400, "InvalidRequest", "missing x-amz-content-sha256")
            self.expires_in = None
        elif auth:
            raise AuthError(400, "InvalidArgument", "only AWS4-HMAC-SHA256 is supported")
        else:
            e = AuthError(403, "AccessDenied", "Access Denied (the request is not signed)")
            e.unsigned = True
            raise e
        parts = credential.split("/")
        if len(parts) != 5 or parts[4] != "aws4_request":
            raise AuthError(400, "AuthorizationHeaderMalformed", f"bad credential {credential!r}")
        self.key, self.scope = parts[0], "/".join(parts[1:])
        self.date, self.region, self.scope_service = parts[1], parts[2], parts[3]
        self.signed_headers = signed.split(";") if signed else []
        if "host" not in self.signed_headers:
            raise AuthError(400, "AuthorizationHeaderMalformed", "host is not a signed header")

    def check_time(self, now):
        t = _parse_amz_date(self.amz_date)
        if self.amz_date is None or self.amz_date[:8] != self.date:
            raise AuthError(403, "SignatureDoesNotMatch",
                            "the credential scope date is not the request date", self.key)
        if self.presigned:
            if not 1 <= self.expires_in <= 604800:
                raise AuthError(400, "AuthorizationQueryParametersError",
                                "X-Amz-Expires must be 1..604800", self.key)
            if now > t + self.expires_in:
                raise AuthError(403, "AccessDenied", "Request has expired", self.key)
            if t > now + MAX_SKEW:
                raise AuthError(403, "RequestTimeTooSkewed", "the request date is in the future",
                                self.key)
        elif abs(now - t) > MAX_SKEW:
            raise AuthError(403, "RequestTimeTooSkewed",
                            "the difference between the request time and the current time "
                            "is too large", self.key)

    def string_to_sign(self, payload_hash):
        drop = ("X-Amz-Signature",) if self.presigned else ()
        canon_headers = "".join(f"{h}:{_header_value(self.headers, h)}\n"
                                for h in self.signed_headers)
        canonical = "\n".join([
            self.method, _canonical_uri(self.raw_path, self.service),
            _canonical_query(self.raw_query, drop), canon_headers,
            ";".join(self.signed_headers), payload_hash])
        return "\n".join(["AWS4-HMAC-SHA256", self.amz_date, self.scope,
                          hashlib.sha256(canonical.encode()).hexdigest()])

    def verify(self, secret, payload_hash):
        if self.scope_service != self.service:
            raise AuthError(403, "SignatureDoesNotMatch",
                            f"credential scope names service {self.scope_service!r}, "
                            f"not {self.service!r}", self.key)
        k = _hmac(("AWS4" + secret).encode(), self.date)
        for part in (self.region, self.scope_service, "aws4_request"):
            k = _hmac(k, part)
        want = hmac.new(k, self.string_to_sign(payload_hash).encode(), hashlib.sha256).hexdigest()
        if not _same(want, self.signature):
            raise AuthError(403, "SignatureDoesNotMatch",
                            "The request signature we calculated does not match the signature "
                            "you provided. Check your key and signing method.", self.key)


def authenticate(issuer, req, payload_hash, now=None):
    """The identity (key id, Credentials or None for a static key) that signed `req`, whose
    payload hash is `payload_hash`; AuthError when it is unknown, expired, lacks or mismatches
    its session token, or the signature is wrong."""
    now = time.time() if now is None else now
    req.check_time(now)
    if req.key in issuer.static:
        if req.token:
            raise AuthError(400, "InvalidToken",
                            "a session token was sent with long-term credentials", req.key)
        req.verify(issuer.static[req.key], payload_hash)
        return None
    creds = issuer.lookup(req.key)
    if creds is None:
        raise AuthError(403, "InvalidAccessKeyId",
                        "The AWS Access Key Id you provided does not exist in our records.",
                        req.key)
    if not req.token:
        raise AuthError(403, "InvalidAccessKeyId",
                        "temporary credentials need their session token "
                        "(X-Amz-Security-Token)", req.key)
    if not _same(req.token, creds.token):
        raise AuthError(400, "InvalidToken",
                        "The provided token is malformed or otherwise invalid.", req.key)
    if creds.expired(now):
        raise AuthError(400, "ExpiredToken", "The provided token has expired.", req.key)
    req.verify(creds.secret, payload_hash)
    return creds


# ---------------------------------------------------------------------------------------
# HTTP plumbing


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "aws-standin"
    owner = None  # the stand-in object, set per server class

    def log_message(self, *args):
        pass

    def split(self):
        u = urllib.parse.urlsplit(self.path)
        return u.path, u.query

    def reply(self, status, body=b"", ctype="text/plain", headers=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("x-amz-request-id", uuid.uuid4().hex[:16].upper())
        for k, v in headers:
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self, limit=HASH_CHECK_LIMIT):
        n = int(self.headers.get("Content-Length") or 0)
        if n > limit:
            raise AuthError(400, "EntityTooLarge", "the request body is too large")
        return self.rfile.read(n) if n else b""

    def discard_body(self):
        """Reads away a refused request's body, or closes the connection when it is large or
        chunked, so keep-alive stays in step."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.close_connection = True
            return
        n = int(self.headers.get("Content-Length") or 0)
        if n > CHUNK:
            self.close_connection = True
        elif n:
            self.rfile.read(n)


class _Server:
    """A ThreadingHTTPServer of `handler` on a free port of 127.0.0.1, in a daemon thread."""

    def __init__(self, handler):
        cls = type(handler.__name__, (handler,), {"owner": self})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), cls)  # a free port
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------------
# IMDSv2


class _ImdsHandler(_Handler):
    def do_PUT(self):
        path, _ = self.split()
        self.discard_body()
        if path != "/latest/api/token":
            return self.reply(404, "Not Found")
        if self.headers.get("X-Forwarded-For"):
            return self.reply(403, "Forbidden")
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self.reply(400, "Bad Request")
        token = secrets.token_urlsafe(40)
        self.owner.tokens[token] = time.time() + int(ttl)
        self.reply(200, token, headers=[("X-aws-ec2-metadata-token-ttl-seconds", ttl)])

    def do_GET(self):
        path, _ = self.split()
        token = self.headers.get("X-aws-ec2-metadata-token")
        exp = self.owner.tokens.get(token) if token else None
        if exp is None or exp < time.time():
            self.owner.issuer.log({"event": "imds_refused", "path": path,
                                   "reason": "no token" if token is None else "bad token"})
            return self.reply(401, "Unauthorized")
        o = self.owner
        base = "/latest/meta-data/iam/security-credentials/"
        if path == base:
            return self.reply(200, o.role)
        if path == base + o.role:
            c = o.current()
            return self.reply(200, json.dumps({
                "Code": "Success", "LastUpdated": iso(c.issued), "Type": "AWS-HMAC",
                "AccessKeyId": c.key, "SecretAccessKey": c.secret, "Token": c.token,
                "Expiration": c.expiration}, indent=2))
        if path.startswith(base):
            return self.reply(404, "Not Found")
        path = path.rstrip("/")  # botocore asks for "…/availability-zone/"
        if path == "/latest/meta-data/iam/info":
            return self.reply(200, json.dumps({
                "Code": "Success", "LastUpdated": iso(time.time()),
                "InstanceProfileArn": f"arn:aws:iam::{ACCOUNT}:instance-profile/{o.role}",
                "InstanceProfileId": "AIPA" + "0" * 17}))
        if path == "/latest/meta-data/placement/region":
            return self.reply(200, o.region)
        if path == "/latest/meta-data/placement/availability-zone":
            return self.reply(200, o.region + "a")
        if path == "/latest/dynamic/instance-identity/document":
            return self.reply(200, json.dumps({
                "accountId": ACCOUNT, "region": o.region, "availabilityZone": o.region + "a",
                "instanceId": "i-0123456789abcdef0", "imageId": "ami-0123456789abcdef0",
                "instanceType": "m5.large", "architecture": "x86_64",
                "privateIp": "127.0.0.1", "pendingTime": iso(o.started), "version": "2017-09-30"},
                indent=2), "application/json")
        if path == "/latest/meta-data":
            return self.reply(200, "iam/\nplacement/\n")
        self.reply(404, "Not Found")


class Imds(_Server):
    """IMDSv2: tokens by PUT, then the role's credentials; it serves the same credentials
    until a third of their lifetime is left, then issues new ones (`lifetime`: the issuer's
    when None)."""

    def __init__(self, issuer, role=ROLE_NAME, region=REGION, lifetime=None):
        self.issuer, self.role, self.region, self.lifetime = issuer, role, region, lifetime
        self.tokens, self.started = {}, time.time()
        self._creds, self._lock = None, threading.Lock()
        super().__init__(_ImdsHandler)

    def current(self):
        with self._lock:
            c = self._creds
            if c is None or c.expires - time.time() < (c.expires - c.issued) / 3:
                c = self._creds = self.issuer.issue(
                    "imds", f"arn:aws:iam::{ACCOUNT}:role/{self.role}", self.lifetime)
            return c


# ---------------------------------------------------------------------------------------
# Container credentials (ECS, EKS Pod Identity)


class _ContainerHandler(_Handler):
    def do_GET(self):
        o = self.owner
        path, _ = self.split()
        if path not in (o.path, o.process_path):
            return self.reply(404, json.dumps({"message": "not found"}), "application/json")
        if o.token is not None:
            got = self.headers.get("Authorization")
            if got is None or not _same(got, o.token):
                status = 401 if got is None else 403
                o.issuer.log({"event": "container_refused", "status": status})
                return self.reply(status, json.dumps({
                    "code": "AccessDenied", "message": "Authorization header missing"
                    if got is None else "Authorization header does not match"}),
                    "application/json")
        if path == o.process_path:
            c = o.issuer.issue("credential_process", o.role_arn, o.lifetime)
            body = {"Version": 1, "AccessKeyId": c.key, "SecretAccessKey": c.secret,
                    "SessionToken": c.token, "Expiration": c.expiration}
        else:
            c = o.issuer.issue("container", o.role_arn, o.lifetime)
            body = {"AccessKeyId": c.key, "SecretAccessKey": c.secret, "Token": c.token,
                    "Expiration": c.expiration, "RoleArn": o.role_arn}
        self.reply(200, json.dumps(body), "application/json")


class Container(_Server):
    """Container credentials at `path`, fresh on each GET, when `Authorization` equals
    `token` (any request when `token` is None). `process_path` answers the same way in the
    credential_process JSON shape (for `python aws_standins.py credential-process`)."""

    def __init__(self, issuer, token=None, path="/v2/credentials/tensorsmith",
                 role_arn=ROLE_ARN, lifetime=None):
        self.issuer, self.token, self.path, self.role_arn = issuer, token, path, role_arn
        self.process_path, self.lifetime = "/credential-process", lifetime
        super().__init__(_ContainerHandler)

    @property
    def uri(self):
        return self.url + self.path


# ---------------------------------------------------------------------------------------
# STS


def sts_error(code, message, status, sender=True):
    return status, (
        f'<ErrorResponse xmlns="{STS_NS}">\n  <Error>\n'
        f'    <Type>{"Sender" if sender else "Receiver"}</Type>\n'
        f"    <Code>{code}</Code>\n    <Message>{escape(message)}</Message>\n"
        f"  </Error>\n  <RequestId>{uuid.uuid4()}</RequestId>\n</ErrorResponse>\n")


def _credentials_xml(c):
    return (f"<Credentials><AccessKeyId>{c.key}</AccessKeyId>"
            f"<SecretAccessKey>{escape(c.secret)}</SecretAccessKey>"
            f"<SessionToken>{escape(c.token)}</SessionToken>"
            f"<Expiration>{c.expiration}</Expiration></Credentials>")


def _assumed_user_xml(role_arn, session):
    role = role_arn.rsplit("/", 1)[-1]
    account = role_arn.split(":")[4] if role_arn.count(":") >= 5 else ACCOUNT
    return (f"<AssumedRoleUser><AssumedRoleId>AROA{'0' * 17}:{escape(session)}</AssumedRoleId>"
            f"<Arn>arn:aws:sts::{account}:assumed-role/{escape(role)}/{escape(session)}</Arn>"
            "</AssumedRoleUser>")


class _StsHandler(_Handler):
    def do_GET(self):
        self.handle_sts(b"")

    def do_POST(self):
        try:
            body = self.read_body()
        except AuthError as e:
            self.close_connection = True
            return self.send_sts(*sts_error(e.code, e.message, e.status))
        self.handle_sts(body)

    def send_sts(self, status, xml):
        self.reply(status, xml, "text/xml")

    def handle_sts(self, body):
        o = self.owner
        path, query = self.split()
        params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        ctype = self.headers.get("Content-Type", "")
        if body and "x-www-form-urlencoded" in ctype:
            params.update(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
        action = params.get("Action")
        if action == "AssumeRoleWithWebIdentity":
            out = o.web_identity(params)
        elif action in ("AssumeRole", "GetCallerIdentity"):
            try:
                req = SignedRequest(self.command, path, query, self.headers, "sts")
                # As botocore: a sent x-amz-content-sha256 is the payload hash signed.
                ph = self.headers.get("X-Amz-Content-SHA256") or hashlib.sha256(body).hexdigest()
                creds = authenticate(o.issuer, req, ph)
            except AuthError as e:
                code = "MissingAuthenticationToken" if e.unsigned else e.code
                o.issuer.log({"event": "sts_refused", "action": action, "code": code,
                              "key": e.key})
                return self.send_sts(*sts_error(code, e.message, e.status))
            out = o.assume_role(params, req.key) if action == "AssumeRole" \
                else o.caller_identity(req.key, creds)
        else:
            out = sts_error("InvalidAction", f"Could not find operation {action}", 400)
        self.send_sts(*out)


class Sts(_Server):
    """STS: AssumeRoleWithWebIdentity accepts `web_identity_token` only; AssumeRole and
    GetCallerIdentity need a SigV4 signature (service "sts") by a key the issuer knows.
    Credentials last `lifetime` seconds (the issuer's when None; DurationSeconds is checked
    for range but not used, so tests can have credentials shorter than STS's 15 minutes)."""

    def __init__(self, issuer, web_identity_token=None, lifetime=None):
        self.issuer, self.web_identity_token, self.lifetime = issuer, web_identity_token, lifetime
        super().__init__(_StsHandler)

    @staticmethod
    def _check(params, names):
        for n in names:
            if not params.get(n):
                return sts_error("ValidationError",
                                 f"1 validation error detected: Value null at '{n}' failed "
                                 "to satisfy constraint: Member must not be null", 400)
        d = params.get("DurationSeconds")
        if d is not None and not (d.isdigit() and 900 <= int(d) <= 43200):
            return sts_error("ValidationError", "DurationSeconds must be 900..43200", 400)
        if not params["RoleArn"].startswith("arn:") or ":role/" not in params["RoleArn"]:
            return sts_error("ValidationError", f"{params['RoleArn']} is not a role ARN", 400)
        return None

    def web_identity(self, p):
        bad = self._check(p, ("RoleArn", "RoleSessionName", "WebIdentityToken"))
        if bad:
            return bad
        if self.web_identity_token is None or not _same(p["WebIdentityToken"],
                                                        self.web_identity_token):
            self.issuer.log({"event": "sts_refused", "action": "AssumeRoleWithWebIdentity",
                             "code": "InvalidIdentityToken"})
            return sts_error("InvalidIdentityToken",
                             "The web identity token that was passed could not be validated "
                             "by AWS. Get a new identity token from the identity provider "
                             "and then retry the request.", 400)
        c = self.issuer.issue("web_identity", p["RoleArn"], self.lifetime)
        return 200, (
            f'<AssumeRoleWithWebIdentityResponse xmlns="{STS_NS}">\n'
            "  <AssumeRoleWithWebIdentityResult>"
            "<SubjectFromWebIdentityToken>system:serviceaccount:default:tensorsmith"
            "</SubjectFromWebIdentityToken><Audience>sts.amazonaws.com</Audience>"
            f"{_assumed_user_xml(p['RoleArn'], p['RoleSessionName'])}"
            f"{_credentials_xml(c)}<Provider>127.0.0.1</Provider>"
            "</AssumeRoleWithWebIdentityResult>\n"
            f"  <ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>\n"
            "</AssumeRoleWithWebIdentityResponse>\n")

    def assume_role(self, p, by_key):
        bad = self._check(p, ("RoleArn", "RoleSessionName"))
        if bad:
            return bad
        c = self.issuer.issue("assume_role", p["RoleArn"], self.lifetime)
        self.issuer.log({"event": "assume_role", "by_key": by_key, "key": c.key,
                         "role_arn": p["RoleArn"]})
        return 200, (
            f'<AssumeRoleResponse xmlns="{STS_NS}">\n  <AssumeRoleResult>'
            f"{_assumed_user_xml(p['RoleArn'], p['RoleSessionName'])}{_credentials_xml(c)}"
            "</AssumeRoleResult>\n"
            f"  <ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>\n"
            "</AssumeRoleResponse>\n")

    def caller_identity(self, key, creds):
        arn = (f"arn:aws:iam::{ACCOUNT}:user/static" if creds is None else
               f"arn:aws:sts::{ACCOUNT}:assumed-role/{creds.role_arn.rsplit('/', 1)[-1]}/"
               f"{creds.source}")
        return 200, (
            f'<GetCallerIdentityResponse xmlns="{STS_NS}">\n  <GetCallerIdentityResult>'
            f"<Arn>{escape(arn)}</Arn><UserId>{key}</UserId><Account>{ACCOUNT}</Account>"
            "</GetCallerIdentityResult>\n"
            f"  <ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>\n"
            "</GetCallerIdentityResponse>\n")


# ---------------------------------------------------------------------------------------
# The S3 proxy

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
              "trailer", "upgrade", "expect", "proxy-authorization", "proxy-authenticate"}


def s3_error(code, message, key=None):
    extra = f"<AWSAccessKeyId>{escape(key)}</AWSAccessKeyId>" if key else ""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{escape(message)}</Message>{extra}"
            f"<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId>"
            f"<HostId>standin</HostId></Error>")


class _ProxyHandler(_Handler):
    def do_GET(self):
        self.proxy()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_OPTIONS = do_PATCH = do_GET

    def refuse(self, e):
        self.owner.count(e.key or "-", refused=e.code)
        self.owner.issuer.log({"event": "s3_refused", "method": self.command,
                               "path": self.path.split("?")[0], "status": e.status,
                               "code": e.code, "key": e.key})
        self.discard_body()
        self.reply(e.status, s3_error(e.code, e.message, e.key), "application/xml")

    def proxy(self):
        o = self.owner
        path, query = self.split()
        chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        length = int(self.headers.get("Content-Length") or 0)
        body = None  # read whole when its hash is to be checked
        try:
            signed = bool(self.headers.get("Authorization")) or "Signature=" in query
            bucket = path.lstrip("/").split("/", 1)[0]
            if not signed and bucket in o.public_buckets and self.command in ("GET", "HEAD"):
                key = "anonymous"
            else:
                req = SignedRequest(self.command, path, query, self.headers, "s3")
                ph = req.payload_hash
                if (not req.presigned and len(ph) == 64 and not chunked
                        and length <= HASH_CHECK_LIMIT):
                    body = self.rfile.read(length) if length else b""
                    if hashlib.sha256(body).hexdigest() != ph:
                        authenticate(o.issuer, req, ph)  # a bad signature is reported first
                        raise AuthError(400, "XAmzContentSHA256Mismatch",
                                        "The provided 'x-amz-content-sha256' header does not "
                                        "match what was computed.", req.key)
                authenticate(o.issuer, req, ph)
                key = req.key
        except AuthError as e:
            if body and "Content-Length" in self.headers:
                self.headers.replace_header("Content-Length", "0")  # already read
            return self.refuse(e)
        self.forward(key, body, chunked, length)

    def finish(self):
        super().finish()
        self.owner.drop_upstream(self)

    def forward(self, key, body, chunked, length):
        o = self.owner
        replayable = body is not None or (not chunked and not length)
        for attempt in (0, 1):
            reused = getattr(self, "_upstream", None) is not None
            if not reused:
                self._upstream = http.client.HTTPConnection(o.upstream_host, timeout=300)
            try:
                up, resp = self.send_upstream(self._upstream, body, chunked, length)
                break
            except (OSError, http.client.HTTPException) as e:
                o.drop_upstream(self)
                if reused and replayable and attempt == 0:
                    continue  # moto closed an idle keep-alive connection: once more
                self.close_connection = True
                o.issuer.log({"event": "s3_upstream_error", "error": str(e), "key": key})
                return self.reply(502, s3_error("InternalError", f"moto: {e}"),
                                  "application/xml")
        info = {"event": "s3", "key": key, "method": self.command,
                "path": self.path.split("?")[0], "status": resp.status, "bytes_up": up}

        def done(down):
            o.count(key, up=up, down=down)
            o.issuer.log({**info, "bytes_down": down})
        self.relay(resp, done)

    def send_upstream(self, conn, body, chunked, length):
        """Sends the request to moto (the body streamed from the client unless already read
        as `body`); returns the body bytes sent and moto's response."""
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            if k.lower() not in HOP_BY_HOP:
                conn.putheader(k, v)
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        up = 0
        if body is not None:
            conn.send(body)
            up = len(body)
        elif chunked:
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if not size:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers: not forwarded
                    conn.send(b"0\r\n\r\n")
                    break
                data = self.rfile.read(size)
                self.rfile.readline()
                conn.send(b"%x\r\n%s\r\n" % (size, data))
                up += size
        else:
            left = length
            while left:
                data = self.rfile.read(min(CHUNK, left))
                if not data:
                    raise ConnectionError("the client closed mid-body")
                conn.send(data)
                up += len(data)
                left -= len(data)
        return up, conn.getresponse()

    def relay(self, resp, done):
        """Sends moto's response on; `done(bytes_down)` is called before the last bytes go
        out, so a client that has its answer finds the request counted and logged."""
        self.send_response_only(resp.status, resp.reason)
        clen = resp.getheader("Content-Length")
        for k, v in resp.getheaders():
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        no_body = (self.command == "HEAD" or resp.status in (204, 304) or clen == "0"
                   or 100 <= resp.status < 200)
        rechunk = clen is None and not no_body
        if rechunk:
            self.send_header("Transfer-Encoding", "chunked")
        # (When moto closes its side, only the upstream connection is dropped.)
        down, reported = 0, False
        try:
            if no_body:
                reported = True
                done(0)
                self.end_headers()
                return
            self.end_headers()
            chunk = resp.read1(CHUNK)
            while chunk:
                nxt = resp.read1(CHUNK)
                down += len(chunk)
                if not nxt and not rechunk:
                    reported = True
                    done(down)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if rechunk else chunk)
                chunk = nxt
            if rechunk:
                reported = True
                done(down)
                self.wfile.write(b"0\r\n\r\n")
        finally:
            if not reported:
                done(down)
            resp.close()
            if resp.will_close:
                self.owner.drop_upstream(self)


class S3Proxy(_Server):
    """A SigV4-checking reverse proxy to moto at `upstream` ("http://127.0.0.1:PORT").
    Objects of `public_buckets` may be read (GET, HEAD) unsigned."""

    def __init__(self, issuer, upstream, public_buckets=()):
        self.issuer, self.upstream = issuer, upstream
        self.upstream_host = urllib.parse.urlsplit(upstream).netloc
        self.public_buckets = set(public_buckets)
        self._lock = threading.Lock()
        self._stats = {}
        super().__init__(_ProxyHandler)

    def drop_upstream(self, handler):
        conn = getattr(handler, "_upstream", None)
        if conn is not None:
            conn.close()
            handler._upstream = None

    def count(self, key, up=0, down=0, refused=None):
        with self._lock:
            s = self._stats.setdefault(key, {"requests": 0, "bytes_up": 0, "bytes_down": 0,
                                             "refused": {}})
            if refused:
                s["refused"][refused] = s["refused"].get(refused, 0) + 1
            else:
                s["requests"] += 1
                s["bytes_up"] += up
                s["bytes_down"] += down

    def stats(self):
        """Per key id ("anonymous" for public reads, "-" for refusals with no key):
        forwarded requests, body bytes up (to moto) and down, refusals by code."""
        with self._lock:
            return json.loads(json.dumps(self._stats))

    def totals(self):
        s = self.stats().values()
        return {"requests": sum(v["requests"] for v in s),
                "bytes_up": sum(v["bytes_up"] for v in s),
                "bytes_down": sum(v["bytes_down"] for v in s)}


# ---------------------------------------------------------------------------------------
# All together


class Standins:
    """Issuer, IMDS, container, STS and the S3 proxy in front of moto at `moto_endpoint`;
    a context manager. `lifetime` is every source's credential lifetime in seconds."""

    def __init__(self, moto_endpoint, log=None, lifetime=900, web_identity_token=None,
                 container_token=None, static_keys=None, public_buckets=(), region=REGION):
        self.moto, self.log, self.region = moto_endpoint, log, region
        self.web_identity_token, self.container_token = web_identity_token, container_token
        self.issuer = Issuer(log, lifetime, static_keys)
        self._servers = []
        try:
            self.imds = self._add(Imds(self.issuer, region=region))
            self.container = self._add(Container(self.issuer, container_token))
            self.sts = self._add(Sts(self.issuer, web_identity_token))
            self.s3 = self._add(S3Proxy(self.issuer, moto_endpoint, public_buckets))
        except BaseException:
            self.close()
            raise

    def _add(self, server):
        self._servers.append(server)
        return server

    def close(self):
        for s in self._servers:
            s.close()
        self._servers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def credential_process_command(self):
        """A credential_process command line that prints credentials issued for the source
        "credential_process" (the container token is an argument: a profile's command gets
        no environment of its own)."""
        cmd = [sys.executable, os.path.abspath(__file__), "credential-process",
               self.container.url + self.container.process_path]
        if self.container_token is not None:
            cmd.append(self.container_token)
        return " ".join(_sh_quote(c) for c in cmd)

    def envs(self, token_dir):
        """The environment for each source (AWS_* variables only); token files for web
        identity and the container token file are written into `token_dir`."""
        empty = os.path.join(token_dir, "aws-empty")
        _write(empty, "")
        # Empty config and credentials files keep a real ~/.aws out of it.
        common = {"AWS_ENDPOINT_URL_S3": self.s3.url, "AWS_ENDPOINT_URL_STS": self.sts.url,
                  "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region,
                  "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": empty,
                  "AWS_SHARED_CREDENTIALS_FILE": empty}
        out = {"imds": {**common, "AWS_EC2_METADATA_DISABLED": "false",
                        "AWS_EC2_METADATA_SERVICE_ENDPOINT": self.imds.url,
                        "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv4"},
               "container": {**common, "AWS_CONTAINER_CREDENTIALS_FULL_URI": self.container.uri}}
        if self.container_token is not None:
            out["container"]["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = self.container_token
            f = os.path.join(token_dir, "container-authorization-token")
            _write(f, self.container_token)
            out["container_token_file"] = {
                **common, "AWS_CONTAINER_CREDENTIALS_FULL_URI": self.container.uri,
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": f}
        if self.web_identity_token is not None:
            f = os.path.join(token_dir, "web-identity-token")
            _write(f, self.web_identity_token)
            out["web_identity"] = {**common, "AWS_WEB_IDENTITY_TOKEN_FILE": f,
                                   "AWS_ROLE_ARN": ROLE_ARN,
                                   "AWS_ROLE_SESSION_NAME": "tensorsmith-test"}
        if self.issuer.static:
            k, s = next(iter(self.issuer.static.items()))
            out["static"] = {**common, "AWS_ACCESS_KEY_ID": k, "AWS_SECRET_ACCESS_KEY": s}
        return out

    def write_profiles(self, directory):
        """AWS config and credentials files in `directory` with profiles "source" (the first
        static key), "role" (role_arn + source_profile = source, through this STS), "process"
        (credential_process); returns {"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"}."""
        cfg = os.path.join(directory, "aws-config")
        cred = os.path.join(directory, "aws-credentials")
        lines = [f"[profile role]\nrole_arn = {ROLE_ARN}\nsource_profile = source\n"
                 f"role_session_name = tensorsmith-test\nregion = {self.region}\n"
                 f"services = standins\n",
                 f"[profile process]\ncredential_process = {self.credential_process_command()}\n"
                 f"region = {self.region}\nservices = standins\n",
                 f"[profile source]\nregion = {self.region}\n",
                 f"[services standins]\nsts =\n  endpoint_url = {self.sts.url}\n"
                 f"s3 =\n  endpoint_url = {self.s3.url}\n"]
        _write(cfg, "\n".join(lines))
        creds = ""
        if self.issuer.static:
            k, s = next(iter(self.issuer.static.items()))
            creds = f"[source]\naws_access_key_id = {k}\naws_secret_access_key = {s}\n"
        _write(cred, creds)
        return {"AWS_CONFIG_FILE": cfg, "AWS_SHARED_CREDENTIALS_FILE": cred}

    def describe(self, token_dir):
        envs = self.envs(token_dir)
        if self.issuer.static:
            files = self.write_profiles(token_dir)
            common = {**envs["imds"], "AWS_EC2_METADATA_DISABLED": "true"}
            del common["AWS_EC2_METADATA_SERVICE_ENDPOINT"]
            del common["AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"]
            envs["profile_role"] = {**common, **files, "AWS_PROFILE": "role"}
            envs["profile_process"] = {**common, **files, "AWS_PROFILE": "process"}
        return {"imds": self.imds.url, "container_uri": self.container.uri,
                "credential_process_uri": self.container.url + self.container.process_path,
                "sts": self.sts.url, "s3": self.s3.url, "moto": self.moto, "log": self.log,
                "region": self.region, "role_arn": ROLE_ARN, "role_name": ROLE_NAME,
                "public_buckets": sorted(self.s3.public_buckets), "env": envs}


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _sh_quote(s):
    import shlex
    return shlex.quote(s)


def credential_process(url, token=None):
    """Prints the credential_process JSON fetched from the container stand-in's process
    path; exits non-zero with the reason on stderr when refused."""
    req = urllib.request.Request(url, headers={"Authorization": token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            sys.stdout.write(r.read().decode())
    except Exception as e:  # noqa: BLE001 - any failure is reported the same way
        sys.exit(f"credential-process: {url}: {e}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "credential-process":
        return credential_process(*argv[1:3])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--moto-endpoint", required=True,
                   help='moto\'s URL, or "start" to run moto in this process')
    p.add_argument("--log", required=True, help="JSON-lines log of issues and requests")
    p.add_argument("--lifetime", type=int, default=900, help="credential lifetime, seconds")
    p.add_argument("--web-identity-token")
    p.add_argument("--container-token")
    p.add_argument("--static-key", action="append", default=[], metavar="AK:SK")
    p.add_argument("--public-bucket", action="append", default=[])
    p.add_argument("--region", default=REGION)
    p.add_argument("--token-dir", help="where token and profile files go (default: the "
                   "log's directory)")
    a = p.parse_args(argv)
    static = {}
    for s in a.static_key:
        k, sep, v = s.partition(":")
        if not (sep and k and v):
            p.error(f"--static-key {s!r}: want ACCESS_KEY:SECRET")
        static[k] = v
    log = os.path.abspath(a.log)
    token_dir = os.path.abspath(a.token_dir or os.path.dirname(log))
    moto_url = a.moto_endpoint
    if moto_url == "start":
        import logging

        from moto.server import ThreadedMotoServer
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        moto_url = "http://127.0.0.1:%d" % moto.get_host_and_port()[1]
    with Standins(moto_url, log, a.lifetime, a.web_identity_token, a.container_token,
                  static, a.public_bucket, a.region) as s:
        print(json.dumps(s.describe(token_dir)), flush=True)
        # Serve until the parent closes our stdin (or dies): stdin must be a pipe it holds.
        sys.stdin.read()


if __name__ == "__main__":
    main()
