//! The commands on ONNX models (tests/data/onnx, written by `onnx`; ../shared's mnist):
//! inspect, validate, verify, hash (weight-inspect's golden value), diff and convert, local
//! and over HTTP (external data resolved beside the model's URL); bad input exits 2 naming the
//! file and the rule, and a refused convert writes nothing.

#[path = "../../tensorsmith/tests/support/http_server.rs"]
mod http_server;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};

fn vector(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/onnx")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8(o.stderr).unwrap()
}

#[test]
fn mnist_gives_weight_inspects_golden_hash() {
    let mnist =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/onnx/mnist.onnx");
    if !mnist.exists() {
        eprintln!("skipped: {} is not here", mnist.display());
        return;
    }
    let out = ok(&[
        "hash",
        "--compat",
        "weight-inspect",
        mnist.to_str().unwrap(),
    ]);
    assert!(
        out.starts_with(
            "c83276f54ed2dc74b6c52f8d19da167f5f85f59660a0295e9898f4f0848f9bf8  wi:onnx:3:c83276f5"
        ),
        "{out}"
    );
}

#[test]
fn every_command_reads_an_external_data_model() {
    let m = vector("external/m.onnx");
    let j: serde_json::Value = serde_json::from_str(&ok(&["inspect", "--json", &m])).unwrap();
    assert_eq!(j["format"], "onnx");
    ok(&["validate", &m]);
    ok(&["verify", &m]);
    ok(&["diff", "--values", &m, &vector("raw.onnx")]);
    ok(&[
        "diff",
        "--values",
        &vector("typed.onnx"),
        &vector("raw.onnx"),
    ]);
    assert_eq!(
        ok(&["hash", &m]).split_whitespace().next(),
        ok(&["hash", &vector("raw.onnx")]).split_whitespace().next()
    );
}

#[test]
fn convert_refuses_uint4_for_safetensors_by_name_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.safetensors");
    let err = fails(&["convert", &vector("raw.onnx"), out.to_str().unwrap()]);
    assert!(
        err.contains("raw.onnx") || err.contains("o.safetensors"),
        "{err}"
    );
    assert!(
        err.contains("t_uint") || err.contains("t_complex128"),
        "{err}"
    );
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temp file left"
    );
}

#[test]
fn convert_to_ztensor_and_gguf_keeps_values() {
    let dir = tempfile::tempdir().unwrap();
    // zTensor has no uint4/uint2/float6: refused by name.
    let zt = dir.path().join("o.zt");
    let err = fails(&["convert", &vector("external/m.onnx"), zt.to_str().unwrap()]);
    assert!(err.contains("'t_uint4'") && err.contains("U4"), "{err}");
    let mnist =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/onnx/mnist.onnx");
    if mnist.exists() {
        ok(&["convert", mnist.to_str().unwrap(), zt.to_str().unwrap()]);
        // zTensor v2 keeps the typed metadata (its CBOR integers are unsigned: the same
        // values) and the tensors.
        let d = run(&[
            "diff",
            "--values",
            mnist.to_str().unwrap(),
            zt.to_str().unwrap(),
        ]);
        let out = String::from_utf8_lossy(&d.stdout);
        assert_eq!(d.status.code(), Some(0), "{out}");
        assert!(
            out.contains("same structure and metadata and values"),
            "{out}"
        );
        let g = dir.path().join("o.gguf");
        ok(&[
            "convert",
            mnist.to_str().unwrap(),
            g.to_str().unwrap(),
            "--dtype",
            "F16",
        ]);
        ok(&["inspect", g.to_str().unwrap()]);
    }
}

#[test]
fn random_and_truncated_onnx_files_exit_2_with_an_onnx_error() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.onnx");
    std::fs::write(&junk, (0..=255u8).cycle().take(777).collect::<Vec<_>>()).unwrap();
    let err = fails(&["inspect", junk.to_str().unwrap()]);
    assert!(err.contains("junk.onnx") && err.contains("ONNX"), "{err}");
    assert!(!err.contains("header length"), "{err}");
    let raw = std::fs::read(vector("raw.onnx")).unwrap();
    let cut = dir.path().join("cut.onnx");
    std::fs::write(&cut, &raw[..raw.len() / 2]).unwrap();
    let err = fails(&["inspect", cut.to_str().unwrap()]);
    assert!(
        err.contains("cut.onnx") && err.contains("runs past the end"),
        "{err}"
    );
}

#[test]
fn max_header_size_counts_the_graph_not_the_weights() {
    let m = vector("raw.onnx");
    let err = fails(&["inspect", "--max-header-size", "100", &m]);
    assert!(err.contains("over the limit of 100"), "{err}");
    ok(&["inspect", "--max-header-size", "1000", &m]);
}

#[test]
fn a_folder_of_two_models_is_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    for n in ["a.onnx", "b.onnx"] {
        std::fs::copy(vector("raw.onnx"), dir.path().join(n)).unwrap();
    }
    let err = fails(&["inspect", dir.path().to_str().unwrap()]);
    assert!(err.contains("a.onnx, b.onnx"), "{err}");
}

#[test]
fn external_data_is_read_over_http_beside_the_model() {
    let read = |p: &str| std::fs::read(vector(p)).unwrap();
    let files: HashMap<String, Vec<u8>> = [
        ("/x/m.onnx".to_string(), read("external/m.onnx")),
        ("/x/m.onnx.data".to_string(), read("external/m.onnx.data")),
    ]
    .into_iter()
    .collect();
    let server = http_server::Server::start(files);
    let url = server.url("/x/m.onnx");
    ok(&["diff", "--values", &url, &vector("raw.onnx")]);
    ok(&["verify", &url]);
    assert_eq!(
        ok(&["hash", "--content", &url]),
        ok(&["hash", "--content", &vector("external/m.onnx")])
            .replace(&vector("external/m.onnx"), &url)
    );
}
