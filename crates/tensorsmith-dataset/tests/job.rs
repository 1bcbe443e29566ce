//! The job API (write_task per task, then commit_job or abort_job) on real files, and
//! in-memory input (Input::from_batches, Input::from_reader) through write_dataset.

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, RecordBatch, RecordBatchIterator, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::path::Path;

#[path = "support/shards.rs"]
mod shards;
use shards::{shard_contents, shard_files};
use std::sync::Arc;
use tensorsmith::dtype::DType;
use tensorsmith_dataset::{
    abort_job, commit_job, export, export_choosing, export_keys, start_job, verify, write_dataset,
    write_task, Dataset, DatasetError, Duplicates, Input, JobOptions, Manifest, Progress,
    TailStrategy, TaskReport, WriteMode, WriteOptions,
};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
            true,
        ),
        Field::new("id", DataType::Utf8, false),
    ]))
}

/// Row `i` has id `r{i}` and values `base + i*10 + j`, j < 3.
fn batch(rows: impl Iterator<Item = usize> + Clone, base: f32) -> RecordBatch {
    rows_of(rows, base, &[])
}

/// As `batch`, except that the rows in `short` have two values.
fn rows_of(rows: impl Iterator<Item = usize> + Clone, base: f32, short: &[usize]) -> RecordBatch {
    let mut v = ListBuilder::new(Float32Builder::new());
    for i in rows.clone() {
        let n = if short.contains(&i) { 2 } else { 3 };
        for x in &values(i, base)[..n] {
            v.values().append_value(*x);
        }
        v.append(true);
    }
    let ids = StringArray::from(rows.map(|i| format!("r{i}")).collect::<Vec<_>>());
    RecordBatch::try_new(
        schema(),
        vec![Arc::new(v.finish()) as ArrayRef, Arc::new(ids)],
    )
    .unwrap()
}

fn values(i: usize, base: f32) -> [f32; 3] {
    [0, 1, 2].map(|j| base + (i * 10 + j) as f32)
}

fn f32_bytes(v: [f32; 3]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Rows `rows` in memory, in batches of 4 rows (so tasks cut across batches).
fn rows_input(rows: std::ops::Range<usize>, base: f32) -> Input {
    let batches = rows
        .clone()
        .step_by(4)
        .map(|s| batch(s..(s + 4).min(rows.end), base))
        .collect();
    Input::from_batches(schema(), batches).unwrap()
}

fn batch_opts(bs: u64) -> WriteOptions {
    let mut o = WriteOptions::batch(bs);
    o.dtype = Some(DType::F32);
    o.columns = Some(vec!["v".into()]);
    o
}

fn kv_opts() -> WriteOptions {
    let mut o = WriteOptions::kv("id");
    o.dtype = Some(DType::F32);
    o
}

/// Starts job `job` in `dir` unless it runs: the driver's part. Its heartbeat thread is left
/// to itself: it returns at the first renewal after the commit or abort ends the job.
fn started(dir: &Path, job: &str) {
    let beat = dir.join("_tensorsmith/jobs").join(job).join("heartbeat");
    if !beat.exists() {
        std::mem::forget(start_job(dir, job, std::time::Duration::from_secs(1)).unwrap());
    }
}

fn task(dir: &Path, job: &str, t: u64, input: &Input, o: &WriteOptions) -> TaskReport {
    started(dir, job);
    write_task(input, dir, job, t, o, &Progress::default()).unwrap()
}

/// Writes the three tasks of a batch-mode job over rows 0..10, 10..20, 20..27 (in the order
/// 2, 0, 1) and commits them, reports shuffled.
fn three_task_job(dir: &Path, job: &str, o: &WriteOptions, mode: WriteMode) -> Manifest {
    let parts = [(0, 0..10), (1, 10..20), (2, 20..27)];
    let mut reports: Vec<TaskReport> = [2, 0, 1]
        .iter()
        .map(|&i| {
            let (t, rows) = parts[i].clone();
            task(dir, job, t, &rows_input(rows, 0.0), o)
        })
        .collect();
    reports.swap(0, 1);
    commit_job(dir, job, reports, o, mode).unwrap()
}

#[test]
fn three_tasks_in_any_order_commit_to_one_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let m = three_task_job(dir, "job-1", &batch_opts(4), WriteMode::ErrorIfExists);
    // Per task: 4 + 4 + 2 (its tail), 4 + 4 + 2, 4 + 3.
    assert_eq!(m.total_samples, 27);
    let counts: Vec<u64> = m.shards.iter().map(|s| s.samples_count).collect();
    assert_eq!(counts, [4, 4, 2, 4, 4, 2, 4, 3]);
    assert_eq!(m.schema["v"].shape, vec![4, 3]);
    let files = shard_files(dir);
    assert_eq!(files.len(), 8);
    for (f, want) in files.iter().zip([
        "part-00000-0000-",
        "part-00000-0001-",
        "part-00000-0002-",
        "part-00001-0000-",
        "part-00001-0001-",
        "part-00001-0002-",
        "part-00002-0000-",
        "part-00002-0001-",
    ]) {
        assert!(f.starts_with(want), "{f}");
    }
    let ds = Dataset::open(dir).unwrap();
    for i in 0..27u64 {
        let s = ds.sample(i).unwrap();
        assert_eq!(
            s[0].1.data,
            f32_bytes(values(i as usize, 0.0)),
            "sample {i}"
        );
    }
    assert!(verify(dir).unwrap().is_ok());
    assert!(!dir.join("_tensorsmith_job-job-1").exists());
}

