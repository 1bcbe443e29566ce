//! `convert URL out` of a file replaced on its server during the read: exit 3, an error naming
//! the URL (without credentials) and both versions, and no output file; an unchanged file
//! converts as the local one. The server (`versioned_server.rs`) serves one file in two
//! versions on 127.0.0.1.

#[path = "../../tensorsmith/tests/support/versioned_server.rs"]
mod versioned_server;

use std::path::Path;
use std::process::{Command, Output};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;
use versioned_server::{Options, VersionedServer};

/// 16 tensors of 1 MiB, tensor `i` filled with `i + fill`: past the first read at open, so
/// convert reads them with range requests.
fn model(fill: u8) -> Vec<u8> {
    let mut w = Writer::new();
    for i in 0..16u8 {
        w.add(
            &format!("layer.{i}"),
            DType::U8,
            &[1 << 20],
            vec![i.wrapping_add(fill); 1 << 20],
        )
        .unwrap();
    }
    w.to_bytes().unwrap()
}

fn convert(input: &str, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["convert", input, out.to_str().unwrap()])
        .output()
        .unwrap()
}

/// The open's request, then one read of version 1, then version 2.
fn swapping(preconditions: bool) -> VersionedServer {
    VersionedServer::start(
        model(0),
        model(100),
        Options {
            preconditions,
            swap_after: Some(2),
            ..Options::default()
        },
    )
}

#[test]
fn a_file_swapped_mid_convert_exits_3_and_writes_nothing() {
    // Honoured If-Match (412), then a server that ignores it but sends the new ETag.
    for (preconditions, now) in [(true, "412"), (false, "now \"v2\"")] {
        let server = swapping(preconditions);
        let url = server.url("/m.safetensors");
        let dir = tempfile::tempdir().unwrap();
        let o = convert(&url, &dir.path().join("out.safetensors"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(
            err.contains(&url) && err.contains("changed during the read"),
            "{err}"
        );
        assert!(
            err.contains("ETag was \"v1\" when opened") && err.contains(now),
            "{err}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

#[test]
fn the_error_names_the_url_without_credentials() {
    let server = swapping(false);
    let url = server.url("/m.safetensors");
    let secret = url.replace("http://", "http://user:hunter2@") + "?token=t0ken";
    let dir = tempfile::tempdir().unwrap();
    let o = convert(&secret, &dir.path().join("out.safetensors"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains(&url), "{err}");
    assert!(!err.contains("hunter2") && !err.contains("t0ken"), "{err}");
}

#[test]
fn an_unchanged_file_converts_as_the_local_one() {
    let file = model(0);
    let server = VersionedServer::start(file.clone(), Vec::new(), Options::default());
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.safetensors");
    std::fs::write(&local, &file).unwrap();
    let (a, b) = (
        dir.path().join("a.safetensors"),
        dir.path().join("b.safetensors"),
    );
    let o = convert(&server.url("/m.safetensors"), &a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = convert(local.to_str().unwrap(), &b);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
}
