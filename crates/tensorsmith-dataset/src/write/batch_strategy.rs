//! Batch mode through the Parquet/Arrow reader: every `batch_size` rows of the task's range
//! one shard, each column's samples converted into a buffer reused shard after shard, and the
//! tail strategy applied to the task's last partial batch. Full shards go to a `ShardSink`
//! (pipelined tasks: written on a thread of their own while the next is filled).

use crate::column::Samples;
use crate::error::Result;
use crate::options::TailStrategy;
use crate::write::shard_pipe::{with_shard_sink, ShardSink};
use crate::write::shard_record::{note_sample, ShardNamer};
use crate::write::task_context::{stopped, Ctx, READ_BATCH_ROWS};
use crate::write::task_report::{new_report, TaskReport};
use arrow_array::RecordBatch;
use std::ops::Range;
use std::sync::atomic::Ordering;

pub(crate) fn batch_task(ctx: &Ctx, task: u64, rows: Range<u64>, bs: u64) -> Result<TaskReport> {
    with_shard_sink(ctx, |sink| fill_shards(ctx, task, rows, bs, sink))
}

fn fill_shards(
    ctx: &Ctx,
    task: u64,
    rows: Range<u64>,
    bs: u64,
    sink: &mut ShardSink,
) -> Result<TaskReport> {
    let mut out = new_report(task);
    let mut namer = ShardNamer::new(task);
    let plans = &ctx.plan.plans;
    // One buffer per column, sized for a whole shard by its first sample and reused for
    // every shard of the task.
    let fresh = |pool: &mut Vec<Vec<u8>>| {
        plans
            .iter()
            .map(|_| Samples {
                bytes: pool.pop().unwrap_or_default(),
                ..Samples::expecting(bs)
            })
            .collect::<Vec<_>>()
    };
    let mut pool = Vec::new();
    let mut cur = fresh(&mut pool);
    let mut in_batch = 0u64;
    let mut flush = |cur: Vec<Samples>,
                     n: u64,
                     out: &mut TaskReport,
                     namer: &mut ShardNamer|
     -> Result<Vec<Vec<u8>>> {
        let mut tensors = Vec::new();
        for (plan, s) in plans.iter().zip(cur) {
            note_sample(out, &plan.name, &s)?;
            let shape: Vec<u64> = std::iter::once(n)
                .chain(s.sample_shape.clone().expect("sampled"))
                .collect();
            tensors.push((plan.name.clone(), s, shape));
        }
        sink.submit(namer.next(), tensors, n, out)
    };
    ctx.input.read_range(
        rows,
        &ctx.plan.read_cols,
        READ_BATCH_ROWS.min(bs as usize).max(1),
        &mut |b: &RecordBatch, row0, _| {
            stopped(ctx, task)?;
            let mut r = 0usize;
            while r < b.num_rows() {
                let take = ((bs - in_batch) as usize).min(b.num_rows() - r);
                for (plan, s) in plans.iter().zip(cur.iter_mut()) {
                    plan.append_rows(b, r..r + take, row0, s)?;
                }
                r += take;
                in_batch += take as u64;
                out.rows += take as u64;
                ctx.progress.rows.fetch_add(take as u64, Ordering::Relaxed);
                if in_batch == bs {
                    let full = std::mem::take(&mut cur);
                    pool.extend(flush(full, bs, &mut out, &mut namer)?);
                    cur = fresh(&mut pool);
                    in_batch = 0;
                }
            }
            Ok(())
        },
    )?;
    // The task's tail (write_dataset: only its last task has one).
    if in_batch > 0 {
        match ctx.opts.tail_strategy {
            TailStrategy::Drop => {}
            TailStrategy::Write => drop(flush(cur, in_batch, &mut out, &mut namer)?),
            TailStrategy::Pad => {
                for s in cur.iter_mut() {
                    s.pad_to(bs);
                }
                drop(flush(cur, bs, &mut out, &mut namer)?);
            }
        }
    }
    sink.finish(&mut out)?;
    Ok(out)
}