#[test]
fn tasks_running_at_once_share_the_staging_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new").join("ds");
    let o = batch_opts(4);
    let reports: Vec<TaskReport> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6u64)
            .map(|t| {
                let (dir, o) = (&dir, &o);
                s.spawn(move || {
                    let rows = t as usize * 5..t as usize * 5 + 5;
                    task(dir, "par", t, &rows_input(rows, 0.0), o)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let m = commit_job(&dir, "par", reports, &o, WriteMode::ErrorIfExists).unwrap();
    assert_eq!(m.total_samples, 30);
    let ds = Dataset::open(&dir).unwrap();
    assert_eq!(ds.sample(29).unwrap()[0].1.data, f32_bytes(values(29, 0.0)));
}

#[test]
fn task_reports_round_trip_as_json_without_tensor_data() {
    let tmp = tempfile::tempdir().unwrap();
    let r = task(tmp.path(), "j", 7, &rows_input(0..9, 0.0), &batch_opts(4));
    assert_eq!(r.task, 7);
    assert_eq!(r.rows, 9);
    assert_eq!(r.shards.len(), 3);
    assert_eq!(r.index.len(), 3);
    assert_eq!(r.samples["v"].shape, vec![3]);
    let json = r.to_json();
    assert!(json.len() < 2000, "{json}");
    assert_eq!(TaskReport::from_json(json.as_bytes()).unwrap(), r);
    let e = TaskReport::from_json(b"{\"task\": 1}").unwrap_err();
    assert!(e.to_string().contains("not a task report"), "{e}");
}

#[test]
fn tail_strategies_apply_to_each_task() {
    for (tail, total, counts) in [
        (TailStrategy::Drop, 20, vec![4, 4, 4, 4, 4]),
        (TailStrategy::Pad, 32, vec![4, 4, 4, 4, 4, 4, 4, 4]),
        (TailStrategy::Write, 27, vec![4, 4, 2, 4, 4, 2, 4, 3]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut o = batch_opts(4);
        o.tail_strategy = tail;
        let m = three_task_job(dir, "tails", &o, WriteMode::ErrorIfExists);
        assert_eq!(m.total_samples, total, "{tail:?}");
        let got: Vec<u64> = m.shards.iter().map(|s| s.samples_count).collect();
        assert_eq!(got, counts, "{tail:?}");
        let ds = Dataset::open(dir).unwrap();
        if tail == TailStrategy::Pad {
            // Task 0's padded tail: rows 8, 9, then two rows of zeros.
            assert_eq!(ds.sample(9).unwrap()[0].1.data, f32_bytes(values(9, 0.0)));
            assert_eq!(ds.sample(10).unwrap()[0].1.data, vec![0u8; 12]);
            assert_eq!(ds.sample(12).unwrap()[0].1.data, f32_bytes(values(10, 0.0)));
        }
        if tail == TailStrategy::Drop {
            // Rows 8, 9 (task 0's tail) are gone: sample 8 is row 10.
            assert_eq!(ds.sample(8).unwrap()[0].1.data, f32_bytes(values(10, 0.0)));
        }
        assert!(verify(dir).unwrap().is_ok(), "{tail:?}");
    }
}

#[test]
fn kv_tasks_commit_with_index_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut o = kv_opts();
    o.generate_index = true;
    let reports = vec![
        task(dir, "kv", 1, &rows_input(5..9, 0.0), &o),
        task(dir, "kv", 0, &rows_input(0..5, 0.0), &o),
        task(dir, "kv", 2, &rows_input(9..12, 0.0), &o),
    ];
    let m = commit_job(dir, "kv", reports, &o, WriteMode::ErrorIfExists).unwrap();
    assert_eq!(m.total_samples, 12);
    assert_eq!(m.schema.len(), 12);
    let files = shard_files(dir);
    assert_eq!(files.len(), 3);
    for (t, f) in files.iter().enumerate() {
        assert!(f.starts_with(&format!("part-{t:05}-0000-")), "{f}");
    }
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(ds.len().unwrap(), 12);
    for i in 0..12 {
        let t = ds.tensor(&format!("r{i}__v")).unwrap();
        assert_eq!((t.dtype, t.shape.clone()), (DType::F32, vec![3]));
        assert_eq!(t.data, f32_bytes(values(i, 0.0)));
    }
    let idx =
        tensorsmith_dataset::tensor_index_file::read(&dir.join("_tensor_index.parquet")).unwrap();
    assert_eq!(idx.len(), 12);
    assert!(verify(dir).unwrap().is_ok());
}

#[test]
fn cross_task_duplicates_fail_names_the_key_and_commits_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = kv_opts();
    let reports = vec![
        task(dir, "dup", 0, &rows_input(0..6, 0.0), &o),
        task(dir, "dup", 1, &rows_input(5..8, 0.0), &o),
    ];
    let e = commit_job(dir, "dup", reports, &o, WriteMode::ErrorIfExists).unwrap_err();
    assert!(matches!(e, DatasetError::DuplicateKeyInTasks { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("'r5__v'") && msg.contains("tasks 0 and 1"),
        "{msg}"
    );
    assert!(!dir.join("dataset_manifest.json").exists());
    assert!(shard_files(dir).is_empty());
    abort_job(dir, "dup").unwrap();
    assert!(!dir.join("_tensorsmith_job-dup").exists());
}

#[test]
fn cross_task_duplicates_last_win_keeps_one_tensor_per_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut o = kv_opts();
    o.duplicates = Duplicates::LastWin;
    o.generate_index = true;
    // Task 0: r0..r9; task 1: r5..r12 (+1000); task 2: r0 (+2000); task 3: r20, lost
    // entirely to task 4's r20 (+4000). Task 0 also repeats r3 within itself (+500 wins).
    let t0 = Input::from_batches(
        schema(),
        vec![batch(0..10, 0.0), batch(std::iter::once(3), 500.0)],
    )
    .unwrap();
    let reports = vec![
        task(dir, "lw", 4, &rows_input(20..21, 4000.0), &o),
        task(dir, "lw", 1, &rows_input(5..13, 1000.0), &o),
        task(dir, "lw", 0, &t0, &o),
        task(dir, "lw", 3, &rows_input(20..21, 0.0), &o),
        task(dir, "lw", 2, &rows_input(0..1, 2000.0), &o),
    ];
    let m = commit_job(dir, "lw", reports, &o, WriteMode::ErrorIfExists).unwrap();
    // r0..r12 and r20: 14 keys, one sample each; task 0 keeps r1..r4, task 3 nothing.
    assert_eq!(m.total_samples, 14);
    let counts: Vec<u64> = m.shards.iter().map(|s| s.samples_count).collect();
    assert_eq!(counts, [4, 8, 1, 1]);
    assert_eq!(m.schema.len(), 14);
    let files = shard_files(dir);
    assert_eq!(files.len(), 4, "{files:?}");
    assert!(
        !files.iter().any(|f| f.starts_with("part-00003-")),
        "{files:?}"
    );
    // Each key in exactly one shard file; shard sizes as the manifest says.
    let mut keys = Vec::new();
    for s in &m.shards {
        let p = dir.join(&s.shard_path);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), s.bytes);
        let f = tensorsmith::safetensors::SafetensorsFile::open(&p).unwrap();
        keys.extend(f.index().tensors.iter().map(|t| t.name.clone()));
    }
    keys.sort();
    let mut want: Vec<String> = (0..13).chain([20]).map(|i| format!("r{i}__v")).collect();
    want.sort();
    assert_eq!(keys, want);
    let ds = Dataset::open(dir).unwrap();
    for (i, base) in [
        (0, 2000.0),
        (1, 0.0),
        (3, 500.0),
        (4, 0.0),
        (5, 1000.0),
        (9, 1000.0),
        (12, 1000.0),
        (20, 4000.0),
    ] {
        let t = ds.tensor(&format!("r{i}__v")).unwrap();
        assert_eq!(t.data, f32_bytes(values(i, base)), "r{i}");
    }
    let idx =
        tensorsmith_dataset::tensor_index_file::read(&dir.join("_tensor_index.parquet")).unwrap();
    assert_eq!(idx.len(), 14);
    let r = verify(dir).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

#[test]
fn abort_removes_the_jobs_shards_and_keeps_the_committed_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = batch_opts(4);
    let before = three_task_job(dir, "first", &o, WriteMode::ErrorIfExists);
    let committed = shard_files(dir);
    let staging = dir.join("_tensorsmith_job-second");
    task(dir, "second", 0, &rows_input(0..9, 100.0), &o);
    task(dir, "second", 1, &rows_input(9..12, 100.0), &o);
    // Each finished shard moved into the folder, under its final name; no version lists it.
    assert_eq!(shard_files(dir).len(), committed.len() + 4);
    assert_eq!(shard_files(&staging).len(), 0);
    assert!(verify(dir).unwrap().is_ok());
    abort_job(dir, "second").unwrap();
    assert!(!staging.exists());
    assert!(!dir.join("_tensorsmith/jobs/second").exists());
    assert_eq!(shard_files(dir), committed);
    // A task of the aborted job writes nothing, and makes no staging folder again.
    let e = write_task(
        &rows_input(0..9, 100.0),
        dir,
        "second",
        2,
        &o,
        &Progress::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("job second is not running there"),
        "{e}"
    );
    assert!(!staging.exists());
    assert_eq!(shard_files(dir), committed);
    assert_eq!(Manifest::read(dir).unwrap(), before);
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(ds.sample(26).unwrap()[0].1.data, f32_bytes(values(26, 0.0)));
    assert!(verify(dir).unwrap().is_ok());
    // Aborting again (or a job that never started) is not an error.
    abort_job(dir, "second").unwrap();
    abort_job(dir, "never").unwrap();
}

#[test]
fn commit_of_a_job_that_ended_or_of_shards_it_did_not_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = batch_opts(4);
    let reports = vec![task(dir, "gone", 0, &rows_input(0..5, 0.0), &o)];
    abort_job(dir, "gone").unwrap();
    let e = commit_job(dir, "gone", reports.clone(), &o, WriteMode::ErrorIfExists).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("job gone is not running there") && msg.contains("_tensorsmith/jobs/gone"),
        "{msg}"
    );
    assert!(!dir.join("dataset_manifest.json").exists());
    // A report naming a shard that is not there (the aborted job's).
    let mut other = task(dir, "other", 0, &rows_input(0..5, 0.0), &o);
    let gone = reports[0].shards[0].shard_path.clone();
    other.shards[0].shard_path = gone.clone();
    let e = commit_job(
        dir,
        "other",
        vec![other.clone()],
        &o,
        WriteMode::ErrorIfExists,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("which the task does not report"),
        "{e}"
    );
    let mut other = task(dir, "other2", 0, &rows_input(0..5, 0.0), &o);
    other.shards[0].shard_path = gone.clone();
    for entry in &mut other.index {
        entry.file_name = gone.as_str().into();
    }
    let e = commit_job(dir, "other2", vec![other], &o, WriteMode::ErrorIfExists).unwrap_err();
    assert!(
        e.to_string().contains(&gone) && e.to_string().contains("nothing was committed"),
        "{e}"
    );
    // A report naming a path outside it.
    let mut evil = task(dir, "evil", 0, &rows_input(0..5, 0.0), &o);
    evil.shards[0].shard_path = "../part-00000-0000-x.safetensors".into();
    let e = commit_job(dir, "evil", vec![evil], &o, WriteMode::ErrorIfExists).unwrap_err();
    assert!(e.to_string().contains("not a shard file name"), "{e}");
    // The same task reported twice.
    let r = task(dir, "twice", 0, &rows_input(0..5, 0.0), &o);
    let e = commit_job(
        dir,
        "twice",
        vec![r.clone(), r],
        &o,
        WriteMode::ErrorIfExists,
    )
    .unwrap_err();
    assert!(e.to_string().contains("reported twice"), "{e}");
    assert!(!dir.join("dataset_manifest.json").exists());
}

