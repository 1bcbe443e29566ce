//! Writing one dataset from many processes (a Spark job: tasks on executors, the commit on
//! the driver). Each task writes its rows with `write_task` into the job's staging folder
//! `<dir>/_tensorsmith_job-<job id>/` and returns a `TaskReport` (JSON-serializable, no
//! tensor data); once every task has succeeded, `commit_job` commits the reported shards as
//! `write_dataset` does; if any failed, `abort_job` removes the staging folder and every
//! shard in it. Shards carry their task id: `part-{task:05}-{n:04}-{uuid}.safetensors`.

use crate::commit::commit;
use crate::error::{DatasetError, Result};
use crate::input::Input;
use crate::job_options::{JobOptions, Progress, WriteMode};
use crate::kv_resolve;
use crate::manifest::Manifest;
use crate::options::{Naming, WriteOptions};
use crate::plan::Plan;
use crate::staging::{Heartbeat, DEFAULT_HEARTBEAT, JOB_STAGING_PREFIX};
use crate::task::run_task;
use crate::task_context::with_ctx;
use crate::task_report::TaskReport;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The job's staging folder in `dir`. Job ids are 1 to 64 of `[A-Za-z0-9_-]`, so the folder
/// is always a child of `dir`.
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

/// Starts job `job_id` in `dir` (on the driver, before any task): its staging folder, with a
/// marker whose heartbeat is renewed every `every` until the returned [`Heartbeat`] is
/// dropped or stopped (after the commit or the abort). A driver that dies stops renewing it,
/// and the folder becomes stale: `staging::clean` (and the next commit) removes it.
pub fn start_job(dir: &Path, job_id: &str, every: Duration) -> Result<Heartbeat> {
    let staging = job_staging(dir, job_id)?;
    std::fs::create_dir_all(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    // A filesystem that cannot lock is refused before any task writes.
    crate::commit_lock::probe(dir)?;
    Heartbeat::start(&staging, every)
}

/// Writes the whole of `input` as task `task` of job `job_id`: shards into the job's staging
/// folder in `dir` (both created if missing; several processes may do so at once). Batch
/// mode: a shard every `batch_size` rows, the tail strategy applied to this task's tail;
/// each shard is written and fsynced on a thread of its own while the task fills the next
/// (at most two in flight), so a producer feeding the input (a Spark task's stream) is not
/// kept waiting. KV mode: streamed a shard at a time, duplicate keys within the task
/// resolved as `write_dataset` resolves them (`kv_resolve`); between tasks at the commit.
/// The shards are fsynced before the report is returned.
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
    let plan = Plan::new(input, opts)?;
    std::fs::create_dir_all(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    // Tasks renew the job's heartbeat while they write too: the folder stays fresh for as
    // long as any of its tasks runs, whatever becomes of the process that started the job.
    let _beat = Heartbeat::start(&staging, DEFAULT_HEARTBEAT)?;
    let at = TaskAt {
        plan: &plan,
        input,
        opts,
        staging: &staging,
        progress,
        pipelined,
        on_shard: None,
    };
    at.run(task, rows)
}

/// Where and how one task of a job writes: its shards into `staging` (each handed to
/// `on_shard` once complete, when set).
pub(crate) struct TaskAt<'a> {
    pub plan: &'a Plan,
    pub input: &'a Input,
    pub opts: &'a WriteOptions,
    pub staging: &'a Path,
    pub progress: &'a Progress,
    pub pipelined: bool,
    pub on_shard: Option<&'a (dyn Fn(&str) + Sync)>,
}

impl TaskAt<'_> {
    /// Rows `rows` of the input as task `task`: shards into staging, KV duplicates within
    /// the task resolved.
    pub(crate) fn run(&self, task: u64, rows: Range<u64>) -> Result<TaskReport> {
        with_ctx(
            self.plan,
            self.input,
            self.opts,
            self.staging,
            self.progress,
            true,
            self.pipelined,
            self.on_shard,
            |ctx| {
                let mut report = run_task(ctx, task, rows)?;
                if let Naming::Kv { .. } = self.opts.naming {
                    kv_resolve::resolve(ctx, std::slice::from_mut(&mut report))?;
                }
                Ok(report)
            },
        )
    }
}

/// Commits job `job_id` from its tasks' reports (in any order; one per task): the shards
/// they name are moved from the staging folder into `dir`, the index written when asked, the
/// manifest written last and atomically, and the staging folder removed. KV keys written by
/// several tasks: `fail` refuses the commit (nothing is committed; abort the job), `lastWin`
/// keeps the highest task's tensor and rewrites the shards that held the others without
/// them. `mode` is checked here, against the folder as it is at commit time.
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

/// [`commit_job`] with the mode, the commit lock's timeout and the retention of `job`.
pub fn commit_job_with(
    dir: &Path,
    job_id: &str,
    reports: Vec<TaskReport>,
    opts: &WriteOptions,
    job: &JobOptions,
) -> Result<Manifest> {
    let staging = job_staging(dir, job_id)?;
    opts.check()?;
    let manifest = commit(dir, &staging, reports, opts, job, None)?;
    let _ = std::fs::remove_dir_all(&staging);
    // Retired shards, old versions and staging of dead writers older than the retention.
    let retain = job.retain();
    let _ = crate::retention::clean_with(
        dir,
        retain,
        retain.max(crate::retention::STAGING_FLOOR),
        job.lock_timeout(),
    );
    Ok(manifest)
}

/// Removes job `job_id`'s staging folder and every shard in it. Committed files are never
/// touched; aborting a job with no staging folder (never started, already aborted) is fine.
pub fn abort_job(dir: &Path, job_id: &str) -> Result<()> {
    let staging = job_staging(dir, job_id)?;
    match std::fs::remove_dir_all(&staging) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(DatasetError::io(&staging, e)),
        _ => Ok(()),
    }
}
