//! A batch-mode task written from a `DirectPlan`: every `batch_size` rows one shard, each
//! tensor copied file to file from the page ranges that hold its rows, or decoded into the
//! shard (page_cursor.rs); the tail strategy as the reader path applies it (pad: zeros after
//! the rows).

use super::page_cursor::{ColumnCursor, Decoded};
use super::page_plan::DirectPlan;
use crate::error::{DatasetError, Result};
use crate::options::TailStrategy;
use crate::write::shard_record::{note_schema, record_shard, ShardNamer};
use crate::write::task_context::{stopped, Ctx};
use crate::write::task_report::{new_report, TaskReport};
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
    let mut cursors: Vec<ColumnCursor> = (0..plan.columns.len())
        .map(|ci| ColumnCursor::new(plan, ci))
        .collect();
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
        for (ci, ((p, c), cursor)) in ctx
            .plan
            .plans
            .iter()
            .zip(&plan.columns)
            .zip(cursors.iter_mut())
            .enumerate()
        {
            note_schema(&mut out, &p.name, c.cast.to, &c.sample_shape)?;
            let shape: Vec<u64> = std::iter::once(samples)
                .chain(c.sample_shape.iter().copied())
                .collect();
            let zeros = (samples - n) * c.row_bytes;
            if c.copy {
                let mut pieces = plan.pieces(ci, at..at + n);
                if zeros > 0 {
                    pieces.push(Piece::Zeros(zeros));
                }
                w.add(&p.name, c.cast.to, &shape, FilePieces { pieces })?;
            } else {
                let rows = at..at + n;
                w.add(
                    &p.name,
                    c.cast.to,
                    &shape,
                    Decoded {
                        cursor,
                        rows,
                        zeros,
                    },
                )?;
            }
            described.push((p.name.clone(), c.cast.to, shape));
        }
        let name = namer.next();
        let path = ctx.staging.join(&name);
        let mut f = std::fs::File::create(&path).map_err(|e| DatasetError::io(&path, e))?;
        let written = w.write_to_file(&mut f);
        let bytes = match written {
            Ok(b) => b,
            Err(e) => {
                // A page that failed to decode is the error to report, not the shard's.
                return Err(cursors
                    .iter_mut()
                    .find_map(|c| c.err.take())
                    .unwrap_or_else(|| e.in_file(&path).into()));
            }
        };
        record_shard(ctx, &name, described, bytes, samples, &mut out)?;
        let counter = if plan.all_copied() {
            &ctx.progress.direct_shards
        } else {
            &ctx.progress.decoded_shards
        };
        counter.fetch_add(1, Ordering::Relaxed);
        ctx.progress.rows.fetch_add(n, Ordering::Relaxed);
        at += n;
        // Files read to the end free what their readers hold (a remote file's blocks).
        plan.release_before(at);
    }
    Ok(out)
}
