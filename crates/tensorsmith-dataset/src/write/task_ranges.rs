//! The row ranges of a write's tasks, and the tasks run as threads of one process: batch
//! mode splits whole batches, KV mode rows, into contiguous ranges, so shard paths sort in
//! input order and only the last task has a partial batch.

use crate::error::Result;
use crate::input::files::Input;
use crate::options::{Naming, WriteOptions};
use crate::write::plan::Plan;
use crate::write::task::run_task;
use crate::write::task_context::Ctx;
use crate::write::task_report::TaskReport;
use std::ops::Range;

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
