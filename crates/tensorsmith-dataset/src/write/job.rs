//! Writing one dataset from many processes (a Spark job: tasks on executors, the commit on
//! the driver) in a local folder shared by every node. A local folder is one more store
//! (store_local.rs), and a job on it runs the store's job protocol (store_job.rs): the
//! driver starts the job (`start_job`: its heartbeat), each task writes its rows with
//! `write_task` in the job's staging folder `<dir>/_tensorsmith_job-<job id>/` and moves
//! each finished shard into `dir` under its final name (marking its attempt first), and
//! returns a `TaskReport` (JSON-serializable, no tensor data); once every task has
//! succeeded, `commit_job` commits the reported shards as `write_dataset` does; if any
//! failed, `abort_job` removes every shard of the job's attempts. Shards carry their task id
//! and attempt: `part-{task:05}-{n:04}-{uuid}.safetensors`.

use crate::commit::staging::{mark, Heartbeat, DEFAULT_HEARTBEAT, JOB_STAGING_PREFIX};
use crate::error::{DatasetError, Result};
use crate::input::files::Input;
use crate::manifest::Manifest;
use crate::options::WriteOptions;
use crate::store::job::{abort_store_job, commit_store_job, start_store_job, store_task};
use crate::store::job_marks::heartbeat_key;
use crate::store::local::LocalStore;
use crate::store::seam::Store;
use crate::write::job_options::{JobOptions, Progress, WriteMode};
use crate::write::plan::Plan;
use crate::write::task_report::TaskReport;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The job's staging folder in `dir`. Job ids are 1 to 64 of `[A-Za-z0-9_-]`, so the folder
/// is always a child of `dir`.
///
/// # Errors
///
/// - [`DatasetError::Option`]: `job_id` is not 1 to 64 characters of `[A-Za-z0-9_-]`.
/// - [`DatasetError::Input`]: `dir` is a URL (a job on a store has no staging folder: see
///   [`start_job_at`](crate::start_job_at)).
pub fn job_staging(dir: &Path, job_id: &str) -> Result<PathBuf> {
    // Never a local folder named after a URL (`s3:/bucket/ds`).
    if let Some(scheme) = dir.to_str().and_then(tensorsmith::bytes::scheme_name) {
        return Err(DatasetError::input(format!(
            "{}: a job's staging folder is a local folder; a job on {scheme}:// writes through the store (start_job_at, write_task_at, commit_job_at)",
            tensorsmith::bytes::redact_url(&dir.to_string_lossy())
        )));
    }
    check_job_id(job_id)?;
    Ok(dir.join(format!("{JOB_STAGING_PREFIX}{job_id}")))
}

/// Job ids are 1 to 64 of `[A-Za-z0-9_-]`: a folder or object name under the dataset's.
pub(crate) fn check_job_id(job_id: &str) -> Result<()> {
    let ok = (1..=64).contains(&job_id.len())
        && job_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        return Err(DatasetError::option(
            "job_id",
            format!("'{job_id}': a job id is 1 to 64 characters of A-Z a-z 0-9 _ -"),
        ));
    }
    Ok(())
}

