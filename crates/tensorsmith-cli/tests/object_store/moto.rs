//! A real S3-compatible server for tests: `moto` in server mode, started from the repository's
//! `.venv` (tests/python/requirements.txt installs it; `scripts/test` makes the venv before
//! `cargo test`) on a free port of 127.0.0.1, killed when dropped (and when the test process
//! dies: it exits at the end of its stdin). Objects are made with boto3 in the same venv.

#![allow(dead_code)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's python, which must have moto and boto3.
pub fn python() -> PathBuf {
    let py = repo_root().join(".venv/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import moto.server, boto3"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the S3 tests need moto[server] and boto3 in {}: run `python3 -m venv .venv && \
         .venv/bin/pip install -r tests/python/requirements.txt` in the repository root \
         (scripts/test does)",
        py.display()
    );
    py
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Test credentials moto accepts (it does not check signatures of presigned URLs).
pub const KEY: &str = "AKIAMOTOTESTKEY";
pub const SECRET: &str = "motoTestSecretDoNotPrint/abc123";

pub struct Moto {
    child: Child,
    pub endpoint: String,
}

impl Moto {
    /// A server; `env` adds settings of moto's (`INITIAL_NO_AUTH_ACTION_COUNT`).
    pub fn start_with(env: &[(&str, &str)]) -> Moto {
        let py = python();
        let port = free_port();
        let watcher = "import os, sys, threading\n\
             threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()\n\
             from moto.server import main\n\
             main(['-H', '127.0.0.1', '-p', sys.argv[1]])\n";
        let child = Command::new(py)
            .args(["-c", watcher, &port.to_string()])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let endpoint = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto did not start on {endpoint}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Moto { child, endpoint }
    }

    pub fn start() -> Moto {
        Moto::start_with(&[])
    }

    /// Runs Python with `s3` a boto3 client of this server (credentials [`KEY`], [`SECRET`]).
    pub fn py(&self, code: &str) -> String {
        let prelude = format!(
            "import boto3, sys\n\
             s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='{KEY}', \
             aws_secret_access_key='{SECRET}', region_name='us-east-1')\n",
            self.endpoint
        );
        let o = Command::new(python())
            .args(["-c", &format!("{prelude}{code}")])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "boto3: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn bucket(&self, name: &str) {
        self.py(&format!("s3.create_bucket(Bucket='{name}')"));
    }

    /// Uploads the local file `path` as `key` of `bucket`.
    pub fn put_file(&self, bucket: &str, key: &str, path: &std::path::Path) {
        self.py(&format!(
            "s3.upload_file({:?}, '{bucket}', {key:?})",
            path.to_str().unwrap()
        ));
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.flush();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The CLI with no AWS or Hub settings from the caller's environment, `HOME` at `home`, and
/// the EC2 instance metadata service off (no test asks 169.254.169.254; a test of it points
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT` at a stand-in and removes `AWS_EC2_METADATA_DISABLED`).
pub fn bare_cli(home: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tensorsmith"));
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") || k.starts_with("HF_") {
            c.env_remove(k);
        }
    }
    c.env("HOME", home).env("AWS_EC2_METADATA_DISABLED", "true");
    c
}

/// The CLI with the test credentials and `endpoint` in the environment, nothing else of AWS.
pub fn signed_cli(home: &std::path::Path, endpoint: &str) -> Command {
    let mut c = bare_cli(home);
    c.env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_ENDPOINT_URL", endpoint);
    c
}

pub fn run(mut c: Command, args: &[&str]) -> Output {
    c.args(args).output().unwrap()
}

/// Stdout of a command that must succeed.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr of a command that must fail, showing neither the secret nor a signature.
pub fn err(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!e.contains(SECRET) && !e.contains("X-Amz-Signature"), "{e}");
    e
}
