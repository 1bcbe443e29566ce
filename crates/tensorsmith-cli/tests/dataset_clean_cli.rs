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

/// One batch of a list column `x`, a row of `n` ones for each `n` of `lengths`.
fn rows(lengths: &[usize]) -> Input {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let schema = Arc::new(Schema::new(vec![Field::new(
        "x",
        DataType::List(item),
        true,
    )]));
    let mut v = ListBuilder::new(Float32Builder::new());
    for &n in lengths {
        for _ in 0..n {
            v.values().append_value(1.0);
        }
        v.append(true);
    }
    let col: ArrayRef = Arc::new(v.finish());
    let b = RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
    Input::from_batches(schema, vec![b]).unwrap()
}

fn dataset(dir: &Path) {
    let input = rows(&[1; 8]);
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

/// A batch of list rows of differing lengths: refused at its second row, after the write
/// has started (its folder and lock made).
fn ragged() -> Input {
    rows(&[2, 1])
}

fn write_ragged(dir: &Path) -> String {
    let mut o = WriteOptions::batch(2);
    o.dtype = Some(tensorsmith::dtype::DType::F32);
    let e = write_dataset(&ragged(), dir, &o, &JobOptions::new(), &Progress::default());
    e.unwrap_err().to_string()
}

#[test]
fn a_refused_first_write_leaves_the_folder_as_it_found_it() {
    let tmp = tempfile::tempdir().unwrap();
    // A folder the write makes is removed again.
    let new = tmp.path().join("new");
    assert!(write_ragged(&new).contains("differs"));
    assert!(!new.exists());
    // A folder that was there stays, as it was (empty, or with the user's files).
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    write_ragged(&mine);
    assert_eq!(std::fs::read_dir(&mine).unwrap().count(), 0);
    std::fs::write(mine.join("notes.txt"), b"x").unwrap();
    write_ragged(&mine);
    let names: Vec<_> = std::fs::read_dir(&mine)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["notes.txt"]);
    // A refused append to a dataset keeps everything of it.
    let ds = tmp.path().join("ds");
    dataset(&ds);
    let mut o = WriteOptions::batch(2);
    o.dtype = Some(tensorsmith::dtype::DType::F32);
    let job = JobOptions::new().with_mode(tensorsmith_dataset::WriteMode::Append);
    assert!(write_dataset(&ragged(), &ds, &o, &job, &Progress::default()).is_err());
    assert!(ds.join("_tensorsmith/lock").exists());
    assert_eq!(
        run(&["dataset", "verify", ds.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn clean_removes_the_lock_a_killed_first_write_left() {
    let tmp = tempfile::tempdir().unwrap();
    let meta = tmp.path().join("_tensorsmith");
    std::fs::create_dir_all(meta.join("jobs")).unwrap();
    std::fs::write(meta.join("lock"), b"").unwrap();
    let o = run(&["dataset", "clean", tmp.path().to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!meta.exists() && tmp.path().exists());
    // Anything else under _tensorsmith/ (another writer's job marks): not touched.
    std::fs::create_dir_all(meta.join("jobs/j1")).unwrap();
    std::fs::write(meta.join("lock"), b"").unwrap();
    let o = run(&["dataset", "clean", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(meta.join("jobs/j1").exists());
}