#[test]
fn empty_job_is_the_empty_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = batch_opts(4);
    let empty = Input::from_batches(schema(), vec![]).unwrap();
    let r = task(dir, "e", 0, &empty, &o);
    let e = commit_job(dir, "e", vec![r], &o, WriteMode::ErrorIfExists).unwrap_err();
    assert!(matches!(e, DatasetError::Empty(_)), "{e}");
    assert!(e.to_string().contains("no rows"), "{e}");
    let e = commit_job(dir, "e", vec![], &o, WriteMode::ErrorIfExists).unwrap_err();
    assert!(matches!(e, DatasetError::Empty(_)), "{e}");
    let mut o = batch_opts(4);
    o.tail_strategy = TailStrategy::Drop;
    let r = task(dir, "d", 0, &rows_input(0..3, 0.0), &o);
    let e = commit_job(dir, "d", vec![r], &o, WriteMode::ErrorIfExists).unwrap_err();
    assert!(e.to_string().contains("all 3 rows were dropped"), "{e}");
    assert!(!dir.join("dataset_manifest.json").exists());
}

#[test]
fn overwrite_append_and_error_if_exists_through_commit_job() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = batch_opts(4);
    let first = three_task_job(dir, "a", &o, WriteMode::ErrorIfExists);
    // ErrorIfExists, checked at commit time: the tasks ran, the commit refuses.
    let r = task(dir, "b", 0, &rows_input(0..4, 0.0), &o);
    let e = commit_job(dir, "b", vec![r], &o, WriteMode::ErrorIfExists).unwrap_err();
    assert!(matches!(e, DatasetError::Exists(_)), "{e}");
    assert_eq!(Manifest::read(dir).unwrap(), first);
    abort_job(dir, "b").unwrap();
    // Append: the old shards and the new.
    let r = task(dir, "c", 5, &rows_input(100..105, 0.0), &o);
    let m = commit_job(dir, "c", vec![r], &o, WriteMode::Append).unwrap();
    assert_eq!(m.total_samples, 32);
    assert_eq!(m.shards.len(), 10);
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(
        ds.sample(31).unwrap()[0].1.data,
        f32_bytes(values(104, 0.0))
    );
    assert!(verify(dir).unwrap().is_ok());
    // Append with another sample shape is refused.
    let mut o2 = o.clone();
    o2.shapes.insert("v".into(), vec![1, 3]);
    let r = task(dir, "c2", 0, &rows_input(0..4, 0.0), &o2);
    let e = commit_job(dir, "c2", vec![r], &o2, WriteMode::Append).unwrap_err();
    assert!(
        e.to_string()
            .contains("append needs the same dtype and shape"),
        "{e}"
    );
    abort_job(dir, "c2").unwrap();
    // Overwrite: the old shards are retired, not deleted, until a clean past the retention.
    let before = shard_files(dir).len();
    let r = task(dir, "d", 0, &rows_input(50..53, 0.0), &o);
    let m = commit_job(dir, "d", vec![r], &o, WriteMode::Overwrite).unwrap();
    assert_eq!(m.total_samples, 3);
    assert_eq!(shard_files(dir).len(), before + 1);
    tensorsmith_dataset::clean(dir, std::time::Duration::ZERO).unwrap();
    let files = shard_files(dir);
    assert_eq!(files, vec![m.shards[0].shard_path.clone()]);
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(ds.sample(0).unwrap()[0].1.data, f32_bytes(values(50, 0.0)));
    assert!(verify(dir).unwrap().is_ok());
}

