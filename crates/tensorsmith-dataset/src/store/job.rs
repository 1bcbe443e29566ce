//! Distributed jobs (the Spark source, `tensorsmith.spark.write_dataset`, Ray) writing into
//! a store (an S3 prefix): each task writes its shards in a local temporary folder and
//! uploads them to their final, unique names; the driver commits the reported shards with
//! the object-store commit (store_commit.rs); the abort deletes what the job uploaded. A
//! store has no staging folder to remove, so a job leaves these under
//! `_tensorsmith/jobs/<job id>/`:
//!
//! - `heartbeat`: put by the driver at the start and renewed every minute until the commit
//!   or the abort deletes it. A task uploads a shard only while it exists, so an attempt
//!   still running after the job ended (a speculative or zombie task) stops at its next
//!   shard; `dataset clean` takes a job whose heartbeat is older than the abandoned floor
//!   for dead.
//! - `attempt-<task>-<uuid>`: put by a task attempt before its first shard. Every shard of
//!   the attempt is `part-<task>-<n>-<uuid>.safetensors`, so the commit and the abort find
//!   every object of every attempt, reported or not (retried tasks, speculative copies,
//!   attempts whose report was lost), and delete what the committed version does not list.
//!
//! Once the job has ended, no object of it outside the committed version remains, but for an
//! attempt that uploaded after the commit's sweep: `dataset clean` removes those (attempts of
//! jobs that have ended, at once; of dead jobs, once the heartbeat is stale).

use crate::commit::staging::{renew_until_stopped, stop_renewals, Heartbeat, StopFlag};
use crate::commit::versions::now_ms;
use crate::error::{DatasetError, Result};
use crate::input::files::Input;
use crate::manifest::{is_shard_file_name, Manifest, ShardInfo};
use crate::options::{Duplicates, Naming, WriteOptions};
use crate::store::commit::{commit_to_store, upload_shards};
use crate::store::job_marks::{heartbeat_key, sweep, JOBS_PREFIX};
use crate::store::seam::{Entry, Store, Upload};
use crate::store::upload::{check, remove_uploaded, uploading};
use crate::store::versions as sv;
use crate::write::job_options::{JobOptions, Progress};
use crate::write::plan::Plan;
use crate::write::shard_record::attempt_of;
use crate::write::task_at::TaskAt;
use crate::write::task_report::TaskReport;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use tensorsmith::bytes::ReadAt;

fn beat_text(job_id: &str) -> String {
    format!(
        "{{\"job_id\": \"{job_id}\", \"heartbeat_ms\": {}}}\n",
        now_ms()
    )
}

/// Starts job `job_id` on `store` (on the driver, before any task): its heartbeat, renewed
/// every `every` until the returned [`Heartbeat`] is stopped or dropped, with `also` called
/// at each renewal (a local job's staging folder marker).
pub(crate) fn start_store_job(
    store: Box<dyn Store>,
    job_id: &str,
    every: Duration,
    mut also: impl FnMut() + Send + 'static,
) -> Result<Heartbeat> {
    let key = heartbeat_key(job_id);
    store.put(&key, beat_text(job_id).as_bytes())?;
    let job = job_id.to_string();
    Ok(Heartbeat::renewing(every, move || {
        // Renewed only while it exists: the commit or abort deleted it, the job is over.
        let on = matches!(store.get(&key), Ok(Some(_)))
            && store.put(&key, beat_text(&job).as_bytes()).is_ok();
        if on {
            also();
        }
        on
    }))
}

/// Runs `f` (one process's write) as a job of its own on `store`: its heartbeat put first and
/// renewed every `every` while `f` runs, and `f` given the store through which the shards it
/// uploads mark their attempts. A `dataset clean` then spares those shards however long the
/// write takes (a store tells a live writer from a dead one by its heartbeat, not by the age
/// of its shards). When `f` is done the job is swept: the heartbeat, the markers, and every
/// shard of its attempts that the version `f` committed (`kept`) does not list. `also` is
/// called at each renewal (a local write's staging folder marker).
pub(crate) fn as_store_job<T>(
    store: &dyn Store,
    every: Duration,
    also: &(dyn Fn() + Sync),
    f: impl FnOnce(&dyn Store) -> Result<T>,
    kept: impl FnOnce(&T) -> Vec<String>,
) -> Result<T> {
    let job_id = format!("write-{}", uuid::Uuid::new_v4().simple());
    let key = heartbeat_key(&job_id);
    store.put(&key, beat_text(&job_id).as_bytes())?;
    let stop: StopFlag = (Mutex::new(false), std::sync::Condvar::new());
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            renew_until_stopped(&stop, every, || {
                let _ = store.put(&key, beat_text(&job_id).as_bytes());
                also();
                true
            })
        });
        let jobs = JobStore {
            inner: store,
            job_id: &job_id,
            marked: Mutex::new(HashSet::new()),
            check_beat: false,
        };
        let r = f(&jobs);
        stop_renewals(&stop);
        r
    });
    let keep = result.as_ref().map(kept).unwrap_or_default();
    // What the sweep leaves (a store that fails now), `dataset clean` takes once the
    // heartbeat is stale.
    let _ = sweep(store, &job_id, &keep.iter().map(String::as_str).collect());
    result
}

