//! Files tensorsmith did not write, in a dataset folder: a user's own `part-*.safetensors`
//! (never deleted by any verb or mode; mode error and append refuse to write beside them), and
//! a shard that safetensors-spark appended by rewriting `dataset_manifest.json` over a
//! tensorsmith dataset (readers refuse it naming the shard and `dataset adopt`; `clean`
//! refuses; writers and `dataset adopt` make it a version; nothing it lists is dropped). The
//! connector's layout is written by hand as the format spec describes it.

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

/// Four rows of one column `x` (2 f32 each), as an Arrow IPC file.
fn input(path: &Path) {
    let list = DataType::List(Arc::new(Field::new("item", DataType::Float32, true)));
    let schema = Arc::new(Schema::new(vec![Field::new("x", list, false)]));
    let mut x = ListBuilder::new(Float32Builder::new());
    for r in 0..4 {
        x.values().append_slice(&[r as f32, 1.0]);
        x.append(true);
    }
    let batch =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(x.finish()) as ArrayRef]).unwrap();
    let mut w =
        arrow_ipc::writer::FileWriter::try_new(std::fs::File::create(path).unwrap(), &schema)
            .unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

fn write(inp: &str, out: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut a = vec![
        "dataset",
        "write",
        inp,
        out,
        "--batch-size",
        "4",
        "--dtype",
        "F32",
    ];
    a.extend_from_slice(extra);
    run(&a)
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

const USERS: [&str; 3] = [
    "part-0.safetensors",
    "part-00001-of-00002.safetensors",
    "part-00000-0000-mine.safetensors",
];

/// A folder holding only a user's files named like shards.
fn users_folder(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (i, n) in USERS.iter().enumerate() {
        std::fs::write(dir.join(n), format!("the user's file {i}")).unwrap();
    }
}

fn users_files_intact(dir: &Path) {
    for (i, n) in USERS.iter().enumerate() {
        assert_eq!(
            std::fs::read_to_string(dir.join(n)).ok(),
            Some(format!("the user's file {i}")),
            "{n} in {}",
            dir.display()
        );
    }
}

#[test]
fn a_users_shard_named_files_are_refused_or_left_alone_by_every_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let inp = tmp.path().join("in.arrow");
    input(&inp);
    let inp = inp.to_str().unwrap();
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    users_folder(&out);
    for mode in ["error", "append"] {
        let (code, text) = write(inp, o, &["--mode", mode, "--retain", "1000h"]);
        assert_eq!(code, Some(2), "{mode}: {text}");
        assert!(
            text.contains("named like shards")
                && text.contains("part-0.safetensors")
                && text.contains("part-00000-0000-mine.safetensors"),
            "{mode}: {text}"
        );
        users_files_intact(&out);
        assert!(!out.join("dataset_manifest.json").exists());
    }
    // Overwrite writes beside them, and nothing afterwards removes them: not the commit's
    // clean with --retain 0, another overwrite, nor `dataset clean --older-than 0`.
    for _ in 0..2 {
        let (code, text) = write(inp, o, &["--mode", "overwrite", "--retain", "0"]);
        assert_eq!(code, Some(0), "{text}");
        users_files_intact(&out);
    }
    let (code, text) = run(&["dataset", "clean", o, "--older-than", "0"]);
    assert_eq!(code, Some(0), "{text}");
    users_files_intact(&out);
    let (code, text) = run(&["dataset", "info", o]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("4"), "{text}");
    // verify notes them as files it leaves alone; the dataset is sound.
    let (code, text) = run(&["dataset", "verify", o]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("note: part-0.safetensors"), "{text}");
    assert!(
        text.contains("part-0.safetensors") && text.contains("never removed"),
        "{text}"
    );
}