#[test]
fn invalid_job_ids_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let o = batch_opts(4);
    let input = rows_input(0..4, 0.0);
    let long = "a".repeat(65);
    for id in ["", "..", "../x", "a/b", "a b", "é", "a.b", long.as_str()] {
        let e = write_task(&input, &dir, id, 0, &o, &Progress::default()).unwrap_err();
        assert!(e.to_string().contains("job id"), "{id}: {e}");
        let e = commit_job(&dir, id, vec![], &o, WriteMode::Overwrite).unwrap_err();
        assert!(e.to_string().contains("job id"), "{id}: {e}");
        let e = abort_job(&dir, id).unwrap_err();
        assert!(e.to_string().contains("job id"), "{id}: {e}");
    }
    assert!(!dir.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    // The longest and widest valid id.
    let ok = format!("{}-_Z9", "a".repeat(60));
    started(&dir, &ok);
    write_task(&input, &dir, &ok, 0, &o, &Progress::default()).unwrap();
    abort_job(&dir, &ok).unwrap();
}

#[test]
fn write_dataset_on_batches_matches_the_same_rows_from_parquet() {
    let tmp = tempfile::tempdir().unwrap();
    // Uneven batches: 7, 4, 13, 1, 12 rows.
    let mut batches = Vec::new();
    let mut at = 0;
    for n in [7, 4, 13, 1, 12] {
        batches.push(batch(at..at + n, 0.0));
        at += n;
    }
    let pq = tmp.path().join("in.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(10))
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&pq).unwrap(),
        schema(),
        Some(props),
    )
    .unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
    for (name, o) in [("batch", batch_opts(5)), ("kv", kv_opts())] {
        for threads in [1, 3] {
            let job = JobOptions::new()
                .with_mode(WriteMode::ErrorIfExists)
                .with_threads(threads);
            let a = tmp.path().join(format!("pq-{name}-{threads}"));
            let b = tmp.path().join(format!("mem-{name}-{threads}"));
            let input = Input::open(&[&pq]).unwrap();
            write_dataset(&input, &a, &o, &job, &Progress::default()).unwrap();
            let input = Input::from_batches(schema(), batches.clone()).unwrap();
            write_dataset(&input, &b, &o, &job, &Progress::default()).unwrap();
            let (ca, cb) = (shard_contents(&a), shard_contents(&b));
            assert_eq!(
                ca.len(),
                if name == "batch" { 8 } else { threads },
                "{name} {threads}"
            );
            assert!(ca == cb, "{name} with {threads} threads: shards differ");
            assert!(verify(&b).unwrap().is_ok());
        }
    }
}

