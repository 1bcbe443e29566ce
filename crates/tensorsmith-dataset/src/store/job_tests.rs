//! The job protocol on a store (store_job.rs) run on the local store: only reported shards
//! stay after a commit (retried and lost attempts swept), an abort leaves nothing of the
//! job, a task after the job ended uploads nothing, KV lastWin across tasks rewrites the
//! losers' shards, and clean spares a running job's shards and takes a dead one's. The same
//! protocol through Spark and Ray on an S3 server: tests/python/test_spark_s3.py.

use crate::options::{Duplicates, WriteOptions};
use crate::store::clean::clean_store;
use crate::store::job::{abort_store_job, commit_store_job, start_store_job, store_task};
use crate::store::local::LocalStore;
use crate::store::seam::Store;
use crate::store::versions as sv;
use crate::write::job_options::{JobOptions, Progress, WriteMode};
use crate::{Dataset, Input, TaskReport};
use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tensorsmith::dtype::DType;

/// Rows `rows`: `v` = [i, i, i] + base, `id` = `r{i}`.
fn input(rows: std::ops::Range<usize>, base: f32) -> Input {
    let mut v = ListBuilder::new(Float32Builder::new());
    for i in rows.clone() {
        for _ in 0..3 {
            v.values().append_value(i as f32 + base);
        }
        v.append(true);
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
            true,
        ),
        Field::new("id", DataType::Utf8, false),
    ]));
    let ids = StringArray::from(rows.map(|i| format!("r{i}")).collect::<Vec<_>>());
    let b = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(v.finish()) as ArrayRef, Arc::new(ids)],
    )
    .unwrap();
    Input::from_batches(schema, vec![b]).unwrap()
}

fn batch_opts() -> WriteOptions {
    let mut o = WriteOptions::batch(4);
    o.dtype = Some(DType::F32);
    o.columns = Some(vec!["v".into()]);
    o
}

fn task(
    store: &dyn Store,
    job: &str,
    t: u64,
    rows: std::ops::Range<usize>,
    o: &WriteOptions,
) -> crate::Result<TaskReport> {
    let n = (rows.end - rows.start) as u64;
    store_task(
        &input(rows, 0.0),
        store,
        None,
        job,
        t,
        0..n,
        o,
        &Progress::default(),
        false,
    )
}

/// Job `job` started on the store in `dir` (heartbeat renewed hourly).
fn start(dir: &Path, job: &str) -> crate::Heartbeat {
    start_store_job(
        Box::new(LocalStore::new(dir)),
        job,
        Duration::from_secs(3600),
        || {},
    )
    .unwrap()
}

fn names(store: &dyn Store, prefix: &str) -> BTreeSet<String> {
    store
        .list(prefix)
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect()
}

fn commit(
    store: &dyn Store,
    job: &str,
    reports: Vec<TaskReport>,
    o: &WriteOptions,
) -> crate::Manifest {
    let j = JobOptions::new().with_mode(WriteMode::Append);
    commit_store_job(store, None, job, reports, o, &j).unwrap()
}

#[test]
fn a_commit_keeps_the_reported_shards_and_sweeps_every_other_attempt() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    let beat = start(d.path(), "job1");
    let o = batch_opts();
    let t0 = task(&store, "job1", 0, 0..8, &o).unwrap();
    // Task 1 runs twice: the first attempt's report never reaches the driver.
    let lost = task(&store, "job1", 1, 0..4, &o).unwrap();
    let t1 = task(&store, "job1", 1, 0..4, &o).unwrap();
    assert_eq!(
        names(&store, "part-").len(),
        4,
        "every attempt uploaded its shards"
    );
    assert_eq!(
        names(&store, "_tensorsmith/jobs/job1/").len(),
        4,
        "heartbeat + 3 attempts"
    );
    let m = commit(&store, "job1", vec![t1, t0], &o);
    drop(beat);
    let opened = store.opened.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(opened, 0, "a batch commit reads no shard");
    assert_eq!(m.total_samples, 12);
    let committed: BTreeSet<String> = m.shards.iter().map(|s| s.shard_path.clone()).collect();
    assert_eq!(names(&store, "part-"), committed);
    assert!(!committed.contains(&lost.shards[0].shard_path));
    assert!(names(&store, "_tensorsmith/jobs/").is_empty());
    assert_eq!(Dataset::open(d.path()).unwrap().len().unwrap(), 12);
    // The job is over: a late attempt uploads nothing, and says why.
    let e = task(&store, "job1", 2, 0..4, &o).unwrap_err().to_string();
    assert!(e.contains("job job1 is not running"), "{e}");
    assert_eq!(names(&store, "part-"), committed);
}