#[test]
fn the_python_style_default_retention_never_deletes_a_users_files_either() {
    // The library call every binding goes through, in overwrite mode into a user's folder.
    let tmp = tempfile::tempdir().unwrap();
    let inp = tmp.path().join("in.arrow");
    input(&inp);
    let out = tmp.path().join("out");
    users_folder(&out);
    let (code, text) = write(
        inp.to_str().unwrap(),
        out.to_str().unwrap(),
        &["--mode", "overwrite"],
    );
    assert_eq!(code, Some(0), "{text}");
    users_files_intact(&out);
}

/// What safetensors-spark does to append: a new shard named `part-{task:05}-{n:04}-{uuid}`,
/// the manifest rewritten over old and new (its own spelling), `_tensor_index.parquet`
/// left as it was. The new shard is a copy of an existing one under the connector's name.
fn connector_append(dir: &Path) -> String {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("dataset_manifest.json")).unwrap()).unwrap();
    let first = m["shards"][0]["shard_path"].as_str().unwrap().to_string();
    let name = "part-00000-0000-550e8400-e29b-41d4-a716-446655440000.safetensors".to_string();
    std::fs::copy(dir.join(&first), dir.join(&name)).unwrap();
    let bytes = std::fs::metadata(dir.join(&name)).unwrap().len();
    let mut shards = m["shards"].as_array().unwrap().clone();
    shards.push(serde_json::json!({"shard_path": name, "samples_count": 4, "bytes": bytes}));
    let total_bytes: u64 = shards.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
    let manifest = serde_json::json!({
        "format_version": "1.0",
        "safetensors_version": "1.0",
        "total_samples": 4 * shards.len() as u64,
        "total_bytes": total_bytes,
        "shards": shards,
        "schema": m["schema"],
    });
    std::fs::write(
        dir.join("dataset_manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    name
}

fn samples_in_manifest(dir: &Path) -> u64 {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("dataset_manifest.json")).unwrap()).unwrap();
    m["total_samples"].as_u64().unwrap()
}