#[test]
fn batches_of_another_schema_are_refused() {
    let other = Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)]));
    let b = RecordBatch::try_new(
        other,
        vec![Arc::new(arrow_array::Int32Array::from(vec![1])) as ArrayRef],
    )
    .unwrap();
    let e = Input::from_batches(schema(), vec![batch(0..2, 0.0), b]).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("<arrow batches>") && msg.contains("record batch 1"),
        "{msg}"
    );
    // A missing column names the in-memory input.
    let input = rows_input(0..4, 0.0);
    let mut o = batch_opts(2);
    o.columns = Some(vec!["nope".into()]);
    let e = write_dataset(
        &input,
        &tempfile::tempdir().unwrap().path().join("o"),
        &o,
        &JobOptions::default(),
        &Progress::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("<arrow batches>") && e.to_string().contains("nope"),
        "{e}"
    );
}

fn reader(batches: Vec<RecordBatch>) -> Input {
    let it = RecordBatchIterator::new(batches.into_iter().map(Ok), schema());
    Input::from_reader(Box::new(it))
}

#[test]
fn stream_input_is_read_once() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = || vec![batch(0..6, 0.0), batch(6..11, 0.0)];
    // Batch mode through write_dataset (threads asked for, one task: the count is unknown).
    let input = reader(rows());
    assert_eq!(input.total_rows(), None);
    let out = tmp.path().join("b");
    let job = JobOptions::new()
        .with_mode(WriteMode::ErrorIfExists)
        .with_threads(3);
    let m = write_dataset(&input, &out, &batch_opts(4), &job, &Progress::default()).unwrap();
    assert_eq!(m.total_samples, 11);
    let ds = Dataset::open(&out).unwrap();
    for i in 0..11 {
        assert_eq!(
            ds.sample(i).unwrap()[0].1.data,
            f32_bytes(values(i as usize, 0.0))
        );
    }
    // A second read of the same stream is an error, not an empty dataset.
    let e = write_dataset(
        &input,
        &tmp.path().join("again"),
        &batch_opts(4),
        &job,
        &Progress::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("<arrow stream>") && e.to_string().contains("read once"),
        "{e}"
    );
    // Batch mode through a job task.
    let dir = tmp.path().join("job");
    let r = task(&dir, "s", 3, &reader(rows()), &batch_opts(4));
    assert_eq!((r.rows, r.shards.len()), (11, 3));
    commit_job(&dir, "s", vec![r], &batch_opts(4), WriteMode::ErrorIfExists).unwrap();
    assert!(shard_files(&dir)
        .iter()
        .all(|f| f.starts_with("part-00003-")));
    // KV mode (streamed, one pass), with a duplicate key in it.
    let mut o = kv_opts();
    o.duplicates = Duplicates::LastWin;
    let out = tmp.path().join("kv");
    let input = reader(vec![batch(0..6, 0.0), batch(std::iter::once(2), 7.0)]);
    let m = write_dataset(&input, &out, &o, &job, &Progress::default()).unwrap();
    assert_eq!(m.total_samples, 6);
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(ds.tensor("r2__v").unwrap().data, f32_bytes(values(2, 7.0)));
    assert!(verify(&out).unwrap().is_ok());
}