fn job_over(store: &dyn Store, job_id: &str) -> DatasetError {
    DatasetError::input(format!(
        "{}: job {job_id} is not running there (committed, aborted, or never started: no {})",
        store.location(),
        heartbeat_key(job_id)
    ))
}

/// The store as a job's task sees it: a shard goes up only while the job runs, and the
/// first shard of an attempt marks the attempt first.
struct JobStore<'a> {
    inner: &'a dyn Store,
    job_id: &'a str,
    marked: Mutex<HashSet<String>>,
    /// Whether each shard first checks that the job still runs (a task of a distributed
    /// job; a write that is its own job knows).
    check_beat: bool,
}

impl JobStore<'_> {
    fn before_shard(&self, key: &str) -> Result<()> {
        if self.check_beat && self.inner.get(&heartbeat_key(self.job_id))?.is_none() {
            return Err(job_over(self.inner, self.job_id));
        }
        let Some(attempt) = attempt_of(key) else {
            return Ok(());
        };
        if self
            .marked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&attempt)
        {
            return Ok(());
        }
        let marker = format!("{JOBS_PREFIX}{}/attempt-{attempt}", self.job_id);
        self.inner.put(&marker, b"")?;
        self.marked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(attempt);
        Ok(())
    }
}

impl Store for JobStore<'_> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.inner.put(key, bytes)
    }
    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        self.inner.create(key, bytes)
    }
    fn put_file(&self, key: &str, from: &Path) -> Result<()> {
        self.before_shard(key)?;
        self.inner.put_file(key, from)
    }
    fn adopt(&self, key: &str, from: &Path) -> Result<()> {
        if let Err(e) = self.before_shard(key) {
            let _ = std::fs::remove_file(from);
            return Err(e);
        }
        self.inner.adopt(key, from)
    }
    fn local_file(&self, key: &str) -> Option<PathBuf> {
        self.inner.local_file(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<Entry>> {
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }
    fn open(&self, key: &str) -> Result<Box<dyn ReadAt>> {
        self.inner.open(key)
    }
    fn open_head(&self, key: &str, first: u64) -> Result<Box<dyn ReadAt>> {
        self.inner.open_head(key, first)
    }
    fn uploads(&self, prefix: &str) -> Result<Vec<Upload>> {
        self.inner.uploads(prefix)
    }
    fn abort(&self, upload: &Upload) -> Result<()> {
        self.inner.abort(upload)
    }
}

/// A local temporary folder removed when dropped.
pub(crate) struct TempFolder(pub PathBuf);

impl TempFolder {
    /// A new folder in `parent`, or in the temporary directory (`TMPDIR`) when `None`. A
    /// local dataset's job passes its staging folder, so that a shard moves into the
    /// dataset's folder by a rename, on one filesystem.
    pub(crate) fn new(parent: Option<&Path>, what: &str) -> Result<TempFolder> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let p = parent.join(format!(
            "tensorsmith-{what}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir(&p).map_err(|e| DatasetError::io(&p, e))?;
        Ok(TempFolder(p))
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes rows `rows` of `input` as task `task` of job `job_id` into `store`: every shard is
/// uploaded to its final name before the report is returned (batch shards as each is
/// complete, KV shards once the task's duplicates are resolved). A failure deletes what the
/// task uploaded. The task writes its shards in a temporary folder inside `temp_in` (a
/// local dataset's job staging folder), or else in `TMPDIR`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store_task(
    input: &Input,
    store: &dyn Store,
    temp_in: Option<&Path>,
    job_id: &str,
    task: u64,
    rows: Range<u64>,
    opts: &WriteOptions,
    progress: &Progress,
    pipelined: bool,
) -> Result<TaskReport> {
    let plan = Plan::new(input, opts)?;
    let jobs = JobStore {
        inner: store,
        job_id,
        marked: Mutex::new(HashSet::new()),
        check_beat: true,
    };
    if store.get(&heartbeat_key(job_id))?.is_none() {
        return Err(job_over(store, job_id));
    }
    let staging = TempFolder::new(temp_in, "task")?;
    let batch = matches!(opts.naming, Naming::Batch(_));
    let (report, mut uploaded) = uploading(&jobs, &staging.0, |queue| {
        TaskAt {
            plan: &plan,
            input,
            opts,
            staging: &staging.0,
            progress,
            pipelined,
            on_shard: batch.then_some(queue),
        }
        .run(task, rows)
    });
    let report = report.and_then(|r| check(&mut uploaded).map(|()| r));
    let report = report.and_then(|r| {
        let rest: Vec<ShardInfo> = r
            .shards
            .iter()
            .filter(|s| !uploaded.names.contains(&s.shard_path))
            .cloned()
            .collect();
        upload_shards(&jobs, &staging.0, &rest)?;
        uploaded
            .names
            .extend(rest.into_iter().map(|s| s.shard_path));
        Ok(r)
    });
    if report.is_err() {
        remove_uploaded(store, &uploaded);
    }
    report
}

/// The driver's commit of job `job_id` from its tasks' reports (one per task, any order):
/// the object-store commit of the shards they name, then every other object of the job's
/// attempts deleted, and the job's heartbeat and markers. KV keys written by several tasks:
/// `fail` refuses the commit; `lastWin` has the shards holding superseded tensors fetched,
/// rewritten without them and uploaded again under their names (no version lists them yet).
pub(crate) fn commit_store_job(
    store: &dyn Store,
    temp_in: Option<&Path>,
    job_id: &str,
    mut reports: Vec<TaskReport>,
    opts: &WriteOptions,
    job: &JobOptions,
) -> Result<Manifest> {
    opts.check()?;
    if store.get(&heartbeat_key(job_id))?.is_none() {
        return Err(job_over(store, job_id));
    }
    let staging = TempFolder::new(temp_in, "commit")?;
    let mut uploaded: HashSet<String> = reports
        .iter()
        .flat_map(|r| r.shards.iter().map(|s| s.shard_path.clone()))
        .collect();
    reports.sort_by_key(|r| r.task);
    // Only KV lastWin rewrites shards (batch shards all hold the same column names).
    let rewrites =
        matches!(opts.naming, Naming::Kv { .. }) && opts.duplicates == Duplicates::LastWin;
    let superseded = match rewrites {
        true => superseded_shards(&reports),
        false => HashSet::new(),
    };
    for name in superseded {
        if !uploaded.contains(&name) || !is_shard_file_name(&name) {
            continue; // the commit's checks word it
        }
        fetch(store, &name, &staging.0.join(&name))?;
        uploaded.remove(&name);
    }
    let manifest = commit_to_store(store, &staging.0, reports, &uploaded, opts, job, None)?;
    let keep: HashSet<&str> = manifest
        .shards
        .iter()
        .map(|s| s.shard_path.as_str())
        .collect();
    let _ = sweep(store, job_id, &keep);
    Ok(manifest)
}

/// Shards holding a KV key that a later task (or a later entry) writes again.
fn superseded_shards(reports: &[TaskReport]) -> HashSet<String> {
    let mut last: HashMap<&str, &str> = HashMap::new();
    let mut out = HashSet::new();
    for e in reports.iter().flat_map(|r| &r.index) {
        if let Some(prev) = last.insert(e.tensor_key.as_str(), &*e.file_name) {
            out.insert(prev.to_string());
        }
    }
    out
}

/// Copies object `key` to the local file `to` (parallel ranged reads on a store).
fn fetch(store: &dyn Store, key: &str, to: &Path) -> Result<()> {
    let src = store.open(key)?;
    let mut out = std::fs::File::create(to).map_err(|e| DatasetError::io(to, e))?;
    src.copy_to(0..src.len(), &mut out)
        .map_err(|e| DatasetError::Tensor(e.in_file(Path::new(&store.show(key)))))
}

/// The driver's abort of job `job_id`: every object its attempts uploaded that no version
/// lists is deleted, then its heartbeat and markers. A job never started or already ended
/// is fine.
pub(crate) fn abort_store_job(store: &dyn Store, job_id: &str) -> Result<()> {
    let current = sv::current(store)?;
    let keep: HashSet<&str> = current
        .as_ref()
        .map(|s| {
            s.manifest()
                .shards
                .iter()
                .map(|s| s.shard_path.as_str())
                .collect()
        })
        .unwrap_or_default();
    sweep(store, job_id, &keep)
}

#[cfg(test)]
mod tests {
    use super::attempt_of;

    #[test]
    fn attempts_are_read_from_shard_names() {
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert_eq!(
            attempt_of(&format!("part-00003-0012-{uuid}.safetensors")).as_deref(),
            Some(format!("00003-{uuid}").as_str())
        );
        assert_eq!(attempt_of("part-00003.safetensors"), None);
        assert_eq!(attempt_of("dataset_manifest.json"), None);
    }
}
