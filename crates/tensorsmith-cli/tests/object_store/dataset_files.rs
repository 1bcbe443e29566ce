//! Dataset inputs and comparisons shared by the object-store dataset tests
//! (dataset_s3_cli.rs, dataset_az_gs_cli.rs, dataset_input_s3_cli.rs): an Arrow IPC input of
//! numbered samples and the write arguments they use, the base64 that listings print, shard
//! names and manifests without their uuids.

#![allow(dead_code)]

use arrow_array::builder::{Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use base64::Engine;
use std::path::Path;
use std::sync::Arc;

/// An Arrow IPC file of `rows` samples of 4 f32 (sample `r` all `tag * 100 + r`) and a key
/// column `id` (`k{tag}-{r}`).
pub fn input(path: &Path, tag: u32, rows: u32) {
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
            false,
        ),
        Field::new("id", DataType::Utf8, false),
    ]));
    let mut b = ListBuilder::new(Float32Builder::new());
    let mut k = StringBuilder::new();
    for r in 0..rows {
        for _ in 0..4 {
            b.values().append_value((tag * 100 + r) as f32);
        }
        b.append(true);
        k.append_value(format!("k{tag}-{r}"));
    }
    let cols = vec![Arc::new(b.finish()) as ArrayRef, Arc::new(k.finish())];
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let f = std::fs::File::create(path).unwrap();
    let mut w = arrow_ipc::writer::FileWriter::try_new(f, &schema).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

/// `dataset write INP OUT` of `input`'s files in batches of 4 (`v` as F32, with an index,
/// 2 threads), in `mode`.
pub fn write_args<'a>(inp: &'a Path, out: &'a str, mode: &'a str) -> Vec<&'a str> {
    vec![
        "dataset",
        "write",
        inp.to_str().unwrap(),
        out,
        "--batch-size",
        "4",
        "--columns",
        "v",
        "--dtype",
        "F32",
        "--generate-index",
        "--threads",
        "2",
        "--mode",
        mode,
    ]
}

/// The bytes of base64 text (as the listing scripts print objects).
pub fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .unwrap()
}

/// `part-TTTTT-NNNN-<uuid>.safetensors` without its uuid.
pub fn stem(name: &str) -> String {
    name.splitn(4, '-').take(3).collect::<Vec<_>>().join("-")
}

/// The manifest's JSON with the shard names' uuids taken out.
pub fn manifest_without_names(text: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    for s in v["shards"].as_array_mut().unwrap() {
        let p = s["shard_path"].as_str().unwrap().to_string();
        s["shard_path"] = stem(&p).into();
    }
    v
}