#[test]
fn the_error_reported_is_the_first_in_input_order_on_every_run() {
    // Two tasks: rows 0..20 and 20..40. The second fails at once (its first row is short, so
    // row 21 differs from it); the first only at its last batch (row 19). A task may stop early only for an earlier task's failure, so
    // every run must report row 19, however the threads are scheduled.
    let short = [19, 20];
    let batches: Vec<_> = (0..40)
        .step_by(4)
        .map(|s| rows_of(s..s + 4, 0.0, &short))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    for run in 0..30 {
        let input = Input::from_batches(schema(), batches.clone()).unwrap();
        let job = JobOptions::new()
            .with_mode(WriteMode::ErrorIfExists)
            .with_threads(2);
        let out = tmp.path().join(format!("o{run}"));
        let e = write_dataset(&input, &out, &batch_opts(4), &job, &Progress::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("row 19") && !e.contains("row 21"),
            "run {run}: {e}"
        );
        assert!(!out.join("dataset_manifest.json").exists());
    }
}

#[test]
fn append_keeps_the_index_complete_or_drops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ds");
    let index = out.join("_tensor_index.parquet");
    let job = |mode| JobOptions::new().with_mode(mode).with_threads(2);
    let mut o = kv_opts();
    o.generate_index = true;
    let input = rows_input(0..6, 0.0);
    write_dataset(
        &input,
        &out,
        &o,
        &job(WriteMode::ErrorIfExists),
        &Progress::default(),
    )
    .unwrap();
    assert_eq!(
        tensorsmith_dataset::tensor_index_file::read(&index)
            .unwrap()
            .len(),
        6
    );
    // Append with the index asked for: one index over old and new shards.
    let input = Input::from_batches(schema(), vec![batch(6..9, 0.0)]).unwrap();
    write_dataset(
        &input,
        &out,
        &o,
        &job(WriteMode::Append),
        &Progress::default(),
    )
    .unwrap();
    let keys: Vec<String> = tensorsmith_dataset::tensor_index_file::read(&index)
        .unwrap()
        .into_iter()
        .map(|e| e.tensor_key)
        .collect();
    assert_eq!(keys.len(), 9, "{keys:?}");
    assert!(verify(&out).unwrap().is_ok());
    // Append without it: the old index would miss the new keys, so it goes.
    let input = Input::from_batches(schema(), vec![batch(9..10, 0.0)]).unwrap();
    write_dataset(
        &input,
        &out,
        &kv_opts(),
        &job(WriteMode::Append),
        &Progress::default(),
    )
    .unwrap();
    assert!(!index.exists());
    let r = verify(&out).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    assert_eq!(Dataset::open(&out).unwrap().len().unwrap(), 10);
}

#[test]
fn kv_reads_by_key_through_the_index_open_only_their_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut o = kv_opts();
    o.generate_index = true;
    // Three tasks, three shards: r0..r3, r4..r7, r8..r11.
    let reports = (0..3)
        .map(|t| {
            task(
                dir,
                "ix",
                t,
                &rows_input(t as usize * 4..t as usize * 4 + 4, 0.0),
                &o,
            )
        })
        .collect();
    let m = commit_job(dir, "ix", reports, &o, WriteMode::ErrorIfExists).unwrap();
    assert_eq!(m.shards.len(), 3);
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(ds.shards_opened(), 0, "the mode comes from the index");
    assert_eq!(ds.tensor("r5__v").unwrap().data, f32_bytes(values(5, 0.0)));
    assert_eq!(ds.shards_opened(), 1);
    assert_eq!(ds.len().unwrap(), 12);
    // The other shards are not needed at all: gone, the key still reads.
    for s in [&m.shards[0], &m.shards[2]] {
        std::fs::remove_file(dir.join(&s.shard_path)).unwrap();
    }
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(ds.tensor("r6__v").unwrap().data, f32_bytes(values(6, 0.0)));
    assert_eq!(ds.shards_opened(), 1);
    // Export by key reads the same way: the keys' shard only, rows in the order asked.
    let out = tmp.path().join("some.parquet");
    // A name ("r4") selects its keys, as the Spark source's keys option takes it.
    let keys = ["r6__v".to_string(), "r4".to_string()];
    assert_eq!(export_keys(dir, &out, Some(&keys), "__").unwrap(), 2);
    let rows = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(&out).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap()
    .next()
    .unwrap()
    .unwrap();
    let k = rows.column(0).as_string::<i32>();
    assert_eq!((k.value(0), k.value(1)), ("r6__v", "r4__v"));
    let data = rows.column(1).as_struct().column(0).as_binary::<i32>();
    assert_eq!(data.value(1), &f32_bytes(values(4, 0.0))[..]);
    // Every key needs every shard: two are gone.
    let e = export(dir, &out).unwrap_err();
    assert!(e.to_string().contains(&m.shards[0].shard_path), "{e}");
    let e = export_keys(dir, &out, Some(&["r99__v".to_string()]), "__").unwrap_err();
    assert!(
        e.to_string().contains("no tensor key or name 'r99__v'"),
        "{e}"
    );
    let e = export_keys(dir, &out, Some(&["r9".to_string()]), "/").unwrap_err();
    assert!(e.to_string().contains("no tensor key or name 'r9'"), "{e}");
    // Columns choose a batch dataset's tensors, not a KV one's.
    let ds = Dataset::open(dir).unwrap();
    let e = export_choosing(
        &ds,
        &out,
        &Default::default(),
        None,
        Some(&["v".to_string()]),
        "__",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("chosen by key, not by column"),
        "{e}"
    );
    // Without the index, the headers are read: every shard is needed.
    std::fs::remove_file(dir.join("_tensor_index.parquet")).unwrap();
    std::fs::remove_dir_all(dir.join("_tensorsmith/index")).unwrap();
    let e = Dataset::open(dir)
        .and_then(|ds| ds.tensor("r6__v"))
        .unwrap_err();
    assert!(e.to_string().contains(&m.shards[0].shard_path), "{e}");
}

