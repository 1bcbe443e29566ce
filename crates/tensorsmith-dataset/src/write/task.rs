//! One task: a range of the input's rows written as shards into a staging folder, by the
//! strategy its mode and input allow (Parquet pages copied, the reader's batches, KV), the
//! shards fsynced at its end, and a failure noted so later tasks stop.
//! `write_dataset` runs several tasks as threads; a Spark job runs one per partition.

use crate::error::Result;
use crate::kv::strategy::kv_task;
use crate::options::Naming;
use crate::parquet_direct;
use crate::write::batch_strategy::batch_task;
use crate::write::shard_record::sync_files;
use crate::write::task_context::Ctx;
use crate::write::task_report::TaskReport;
use std::ops::Range;
use std::sync::atomic::Ordering;

/// Runs task `task` over the input rows `rows`.
pub(crate) fn run_task(ctx: &Ctx, task: u64, rows: Range<u64>) -> Result<TaskReport> {
    // Whether the strategy's shards are already on disk: a pipelined task's writer thread
    // fsyncs each shard before it is reported (shard_pipe).
    let mut synced = false;
    let r = match ctx.opts.naming {
        Naming::Batch(bs) => match parquet_direct::plan(ctx, rows.clone()) {
            Ok(Some(p)) => parquet_direct::batch_task(ctx, task, rows, bs, &p),
            // The reader path checks the page CRCs the reader leaves unchecked first.
            Ok(None) => {
                synced = ctx.pipelined;
                parquet_direct::check_range(ctx, rows.clone())
                    .and_then(|()| batch_task(ctx, task, rows, bs))
            }
            Err(e) => Err(e),
        },
        Naming::Kv { ref name_col } => parquet_direct::check_range(ctx, rows.clone())
            .and_then(|()| kv_task(ctx, task, rows, name_col)),
    }
    .and_then(|report| {
        // Shards are written without waiting for the disk; the task's are flushed together
        // at its end, on the machine that wrote them (in a cluster a driver's commit could
        // not flush another node's page cache), before anyone may commit them.
        if !synced && ctx.on_shard.is_none() {
            sync_files(ctx.staging, &report.shards)?;
        }
        Ok(report)
    });
    if r.is_err() {
        ctx.first_failed.fetch_min(task, Ordering::Relaxed);
    }
    r
}
