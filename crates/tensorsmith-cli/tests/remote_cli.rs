//! `tensorsmith inspect URL`: the header is read over HTTP range requests from a local test
//! server, and the report is the one the local file gives.

#[path = "../../tensorsmith/tests/support/http_server.rs"]
mod http_server;

use http_server::Server;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

fn inspect_json(target: &str) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["inspect", "--json", target])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn inspect_of_a_url_matches_inspect_of_the_file() {
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/safetensors/mixed_meta3.safetensors");
    let server = Server::start(HashMap::from([(
        "/m.safetensors".to_string(),
        std::fs::read(&local).unwrap(),
    )]));
    let url = server.url("/m.safetensors");
    let mut remote = inspect_json(&url);
    let mut here = inspect_json(local.to_str().unwrap());
    assert_eq!(remote["file"], url.as_str());
    remote["file"] = serde_json::Value::Null;
    here["file"] = serde_json::Value::Null;
    assert_eq!(remote, here);
    assert_eq!(server.take_requests(), 1);
}

#[test]
fn a_missing_url_is_an_error_naming_it() {
    let server = Server::start(HashMap::new());
    let url = server.url("/nope.safetensors");
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["inspect", &url])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&url) && err.contains("404"), "{err}");
}