#[test]
fn kv_last_win_across_the_threads_of_one_write_repacks_with_digests() {
    // Two tasks (rows 0..6 and 6..12); row 9 repeats r1 and row 10 repeats r7: task 0's
    // shard loses r1__v (re-packed, file to file), task 1's own shard loses r7__v.
    let mut b = vec![batch(0..9, 0.0)];
    b.push(rows_with_ids(&[(9, 1), (10, 7), (11, 11)], 100.0));
    let input = Input::from_batches(schema(), b).unwrap();
    let mut o = kv_opts();
    o.duplicates = Duplicates::LastWin;
    o.digest = Some(tensorsmith::digest::DigestKind::Xxh3);
    o.generate_index = true;
    let tmp = tempfile::tempdir().unwrap();
    let job = JobOptions::new()
        .with_mode(WriteMode::ErrorIfExists)
        .with_threads(2);
    let m = write_dataset(&input, tmp.path(), &o, &job, &Progress::default()).unwrap();
    assert_eq!(m.shards.len(), 2);
    assert_eq!(m.total_samples, 10);
    let counts: Vec<u64> = m.shards.iter().map(|s| s.samples_count).collect();
    assert_eq!(counts, [5, 5]);
    let ds = Dataset::open(tmp.path()).unwrap();
    assert_eq!(ds.len().unwrap(), 10);
    assert_eq!(
        ds.tensor("r1__v").unwrap().data,
        f32_bytes(values(9, 100.0))
    );
    assert_eq!(
        ds.tensor("r7__v").unwrap().data,
        f32_bytes(values(10, 100.0))
    );
    assert_eq!(ds.tensor("r0__v").unwrap().data, f32_bytes(values(0, 0.0)));
    let r = verify(tmp.path()).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    // No file left aside by the re-pack.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("superseded") || n.starts_with("_tensorsmith_"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Rows (row, key number): values of `row`, id `r{key}`.
fn rows_with_ids(rows: &[(usize, usize)], base: f32) -> RecordBatch {
    let mut v = ListBuilder::new(Float32Builder::new());
    for &(i, _) in rows {
        for x in values(i, base) {
            v.values().append_value(x);
        }
        v.append(true);
    }
    let ids: StringArray = rows.iter().map(|&(_, k)| Some(format!("r{k}"))).collect();
    let cols: Vec<ArrayRef> = vec![Arc::new(v.finish()), Arc::new(ids)];
    RecordBatch::try_new(schema(), cols).unwrap()
}

/// Rows 0..n in uneven batches (7, 4, 13, 1, 12, then 4 each).
fn uneven(n: usize, short: &[usize]) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let (mut at, mut sizes) = (0, [7, 4, 13, 1, 12].into_iter());
    while at < n {
        let k = sizes.next().unwrap_or(4).min(n - at);
        out.push(rows_of(at..at + k, 0.0, short));
        at += k;
    }
    out
}

#[test]
fn a_pipelined_task_writes_the_shards_write_dataset_writes() {
    // write_task writes each shard on a thread of its own while it fills the next; its
    // shards, report order and digests are those of write_dataset's one task on the same rows.
    let tmp = tempfile::tempdir().unwrap();
    for (tail, digest) in [
        (TailStrategy::Write, None),
        (
            TailStrategy::Pad,
            Some(tensorsmith::digest::DigestKind::Xxh3),
        ),
        (TailStrategy::Drop, None),
    ] {
        let mut o = batch_opts(3);
        o.tail_strategy = tail;
        o.digest = digest;
        let name = format!("{tail:?}");
        let dir = tmp.path().join(format!("job-{name}"));
        let r = task(&dir, "p", 0, &reader(uneven(41, &[])), &o);
        let names: Vec<_> = r
            .shards
            .iter()
            .map(|s| s.shard_path[..15].to_string())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "{name}: shards reported in the order filled");
        let m = commit_job(&dir, "p", vec![r], &o, WriteMode::ErrorIfExists).unwrap();
        let job = JobOptions::new().with_threads(1);
        let out = tmp.path().join(format!("ds-{name}"));
        let input = Input::from_batches(schema(), uneven(41, &[])).unwrap();
        let want = write_dataset(&input, &out, &o, &job, &Progress::default()).unwrap();
        let n = if tail == TailStrategy::Drop { 13 } else { 14 };
        assert_eq!(m.shards.len(), n, "{name}");
        assert!(
            shard_contents(&dir) == shard_contents(&out),
            "{name}: shards differ"
        );
        let digests = |m: &Manifest| {
            m.shards
                .iter()
                .map(|s| s.content_digest.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(digests(&m), digests(&want), "{name}");
        assert_eq!(digest.is_some(), m.shards[0].content_digest.is_some());
        assert!(verify(&dir).unwrap().is_ok());
    }
}

#[test]
fn a_pipelined_task_fails_on_a_bad_row_without_hanging_and_keeps_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("job");
    started(&dir, "f");
    let e = write_task(
        &reader(uneven(60, &[37])),
        &dir,
        "f",
        0,
        &batch_opts(3),
        &Progress::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("row 37"), "{e}");
    abort_job(&dir, "f").unwrap();
    assert!(shard_files(&dir).is_empty());
}