/// Starts job `job_id` in `dir` (on the driver, before any task): the job's heartbeat
/// (`_tensorsmith/jobs/<job id>/heartbeat`, as on a store) and its staging folder (where its
/// tasks write before each shard moves into `dir`), both renewed every `every` until the
/// returned [`Heartbeat`] is dropped or stopped (after the commit or the abort). A task
/// writes only while the job's heartbeat exists. A driver that dies stops renewing it:
/// `dataset clean` then takes the job for dead once its heartbeat is an hour old (or the
/// retention, when longer), with every shard its tasks wrote that no version lists.
///
/// # Errors
///
/// - [`DatasetError::Option`]: `job_id` is not 1 to 64 characters of `[A-Za-z0-9_-]`.
/// - [`DatasetError::Input`]: `dir` is a URL.
/// - [`DatasetError::Io`]: the staging folder cannot be made.
/// - [`DatasetError::Tensor`]: the folder's filesystem cannot lock, or the heartbeat cannot be
///   written.
pub fn start_job(dir: &Path, job_id: &str, every: Duration) -> Result<Heartbeat> {
    let staging = job_staging(dir, job_id)?;
    std::fs::create_dir_all(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    // A filesystem that cannot lock is refused before any task writes.
    crate::commit::lock::probe(dir)?;
    mark(&staging)?;
    // The staging folder's marker is for `dataset clean`'s staging rule, which also serves
    // writers of older versions that know no job heartbeat.
    start_store_job(Box::new(LocalStore::new(dir)), job_id, every, move || {
        let _ = staging.is_dir() && mark(&staging).is_ok();
    })
}

/// Writes the whole of `input` as task `task` of job `job_id` (started with [`start_job`]):
/// each shard written in the job's staging folder in `dir`, then moved into `dir` under its
/// final name, never listed by a version before the commit. Batch mode: a shard every
/// `batch_size` rows, the tail strategy applied to this task's tail; each shard is written
/// and fsynced on a thread of its own while the task fills the next (at most two in flight),
/// so a producer feeding the input (a Spark task's stream) is not kept waiting. KV mode:
/// streamed a shard at a time, duplicate keys within the task resolved as `write_dataset`
/// resolves them (`kv_resolve`); between tasks at the commit. A task that fails removes the
/// shards it moved in.
///
/// # Errors
///
/// - [`DatasetError::Option`]: `job_id` is not 1 to 64 characters of `[A-Za-z0-9_-]`.
/// - [`DatasetError::Input`]: the job is not running in `dir` (never started, or committed or
///   aborted, also while the task writes).
/// - [`DatasetError::Option`]: the options break a rule, or name a column the input lacks.
/// - [`DatasetError::Input`]: a row or column cannot become a tensor (its type, a length, a
///   null, a value the dtype cannot hold).
/// - [`DatasetError::DuplicateKey`]: two rows of a KV write give one tensor key and
///   `duplicatesStrategy` is `fail`.
/// - [`DatasetError::Corrupt`], [`DatasetError::Parquet`], [`DatasetError::Arrow`]: an input
///   file cannot be read.
/// - [`DatasetError::Io`], [`DatasetError::Tensor`]: a shard cannot be written.
pub fn write_task(
    input: &Input,
    dir: &Path,
    job_id: &str,
    task: u64,
    opts: &WriteOptions,
    progress: &Progress,
) -> Result<TaskReport> {
    job_task(input, dir, job_id, task, 0..u64::MAX, opts, progress, true)
}

/// Writes rows `rows` of `input` (a file input every task opens, such as Parquet) as task
/// `task` of job `job_id`, as `write_dataset`'s task over that range would: with the ranges
/// of [`task_ranges`](crate::task_ranges), the committed shards are those `write_dataset` writes (Parquet pages
/// copied or decoded where it would). Batch mode: a range starts on a batch boundary. KV
/// mode: duplicates within the range are resolved here, between tasks at the commit.
///
/// # Errors
///
/// - [`DatasetError::Option`]: `job_id` is not 1 to 64 characters of `[A-Za-z0-9_-]`.
/// - [`DatasetError::Input`]: the job is not running in `dir` (never started, or committed or
///   aborted, also while the task writes).
/// - [`DatasetError::Option`]: the options break a rule, or name a column the input lacks.
/// - [`DatasetError::Input`]: a row or column cannot become a tensor (its type, a length, a
///   null, a value the dtype cannot hold).
/// - [`DatasetError::DuplicateKey`]: two rows of a KV write give one tensor key and
///   `duplicatesStrategy` is `fail`.
/// - [`DatasetError::Corrupt`], [`DatasetError::Parquet`], [`DatasetError::Arrow`]: an input
///   file cannot be read.
/// - [`DatasetError::Io`], [`DatasetError::Tensor`]: a shard cannot be written.
pub fn write_task_range(
    input: &Input,
    dir: &Path,
    job_id: &str,
    task: u64,
    rows: Range<u64>,
    opts: &WriteOptions,
    progress: &Progress,
) -> Result<TaskReport> {
    job_task(input, dir, job_id, task, rows, opts, progress, false)
}

#[allow(clippy::too_many_arguments)]
fn job_task(
    input: &Input,
    dir: &Path,
    job_id: &str,
    task: u64,
    rows: Range<u64>,
    opts: &WriteOptions,
    progress: &Progress,
    pipelined: bool,
) -> Result<TaskReport> {
    let staging = job_staging(dir, job_id)?;
    Plan::new(input, opts)?;
    let store = LocalStore::new(dir);
    // A task of a job that has ended (or never started) must not make its staging folder
    // again; `store_task` then checks the job's heartbeat.
    if !staging.is_dir() {
        return Err(DatasetError::input(format!(
            "{}: job {job_id} is not running there (committed, aborted, or never started: no staging folder {JOB_STAGING_PREFIX}{job_id}; start it with start_job)",
            dir.display(),
        )));
    }
    // Tasks renew the staging folder's marker while they write too: the folder stays fresh
    // for as long as any of its tasks runs, whatever becomes of the process that started
    // the job.
    let _beat = Heartbeat::start(&staging, DEFAULT_HEARTBEAT)?;
    store_task(
        input,
        &store,
        Some(&staging),
        job_id,
        task,
        rows,
        opts,
        progress,
        pipelined,
    )
}

/// Commits job `job_id` from its tasks' reports (in any order; one per task): the shards
/// they name (moved into `dir` by the tasks) become the next version, with the index when
/// asked, by the commit that stores use (an exclusive create of the version file, the
/// manifest mirrored last and atomically); every other shard of the job's task attempts
/// (failed, retried, speculative) is removed, and so are the staging folder and the job's
/// heartbeat. KV keys written by several tasks: `fail` refuses the commit (nothing is
/// committed; abort the job), `lastWin` keeps the highest task's tensor and rewrites the
/// shards that held the others without them. `mode` is checked here, against the folder as
/// it is at commit time.
///
/// # Errors
///
/// - [`DatasetError::Option`]: `job_id` is not 1 to 64 characters of `[A-Za-z0-9_-]`, or `opts`
///   break a rule.
/// - [`DatasetError::Input`]: the reports do not fit the job (a task reported twice, a shard
///   missing from the staging folder, one column's samples of two dtypes or shapes, an appended
///   schema that differs from the dataset's).
/// - [`DatasetError::Exists`]: the folder holds a dataset and the mode is
///   [`WriteMode::ErrorIfExists`].
/// - [`DatasetError::Conflict`]: other writers kept committing first, or a `dataset clean` took
///   the job's shards.
/// - [`DatasetError::DuplicateKeyInTasks`]: two tasks wrote one KV tensor key and
///   `duplicatesStrategy` is `fail` (nothing is committed: abort the job).
/// - [`DatasetError::Empty`]: the tasks wrote no rows.
/// - [`DatasetError::Io`], [`DatasetError::Tensor`]: a file cannot be written, or the commit
///   lock is not had in time.
pub fn commit_job(
    dir: &Path,
    job_id: &str,
    reports: Vec<TaskReport>,
    opts: &WriteOptions,
    mode: WriteMode,
) -> Result<Manifest> {
    commit_job_with(
        dir,
        job_id,
        reports,
        opts,
        &JobOptions::new().with_mode(mode),
    )
}

/// [`commit_job`] with the mode, the lock's timeout and the retention of `job`.
///
/// # Errors
///
/// - [`DatasetError::Option`]: `job_id` is not 1 to 64 characters of `[A-Za-z0-9_-]`, or `opts`
///   break a rule.
/// - [`DatasetError::Input`]: the reports do not fit the job (a task reported twice, a shard
///   missing from the staging folder, one column's samples of two dtypes or shapes, an appended
///   schema that differs from the dataset's).
/// - [`DatasetError::Exists`]: the folder holds a dataset and the mode is
///   [`WriteMode::ErrorIfExists`].
/// - [`DatasetError::Conflict`]: other writers kept committing first, or a `dataset clean` took
///   the job's shards.
/// - [`DatasetError::DuplicateKeyInTasks`]: two tasks wrote one KV tensor key and
///   `duplicatesStrategy` is `fail` (nothing is committed: abort the job).
/// - [`DatasetError::Empty`]: the tasks wrote no rows.
/// - [`DatasetError::Io`], [`DatasetError::Tensor`]: a file cannot be written, or the commit
///   lock is not had in time.
pub fn commit_job_with(
    dir: &Path,
    job_id: &str,
    reports: Vec<TaskReport>,
    opts: &WriteOptions,
    job: &JobOptions,
) -> Result<Manifest> {
    let staging = job_staging(dir, job_id)?;
    opts.check()?;
    let store = LocalStore::new(dir);
    if store.get(&heartbeat_key(job_id))?.is_some() {
        // A user's files named like shards in a folder that holds no dataset (the job's
        // own shards are marked as its attempts'), and mode error.
        crate::write::entry::refuse_early(dir, job.mode)?;
        // Another writer's commit (safetensors-spark's append) becomes a version first.
        crate::store::adopt::adopt_store(&store)?;
    }
    // The commit's own temporary files (KV lastWin rewrites) in the staging folder, so that
    // they move in by a rename.
    let temp_in = staging.is_dir().then_some(staging.as_path());
    let manifest = commit_store_job(&store, temp_in, job_id, reports, opts, job)?;
    let _ = std::fs::remove_dir_all(&staging);
    // Retired shards, old versions and staging of dead writers older than the retention.
    let retain = job.retain();
    let _ = crate::commit::retention::clean_with(
        dir,
        retain,
        retain.max(crate::commit::retention::STAGING_FLOOR),
        job.lock_timeout(),
    );
    Ok(manifest)
}

/// Removes every shard job `job_id`'s tasks wrote that no version lists, its staging folder
/// and its heartbeat. Committed files are never touched; aborting a job that never started
/// or has ended is fine. A task of the job still running stops at its next shard.
///
/// # Errors
///
/// - [`DatasetError::Option`]: `job_id` is not 1 to 64 characters of `[A-Za-z0-9_-]`.
/// - [`DatasetError::Input`]: `dir` is a URL.
/// - [`DatasetError::Io`], [`DatasetError::Tensor`]: a shard, the heartbeat or the staging
///   folder cannot be removed.
pub fn abort_job(dir: &Path, job_id: &str) -> Result<()> {
    let staging = job_staging(dir, job_id)?;
    if dir.is_dir() {
        abort_store_job(&LocalStore::new(dir), job_id)?;
    }
    match std::fs::remove_dir_all(&staging) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(DatasetError::io(&staging, e)),
        _ => Ok(()),
    }
}
