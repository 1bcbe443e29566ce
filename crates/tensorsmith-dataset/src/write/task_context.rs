//! What the tasks of one write share (`Ctx`): input, options, plan, staging folder, progress
//! counters and the first failed task. Built once per write by `with_ctx`; `stopped` is how a
//! task learns that an earlier one failed.

use crate::error::{DatasetError, Result};
use crate::input::files::Input;
use crate::options::WriteOptions;
use crate::write::job_options::Progress;
use crate::write::plan::Plan;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Runs `f` with the context the tasks of one write share, no task failed yet.
#[allow(clippy::too_many_arguments)]
pub(crate) fn with_ctx<T>(
    plan: &Plan,
    input: &Input,
    opts: &WriteOptions,
    staging: &Path,
    progress: &Progress,
    direct: bool,
    pipelined: bool,
    on_shard: Option<&(dyn Fn(&str) + Sync)>,
    f: impl FnOnce(&Ctx) -> Result<T>,
) -> Result<T> {
    let first_failed = AtomicU64::new(u64::MAX);
    let ctx = Ctx {
        input,
        opts,
        plan,
        staging,
        progress,
        first_failed: &first_failed,
        direct,
        pipelined,
        on_shard,
    };
    f(&ctx)
}

/// What every task of one write shares.
pub(crate) struct Ctx<'a> {
    pub input: &'a Input,
    pub opts: &'a WriteOptions,
    pub plan: &'a Plan,
    pub staging: &'a Path,
    pub progress: &'a Progress,
    /// The lowest task number that failed (`u64::MAX`: none). Tasks after it stop early;
    /// tasks before it run on, so the error reported is always the first in input order.
    pub first_failed: &'a AtomicU64,
    /// Batch mode may copy shards straight from Parquet pages (parquet_direct).
    pub direct: bool,
    /// Batch-mode shards are written and fsynced on a thread of their own while the task
    /// fills the next (`shard_pipe`): for tasks fed by a stream that costs its producer time
    /// (a Spark task).
    pub pipelined: bool,
    /// Called with each shard's name once it is complete in staging (batch mode on an object
    /// store: uploaded at once, store_upload.rs); such shards are not fsynced at the task's
    /// end, and may be gone from staging by then.
    pub on_shard: Option<&'a (dyn Fn(&str) + Sync)>,
}

/// Rows per record batch a task reads (batch mode: at most one shard's).
pub(crate) const READ_BATCH_ROWS: usize = 1024;

/// An error once a task before `task` has failed: later tasks stop early.
pub(crate) fn stopped(ctx: &Ctx, task: u64) -> Result<()> {
    if ctx.first_failed.load(Ordering::Relaxed) < task {
        return Err(DatasetError::Stopped);
    }
    Ok(())
}