#[test]
fn task_ranges_and_write_task_range_commit_what_write_dataset_writes() {
    // A distributed job over a Parquet file, cut as write_dataset cuts it, commits the same
    // shards (batch mode: pages copied; KV mode: a duplicate key resolved over the input).
    let tmp = tempfile::tempdir().unwrap();
    let pq = tmp.path().join("in.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(10))
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&pq).unwrap(),
        schema(),
        Some(props),
    )
    .unwrap();
    for b in uneven(41, &[]) {
        w.write(&b).unwrap();
    }
    w.write(&batch(std::iter::once(5), 9.0)).unwrap();
    w.close().unwrap();
    let mut kv = kv_opts();
    kv.duplicates = Duplicates::LastWin;
    for (name, o) in [("batch", batch_opts(4)), ("kv", kv)] {
        for tasks in [1, 3] {
            let input = Input::open(&[&pq]).unwrap();
            let ranges = tensorsmith_dataset::task_ranges(&input, &o, tasks).unwrap();
            assert_eq!(ranges.len(), tasks);
            let dir = tmp.path().join(format!("job-{name}-{tasks}"));
            let reports = ranges
                .into_iter()
                .enumerate()
                .map(|(t, r)| {
                    let input = Input::open(&[&pq]).unwrap();
                    started(&dir, "d");
                    tensorsmith_dataset::write_task_range(
                        &input,
                        &dir,
                        "d",
                        t as u64,
                        r,
                        &o,
                        &Progress::default(),
                    )
                    .unwrap()
                })
                .collect();
            commit_job(&dir, "d", reports, &o, WriteMode::ErrorIfExists).unwrap();
            let out = tmp.path().join(format!("ds-{name}-{tasks}"));
            let job = JobOptions::new().with_threads(tasks);
            write_dataset(&input, &out, &o, &job, &Progress::default()).unwrap();
            assert!(
                shard_contents(&dir) == shard_contents(&out),
                "{name} {tasks}"
            );
            assert_eq!(
                std::fs::read(dir.join("dataset_manifest.json"))
                    .map(|b| b.len())
                    .unwrap(),
                std::fs::read(out.join("dataset_manifest.json"))
                    .map(|b| b.len())
                    .unwrap()
            );
        }
    }
}

#[test]
fn a_url_is_never_a_jobs_local_folder_and_unknown_schemes_are_refused() {
    // The local-folder protocol refuses a URL (start_job_at routes it to the store).
    let e = tensorsmith_dataset::start_job(
        Path::new("s3://bkt/ds"),
        "j1",
        std::time::Duration::from_secs(60),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("s3://bkt/ds") && e.contains("writes through the store"),
        "{e}"
    );
    let e = tensorsmith_dataset::start_job_at(
        "ftp://host/ds",
        &Default::default(),
        "j1",
        std::time::Duration::from_secs(60),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("unsupported URL scheme \"ftp\""), "{e}");
    assert!(!Path::new("s3:").exists(), "a local folder was made");
    assert!(!Path::new("ftp:").exists(), "a local folder was made");
}

#[test]
fn the_commit_removes_the_shards_of_attempts_it_does_not_commit() {
    // Task 0 ran twice (a retry after a lost executor, or a speculative copy): both attempts'
    // shards moved into the folder; the commit takes the reported one and removes the other's.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = batch_opts(4);
    let lost = task(dir, "retried", 0, &rows_input(0..9, 100.0), &o);
    let kept = task(dir, "retried", 0, &rows_input(0..9, 0.0), &o);
    let second = task(dir, "retried", 1, &rows_input(9..12, 0.0), &o);
    assert_eq!(shard_files(dir).len(), 7);
    let m = commit_job(
        dir,
        "retried",
        vec![second, kept],
        &o,
        WriteMode::ErrorIfExists,
    )
    .unwrap();
    let listed: Vec<String> = m.shards.iter().map(|s| s.shard_path.clone()).collect();
    assert_eq!(shard_files(dir), listed);
    assert!(lost
        .shards
        .iter()
        .all(|s| !dir.join(&s.shard_path).exists()));
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(ds.sample(8).unwrap()[0].1.data, f32_bytes(values(8, 0.0)));
    assert!(verify(dir).unwrap().is_ok());
    assert!(!dir.join("_tensorsmith/jobs/retried").exists());
    assert!(!dir.join("_tensorsmith_job-retried").exists());
}