#[test]
fn a_shard_the_connector_appended_is_refused_by_readers_and_never_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let inp = tmp.path().join("in.arrow");
    input(&inp);
    let inp = inp.to_str().unwrap();
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    assert_eq!(write(inp, o, &[]).0, Some(0));
    let theirs = connector_append(&out);

    // Readers: an error naming the shard and the way to adopt it, not 4 of 8 samples.
    let exported = tmp.path().join("e.parquet");
    for args in [
        vec!["dataset", "info", o],
        vec!["dataset", "export", o, exported.to_str().unwrap()],
    ] {
        let (code, text) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {text}");
        assert!(
            text.contains(&theirs) && text.contains("dataset adopt"),
            "{args:?}: {text}"
        );
    }
    // verify reports it with the same way out, and suggests no clean.
    let (code, text) = run(&["dataset", "verify", o]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(&theirs) && text.contains("dataset adopt"),
        "{text}"
    );
    assert!(!text.contains("dataset clean"), "{text}");
    // clean refuses, removing nothing.
    let (code, text) = run(&["dataset", "clean", o, "--older-than", "0"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(out.join(&theirs).exists());
    assert_eq!(samples_in_manifest(&out), 8);

    // An ordinary append adopts it first: 12 samples, the connector's shard listed and kept.
    let (code, text) = write(inp, o, &["--mode", "append"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(samples_in_manifest(&out), 12);
    let m = std::fs::read_to_string(out.join("dataset_manifest.json")).unwrap();
    assert!(m.contains(&theirs), "{m}");
    assert!(out.join(&theirs).exists());
    let (code, text) = run(&["dataset", "verify", o]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(&["dataset", "export", o, exported.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("12 rows"), "{text}");
}

#[test]
fn dataset_adopt_and_verify_repair_make_the_connectors_manifest_a_version() {
    let tmp = tempfile::tempdir().unwrap();
    let inp = tmp.path().join("in.arrow");
    input(&inp);
    let inp = inp.to_str().unwrap();
    for how in ["adopt", "repair"] {
        let out = tmp.path().join(how);
        let o = out.to_str().unwrap();
        assert_eq!(write(inp, o, &["--generate-index"]).0, Some(0));
        let theirs = connector_append(&out);
        let (code, text) = match how {
            "adopt" => run(&["dataset", "adopt", o]),
            _ => run(&["dataset", "verify", "--repair", o]),
        };
        assert_eq!(code, Some(0), "{how}: {text}");
        let (code, text) = run(&["dataset", "info", o]);
        assert_eq!(code, Some(0), "{how}: {text}");
        assert!(text.contains("adopted"), "{how}: {text}");
        assert_eq!(samples_in_manifest(&out), 8);
        // The index now covers the adopted shard too (read from its header).
        let (code, text) = run(&["dataset", "verify", o]);
        assert_eq!(code, Some(0), "{how}: {text}");
        // Retention never takes the adopted shard: it is the current version's.
        let (code, text) = run(&["dataset", "clean", o, "--older-than", "0"]);
        assert_eq!(code, Some(0), "{how}: {text}");
        assert!(out.join(&theirs).exists());
        assert_eq!(run(&["dataset", "adopt", o]).0, Some(0));
    }
}

#[test]
fn adopting_checks_each_new_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let inp = tmp.path().join("in.arrow");
    input(&inp);
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    assert_eq!(write(inp.to_str().unwrap(), o, &[]).0, Some(0));
    let theirs = connector_append(&out);
    // Truncated: its size is not the manifest's.
    let p = out.join(&theirs);
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let (code, text) = run(&["dataset", "adopt", o]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(&theirs) && text.contains("not adopted"),
        "{text}"
    );
    // Gone.
    std::fs::remove_file(&p).unwrap();
    let (code, text) = run(&["dataset", "adopt", o]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains(&theirs), "{text}");
}

#[test]
fn a_connector_written_dataset_keeps_working_and_keeps_its_neighbours() {
    // The connector's layout alone (no _tensorsmith): read as before; clean removes nothing
    // it does not list, not even a stray named like its shards.
    let tmp = tempfile::tempdir().unwrap();
    let inp = tmp.path().join("in.arrow");
    input(&inp);
    let src = tmp.path().join("src");
    assert_eq!(
        write(inp.to_str().unwrap(), src.to_str().unwrap(), &[]).0,
        Some(0)
    );
    let out = tmp.path().join("connector");
    std::fs::create_dir(&out).unwrap();
    let shard = files(&src)
        .into_iter()
        .find(|(n, _)| n.starts_with("part-"))
        .unwrap();
    let name = "part-00000-0000-550e8400-e29b-41d4-a716-446655440000.safetensors";
    std::fs::write(out.join(name), &shard.1).unwrap();
    let manifest = serde_json::json!({
        "format_version": "1.0", "safetensors_version": "1.0",
        "total_samples": 4, "total_bytes": shard.1.len(),
        "shards": [{"shard_path": name, "samples_count": 4, "bytes": shard.1.len()}],
        "schema": {"x": {"dtype": "F32", "shape": [4, 2]}},
    });
    std::fs::write(
        out.join("dataset_manifest.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    std::fs::write(out.join("part-00007-0000-stray.safetensors"), b"not listed").unwrap();
    let o = out.to_str().unwrap();
    assert_eq!(run(&["dataset", "info", o]).0, Some(0));
    let (code, text) = run(&["dataset", "clean", o, "--older-than", "0"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(out.join("part-00007-0000-stray.safetensors").exists());
    assert!(out.join(name).exists());
    // An append adopts the connector's dataset as version 0 and adds to it.
    let (code, text) = write(
        inp.to_str().unwrap(),
        o,
        &["--mode", "append", "--retain", "0"],
    );
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(samples_in_manifest(&out), 8);
    assert!(out.join("part-00007-0000-stray.safetensors").exists());
}
