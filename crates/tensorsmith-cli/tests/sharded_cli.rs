//! Sharded checkpoints: `convert --shard-size` writes shards and their index; a folder, an
//! index file or an index URL opens as one model for inspect, hash, diff and convert; index
//! parsing is lenient but safe.

#[path = "../../tensorsmith/tests/support/http_server.rs"]
mod http_server;

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Output};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

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
        "{args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Ten F32 tensors of 1,000,000 bytes each, metadata `format: pt`.
fn model(path: &Path) {
    let mut w = Writer::new();
    for i in 0..10u32 {
        let data: Vec<u8> = (0..250_000u32)
            .flat_map(|j| (i * 1_000_000 + j).to_le_bytes())
            .collect();
        w.add(&format!("layers.{i}.weight"), DType::F32, &[500, 500], data)
            .unwrap();
    }
    w.metadata(BTreeMap::from([("format".to_string(), "pt".to_string())]));
    w.write_file(path).unwrap();
}

#[test]
fn shards_and_index_round_trip_to_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("orig.safetensors");
    model(&original);
    let out_dir = dir.path().join("sharded");
    std::fs::create_dir(&out_dir).unwrap();
    ok(&[
        "convert",
        s(&original),
        s(&out_dir.join("model.safetensors")),
        "--shard-size",
        "3MB",
    ]);

    let mut names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "model-00001-of-00004.safetensors",
            "model-00002-of-00004.safetensors",
            "model-00003-of-00004.safetensors",
            "model-00004-of-00004.safetensors",
            "model.safetensors.index.json"
        ]
    );
    let index_text = std::fs::read_to_string(out_dir.join("model.safetensors.index.json")).unwrap();
    let index: Value = serde_json::from_str(&index_text).unwrap();
    assert_eq!(index["metadata"]["total_size"], 10_000_000);
    assert_eq!(
        index["weight_map"]["layers.0.weight"],
        "model-00001-of-00004.safetensors"
    );
    assert_eq!(
        index["weight_map"]["layers.9.weight"],
        "model-00004-of-00004.safetensors"
    );
    // The index as Hugging Face writes it, plus the write id every shard carries too.
    let id = index["metadata"]["tensorsmith.write_id"].as_str().unwrap();
    assert!(
        index_text.starts_with(&format!(
            "{{\n  \"metadata\": {{\n    \"tensorsmith.write_id\": \"{id}\",\n    \"total_size\": 10000000\n  }},\n  \"weight_map\": {{\n"
        )),
        "{index_text}"
    );

    // The folder, the index file: one model, same IDs as the original file.
    let hash = |t: &str| {
        ok(&["hash", "--content", t])
            .split("  ")
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let want = hash(s(&original));
    assert_eq!(hash(s(&out_dir)), want);
    assert_eq!(hash(s(&out_dir.join("model.safetensors.index.json"))), want);
    assert_eq!(
        run(&["diff", "--values", s(&original), s(&out_dir)])
            .status
            .code(),
        Some(0)
    );

    let v: Value = serde_json::from_str(&ok(&["inspect", "--json", s(&out_dir)])).unwrap();
    assert_eq!(v["tensor_count"], 10);
    assert_eq!(v["shards"].as_array().unwrap().len(), 4);
    let t9 = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "layers.9.weight")
        .unwrap();
    assert_eq!(t9["shard"], "model-00004-of-00004.safetensors");
    assert_eq!(t9["data_offsets"], serde_json::json!([0, 1_000_000]));

    // Back to one file: byte-identical to the original.
    let merged = dir.path().join("merged.safetensors");
    ok(&["convert", s(&out_dir), s(&merged)]);
    assert!(std::fs::read(&merged).unwrap() == std::fs::read(&original).unwrap());
}

#[test]
fn index_parsing_is_lenient_but_safe() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut w = Writer::new();
    w.add("a", DType::U8, &[2], vec![1, 2]).unwrap();
    w.add("stray", DType::U8, &[1], vec![9]).unwrap();
    w.write_file(d.join("s1.safetensors")).unwrap();
    let mut w = Writer::new();
    w.add("b", DType::U8, &[1], vec![3]).unwrap();
    w.write_file(d.join("s2.safetensors")).unwrap();

    // Extra keys, total_size as file sizes, a shard tensor the map does not list: fine.
    let index = d.join("custom.safetensors.index.json");
    std::fs::write(
        &index,
        r#"{"metadata": {"total_size": 12345, "note": "x"}, "producer": "y",
            "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}"#,
    )
    .unwrap();
    let v: Value = serde_json::from_str(&ok(&["inspect", "--json", s(&index)])).unwrap();
    let names: Vec<&str> = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"], "'stray' is not in the weight map");

    for (json, rule) in [
        (
            r#"{"weight_map": {"a": "../s1.safetensors"}}"#,
            "leaves the index's folder",
        ),
        (
            r#"{"weight_map": {"a": "/etc/passwd"}}"#,
            "leaves the index's folder",
        ),
        (
            r#"{"weight_map": {"a": "s2.safetensors"}}"#,
            "does not hold it",
        ),
        (r#"{"metadata": {}}"#, "no \"weight_map\""),
        (r#"{"weight_map": {"a": 1}}"#, "is not a file name"),
        ("not json", "not JSON"),
    ] {
        std::fs::write(&index, json).unwrap();
        let o = run(&["inspect", s(&index)]);
        assert_eq!(o.status.code(), Some(2), "{json}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(rule) && err.contains("custom.safetensors.index.json"),
            "{json}: {err}"
        );
    }

    // A folder without an index: its .safetensors files, all tensors.
    std::fs::remove_file(&index).unwrap();
    let v: Value = serde_json::from_str(&ok(&["inspect", "--json", s(d)])).unwrap();
    assert_eq!(v["tensor_count"], 3);
}

#[test]
fn a_remote_index_reads_the_index_then_each_shard_header() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("orig.safetensors");
    model(&original);
    let out = dir.path().join("model.safetensors");
    ok(&["convert", s(&original), s(&out), "--shard-size", "5MB"]);
    let mut files = HashMap::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("model") {
            files.insert(format!("/repo/{name}"), std::fs::read(e.path()).unwrap());
        }
    }
    let server = http_server::Server::start(files);
    let url = server.url("/repo/model.safetensors.index.json");
    let remote = ok(&["hash", &url]);
    let local = ok(&["hash", s(&original)]);
    assert_eq!(remote.split("  ").next(), local.split("  ").next());
    // The index, then one request per shard (headers fit in the first read).
    assert_eq!(server.take_requests(), 3);
}