#[test]
fn an_abort_removes_the_jobs_shards_and_keeps_the_committed_ones() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    let o = batch_opts();
    let _b = start(d.path(), "first");
    let r = task(&store, "first", 0, 0..8, &o).unwrap();
    let before = commit(&store, "first", vec![r], &o);
    let _b = start(d.path(), "second");
    task(&store, "second", 0, 0..8, &o).unwrap();
    task(&store, "second", 1, 0..8, &o).unwrap();
    assert_eq!(names(&store, "part-").len(), 6);
    abort_store_job(&store, "second").unwrap();
    let kept: BTreeSet<String> = before.shards.iter().map(|s| s.shard_path.clone()).collect();
    assert_eq!(names(&store, "part-"), kept);
    assert!(names(&store, "_tensorsmith/jobs/").is_empty());
    // Aborted: its commit is refused, nothing committed.
    let e = commit_store_job(&store, None, "second", vec![], &o, &JobOptions::new()).unwrap_err();
    assert!(e.to_string().contains("not running"), "{e}");
    // Aborting again (or a job never started) is fine.
    abort_store_job(&store, "second").unwrap();
    abort_store_job(&store, "never").unwrap();
}

/// Job "kv" on a new store in `dir`: rows r0..r5 by task 0, r3..r7 again by task 1
/// (values + 100), KV mode with `dup`.
fn kv_job(dir: &Path, dup: Duplicates) -> (LocalStore, WriteOptions, Vec<TaskReport>) {
    let store = LocalStore::new(dir);
    let mut o = WriteOptions::kv("id");
    o.dtype = Some(DType::F32);
    o.duplicates = dup;
    start(dir, "kv").stop();
    let p = Progress::default();
    let a = store_task(
        &input(0..6, 0.0),
        &store,
        None,
        "kv",
        0,
        0..6,
        &o,
        &p,
        false,
    )
    .unwrap();
    let b = store_task(
        &input(3..8, 100.0),
        &store,
        None,
        "kv",
        1,
        0..5,
        &o,
        &p,
        false,
    )
    .unwrap();
    (store, o, vec![a, b])
}

#[test]
fn kv_last_win_across_tasks_rewrites_the_losing_shards() {
    let d = tempfile::tempdir().unwrap();
    let (store, o, reports) = kv_job(d.path(), Duplicates::LastWin);
    let m = commit(&store, "kv", reports, &o);
    let opened = store.opened.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(opened, 1, "only task 0's shard, holding r3..r5, is fetched");
    let committed: BTreeSet<String> = m.shards.iter().map(|s| s.shard_path.clone()).collect();
    assert_eq!(names(&store, "part-"), committed);
    let ds = Dataset::open(d.path()).unwrap();
    let mut keys = ds.tensor_keys().unwrap();
    keys.sort();
    assert_eq!(keys, (0..8).map(|i| format!("r{i}__v")).collect::<Vec<_>>());
    let t = ds.tensor("r4__v").unwrap();
    assert_eq!(&t.data[..4], &104f32.to_le_bytes());
    let t = ds.tensor("r1__v").unwrap();
    assert_eq!(&t.data[..4], &1f32.to_le_bytes());
}

#[test]
fn kv_fail_across_tasks_refuses_the_commit() {
    let d = tempfile::tempdir().unwrap();
    let (store, o, reports) = kv_job(d.path(), Duplicates::Fail);
    let e = commit_store_job(&store, None, "kv", reports, &o, &JobOptions::new()).unwrap_err();
    assert!(e.to_string().contains("r3"), "{e}");
    assert!(sv::current(&store).unwrap().is_none(), "nothing committed");
}

fn age(path: &Path, by: Duration) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - by).unwrap();
}

#[test]
fn clean_spares_a_running_jobs_shards_and_takes_a_dead_ones() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    let o = batch_opts();
    let _b = start(d.path(), "old");
    let r = task(&store, "old", 0, 0..4, &o).unwrap();
    commit(&store, "old", vec![r], &o);
    let _b = start(d.path(), "live");
    task(&store, "live", 0, 0..8, &o).unwrap();
    let two_hours = Duration::from_secs(7200);
    let shards = names(&store, "part-");
    for n in &shards {
        age(&d.path().join(n), two_hours);
    }
    // Older than the abandoned floor, but their job's heartbeat is fresh.
    clean_store(&store, Duration::ZERO).unwrap();
    assert_eq!(names(&store, "part-"), shards);
    // The driver died: its heartbeat goes stale, the clean takes the job's shards.
    age(
        &d.path().join("_tensorsmith/jobs/live/heartbeat"),
        two_hours,
    );
    let report = clean_store(&store, Duration::ZERO).unwrap();
    assert_eq!(names(&store, "part-").len(), 1, "{report:?}");
    assert!(names(&store, "_tensorsmith/jobs/").is_empty());
    // An attempt that uploaded after its job ended is taken at once, however young.
    let _b = start(d.path(), "ended");
    task(&store, "ended", 0, 0..4, &o).unwrap();
    store.delete("_tensorsmith/jobs/ended/heartbeat").unwrap();
    clean_store(&store, Duration::ZERO).unwrap();
    assert_eq!(names(&store, "part-").len(), 1);
    assert!(names(&store, "_tensorsmith/jobs/").is_empty());
}
