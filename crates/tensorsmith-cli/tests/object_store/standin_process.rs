//! A stand-in script of tests/python (aws_standins.py, cloud_identity_standins.py) run from
//! the repository's `.venv`: started with its arguments, its one JSON line read (endpoints,
//! per-source environments, the log's path), stopped when dropped (it exits when its stdin
//! closes, also when the test process dies). Plus what the identity tests share: the log's
//! events and the CLI's output.

#![allow(dead_code)]

use super::moto::{python, repo_root};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

pub struct StandinProcess {
    child: Child,
    /// What the script printed.
    pub info: serde_json::Value,
}

impl StandinProcess {
    /// `tests/python/SCRIPT` with `args`, once it has printed its line.
    pub fn start(script: &str, args: &[&str]) -> StandinProcess {
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/python").join(script))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let info: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{script} printed {line:?}: {e}"));
        StandinProcess { child, info }
    }

    /// The log's events of kind `event` (the log is written as they happen).
    pub fn events(&self, event: &str) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.info["log"].as_str().unwrap()).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == event)
            .collect()
    }
}

impl Drop for StandinProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// A small model the identity tests read and write.
pub fn model() -> String {
    repo_root()
        .join("tests/data/safetensors/dtype_float32.safetensors")
        .to_string_lossy()
        .into_owned()
}

pub fn run(mut c: Command, args: &[&str]) -> Output {
    c.args(args).output().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Stdout of a command that must succeed.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        stderr(o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}
