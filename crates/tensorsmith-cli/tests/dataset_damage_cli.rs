//! `tensorsmith dataset verify` on a dataset with one damaged shard reports that shard once:
//! a damaged first shard must not make a batch dataset look like a KV one, whose other
//! shards would each seem to hold keys already seen.

use arrow_array::builder::{Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use tensorsmith_dataset::{write_dataset, Input, JobOptions, Progress, WriteOptions};

/// A batch dataset of four shards of two samples, with or without its tensor index.
fn dataset(dir: &Path, index: bool) {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let schema = Arc::new(Schema::new(vec![Field::new(
        "x",
        DataType::List(item),
        true,
    )]));
    let mut v = ListBuilder::new(Float32Builder::new());
    for i in 0..8 {
        v.values().append_value(i as f32);
        v.append(true);
    }
    let col: ArrayRef = Arc::new(v.finish());
    let b = RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
    let input = Input::from_batches(schema, vec![b]).unwrap();
    let mut o = WriteOptions::batch(2);
    o.dtype = Some(tensorsmith::dtype::DType::F32);
    o.generate_index = index;
    write_dataset(&input, dir, &o, &JobOptions::new(), &Progress::default()).unwrap();
}

fn shards(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("part-") && n.ends_with(".safetensors"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_damaged_first_shard_is_reported_once() {
    for index in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        dataset(dir, index);
        let names = shards(dir);
        assert_eq!(names.len(), 4, "{names:?}");
        // The header's length prefix overwritten: the shard no longer opens.
        let first = dir.join(&names[0]);
        let mut bytes = std::fs::read(&first).unwrap();
        bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&first, bytes).unwrap();

        let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
            .args(["dataset", "verify", dir.to_str().unwrap()])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{out}{err}");
        let said = format!("{out}{err}");
        assert!(!said.contains("is also in"), "index {index}: {said}");
        let lines = said.lines().filter(|l| l.contains(names[0].as_str()));
        assert_eq!(lines.count(), 1, "{said}");
        for n in &names[1..] {
            assert!(!said.contains(n.as_str()), "index {index}: {said}");
        }
    }
}

/// A KV dataset (keys k0..k7) with its tensor index.
fn kv_dataset(dir: &Path) {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let schema = Arc::new(Schema::new(vec![
        Field::new("x", DataType::List(item), true),
        Field::new("id", DataType::Utf8, false),
    ]));
    let mut v = ListBuilder::new(Float32Builder::new());
    let mut k = StringBuilder::new();
    for i in 0..8 {
        v.values().append_value(i as f32);
        v.append(true);
        k.append_value(format!("k{i}"));
    }
    let cols: Vec<ArrayRef> = vec![Arc::new(v.finish()), Arc::new(k.finish())];
    let b = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let input = Input::from_batches(schema, vec![b]).unwrap();
    let mut o = WriteOptions::kv("id");
    o.dtype = Some(tensorsmith::dtype::DType::F32);
    o.generate_index = true;
    write_dataset(&input, dir, &o, &JobOptions::new(), &Progress::default()).unwrap();
}

#[test]
fn a_damaged_kv_shard_is_reported_once_not_once_per_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    kv_dataset(dir);
    let names = shards(dir);
    assert!(!names.is_empty());
    let shard = dir.join(&names[0]);
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&shard, bytes).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["dataset", "verify", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(1), "{said}");
    let lines = said.lines().filter(|l| l.contains(names[0].as_str()));
    assert_eq!(lines.count(), 1, "{said}");
    assert!(
        !said.contains("is also in") && !said.contains("does not list"),
        "{said}"
    );
}
