//! Writing a dataset: rows split into contiguous ranges, one per task (a worker thread with
//! its own taskId), each task reading its own range and writing its shards into a staging
//! folder; then the commit: shards renamed into the dataset folder, the index written, and
//! the manifest written last, atomically. A failure or a kill before the manifest's rename
//! leaves the previous dataset as it was (its manifest names only its own shards).

use crate::commit::commit;
use crate::error::{DatasetError, Result};
use crate::input::Input;
use crate::job_options::{JobOptions, Progress, WriteMode};
use crate::kv_resolve;
use crate::manifest::Manifest;
use crate::options::{Naming, WriteOptions};
use crate::plan::Plan;
use crate::staging::{Heartbeat, STAGING_PREFIX};
use crate::task::run_task;
use crate::task_context::{with_ctx, Ctx};
use crate::task_report::TaskReport;
use crate::versions::Snapshot;
use std::ops::Range;
use std::path::Path;

/// The checks before anything is written (the commit looks again): an existing dataset in
/// mode error, and a user's files named like shards in a folder that holds no dataset.
fn refuse_early(out: &Path, mode: WriteMode) -> Result<()> {
    let found = match Snapshot::current(out)? {
        Some(_) => true,
        None => crate::outsiders::refuse_unless_committed(out, mode)?,
    };
    if found && mode == WriteMode::ErrorIfExists {
        return Err(DatasetError::Exists(out.to_path_buf()));
    }
    Ok(())
}

/// Writes `input` as a dataset in `out`.
pub fn write_dataset(
    input: &Input,
    out: &Path,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: &Progress,
) -> Result<Manifest> {
    let plan = Plan::new(input, opts)?;
    std::fs::create_dir_all(out).map_err(|e| DatasetError::io(out, e))?;
    remove_stale_staging(out);
    // A filesystem that cannot lock is refused before anything is written.
    crate::commit_lock::probe(out)?;
    // Refused (or read, to fail early on a damaged one) before anything is written; the
    // commit looks again, under its lock.
    // Another writer's manifest is adopted by the commit, not refused here.
    refuse_early(out, job.mode)?;
    let threads = job
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let staging = out.join(format!(
        "{STAGING_PREFIX}{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    // The heartbeat lives until the commit is done: a clean beside this write never takes
    // its staging folder.
    let result = Heartbeat::start(&staging, job.heartbeat()).and_then(|_beat| {
        with_ctx(
            &plan,
            input,
            opts,
            &staging,
            progress,
            !job.reader_only,
            job.pipelined,
            None,
            |ctx| {
                let mut reports = run_tasks(ctx, ctx.input.total_rows(), threads)?;
                if let Naming::Kv { .. } = opts.naming {
                    kv_resolve::resolve(ctx, &mut reports)?;
                }
                Ok(reports)
            },
        )
        .and_then(|reports| commit(out, &staging, reports, opts, job, Some(progress)))
    });
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// The row ranges `write_dataset` gives its `tasks` tasks (at most that many): batch mode
/// splits whole batches, KV mode rows, into contiguous ranges (so shard paths sort in input
/// order, and only the last task has a partial batch). Unknown row counts: one task over
/// everything. A distributed job that runs `write_task_range` on each writes the same shards.
/// The options are checked against the input's schema first (as `write_dataset` does before
/// any task), so a job fails on its driver rather than in every task.
pub fn task_ranges(input: &Input, opts: &WriteOptions, tasks: usize) -> Result<Vec<Range<u64>>> {
    Plan::new(input, opts)?;
    Ok(cut_ranges(input.total_rows(), &opts.naming, tasks))
}

fn cut_ranges(total: Option<u64>, naming: &Naming, threads: usize) -> Vec<Range<u64>> {
    match total {
        None => std::iter::once(0..u64::MAX).collect(),
        Some(0) => vec![],
        Some(n) => {
            let (unit, units) = match naming {
                Naming::Batch(bs) => (*bs, n.div_ceil(*bs)),
                Naming::Kv { .. } => (1, n),
            };
            let t = (threads as u64).clamp(1, units.max(1));
            (0..t)
                .map(|i| {
                    let (a, b) = (i * units / t, (i + 1) * units / t);
                    (a * unit).min(n)..(b * unit).min(n)
                })
                .filter(|r| !r.is_empty())
                .collect()
        }
    }
}

/// Runs the tasks of `cut_ranges` as threads.
pub(crate) fn run_tasks(ctx: &Ctx, total: Option<u64>, threads: usize) -> Result<Vec<TaskReport>> {
    let ranges = cut_ranges(total, &ctx.opts.naming, threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = ranges
            .into_iter()
            .enumerate()
            .map(|(task, range)| s.spawn(move || run_task(ctx, task as u64, range)))
            .collect();
        let mut outs = Vec::new();
        let mut first_err = None;
        for h in handles {
            match h.join().expect("task thread panicked") {
                Ok(o) => outs.push(o),
                Err(e) => {
                    // Only tasks after a failed one stop early, so the first error in task
                    // order is the real error of the earliest range: the same on every run.
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(outs),
        }
    })
}

/// Removes staging folders of writers that are gone (killed before their commit).
fn remove_stale_staging(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(STAGING_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
