//! A batch-mode task written from a `DirectPlan`: every `batch_size` rows one shard, each
//! tensor copied file to file from the page ranges that hold its rows; the tail strategy as
//! the reader path applies it (pad: zeros copied after the rows).

use super::page_plan::DirectPlan;
use crate::error::{DatasetError, Result};
use crate::options::TailStrategy;
use crate::shard_record::{note_schema, record_shard, ShardNamer};
use crate::task_context::{stopped, Ctx};
use crate::task_report::{new_report, TaskReport};
use std::ops::Range;
use std::sync::atomic::Ordering;
use tensorsmith::safetensors::{FilePieces, Piece, Writer};

pub(crate) fn batch_task(
    ctx: &Ctx,
    task: u64,
    rows: Range<u64>,
    bs: u64,
    plan: &DirectPlan,
) -> Result<TaskReport> {
    let mut out = new_report(task);
    let mut namer = ShardNamer::new(task);
    let end = rows.end.min(ctx.input.total_rows().unwrap_or(u64::MAX));
    let mut at = rows.start;
    while at < end {
        stopped(ctx, task)?;
        let n = bs.min(end - at);
        out.rows += n;
        if n < bs && ctx.opts.tail_strategy == TailStrategy::Drop {
            ctx.progress.rows.fetch_add(n, Ordering::Relaxed);
            break;
        }
        let samples = if n < bs && ctx.opts.tail_strategy == TailStrategy::Pad {
            bs
        } else {
            n
        };
        let mut w = Writer::new();
        w.record_digests(ctx.opts.digest);
        let mut described = Vec::new();
        for (ci, (p, c)) in ctx.plan.plans.iter().zip(&plan.columns).enumerate() {
            note_schema(&mut out, &p.name, c.dtype, &c.sample_shape)?;
            let mut pieces = plan.pieces(ci, at..at + n);
            if samples > n {
                pieces.push(Piece::Zeros((samples - n) * c.row_bytes));
            }
            let shape: Vec<u64> = std::iter::once(samples)
                .chain(c.sample_shape.iter().copied())
                .collect();
            w.add(&p.name, c.dtype, &shape, FilePieces { pieces })?;
            described.push((p.name.clone(), c.dtype, shape));
        }
        let name = namer.next();
        let path = ctx.staging.join(&name);
        let mut f = std::fs::File::create(&path).map_err(|e| DatasetError::io(&path, e))?;
        let bytes = w.write_to_file(&mut f).map_err(|e| e.in_file(&path))?;
        record_shard(ctx, &name, described, bytes, samples, &mut out)?;
        ctx.progress.direct_shards.fetch_add(1, Ordering::Relaxed);
        ctx.progress.rows.fetch_add(n, Ordering::Relaxed);
        at += n;
    }
    Ok(out)
}
