//! `tensorsmith dataset clean` and `dataset verify --stale-after`: staging folders of dead
//! writers reported and removed, live ones kept, folders that are not datasets refused.

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tensorsmith_dataset::{write_dataset, Input, JobOptions, Progress, WriteOptions};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn dataset(dir: &Path) {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let schema = Arc::new(Schema::new(vec![Field::new(
        "x",
        DataType::List(item),
        true,
    )]));
    let mut v = ListBuilder::new(Float32Builder::new());
    for _ in 0..8 {
        v.values().append_value(1.0);
        v.append(true);
    }
    let col: ArrayRef = Arc::new(v.finish());
    let b = RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
    let input = Input::from_batches(schema, vec![b]).unwrap();
    let mut o = WriteOptions::batch(4);
    o.dtype = Some(tensorsmith::dtype::DType::F32);
    write_dataset(&input, dir, &o, &JobOptions::new(), &Progress::default()).unwrap();
}

/// A job staging folder whose marker says its heartbeat stopped `ago`.
fn staging(dir: &Path, job: &str, ago: Duration) {
    let f = dir.join(format!("_tensorsmith_job-{job}"));
    std::fs::create_dir_all(&f).unwrap();
    let ms = (SystemTime::now() - ago)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::fs::write(
        f.join("_tensorsmith_heartbeat.json"),
        format!("{{\"started_ms\": {ms}, \"heartbeat_ms\": {ms}}}"),
    )
    .unwrap();
}

#[test]
fn verify_reports_and_clean_removes_only_stale_staging_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    dataset(dir);
    staging(dir, "dead", Duration::from_secs(2 * 86_400));
    staging(dir, "live", Duration::from_secs(5));
    let d = dir.to_str().unwrap();

    let o = run(&["dataset", "verify", d]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("_tensorsmith_job-dead") && !out.contains("live"),
        "{out}"
    );
    assert_eq!(
        run(&["dataset", "verify", d, "--stale-after", "3d"])
            .status
            .code(),
        Some(0)
    );

    let o = run(&["dataset", "clean", d, "--older-than", "1h"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("1 stale staging folder,"), "{out}");
    // The live writer's folder is left, and the clean says from when it would take it.
    assert!(
        out.contains("kept staging folder ")
            && out.contains("_tensorsmith_job-live (a writer's, idle "),
        "{out}"
    );
    assert!(out.contains(" UTC takes it"), "{out}");
    assert!(!dir.join("_tensorsmith_job-dead").exists());
    assert!(dir.join("_tensorsmith_job-live").exists());
    assert_eq!(run(&["dataset", "verify", d]).status.code(), Some(0));
}

#[test]
fn clean_refuses_a_folder_that_is_not_a_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("keep.txt"), b"x").unwrap();
    let o = run(&["dataset", "clean", tmp.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not a dataset folder"), "{err}");
    assert!(tmp.path().join("keep.txt").exists());
    let o = run(&[
        "dataset",
        "clean",
        tmp.path().to_str().unwrap(),
        "--older-than",
        "5y",
    ]);
    assert_eq!(o.status.code(), Some(2));
}
