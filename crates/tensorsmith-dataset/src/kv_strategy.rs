//! KV mode: a tensor per row and column, keyed `<key><kv_separator><column>`, cells a later
//! duplicate key supersedes skipped, and a shard sealed whenever it reaches the target size.

use crate::column::Samples;
use crate::error::Result;
use crate::kv_keys::{key_of, null_key};
use crate::shard_record::{note_sample, write_shard, ShardNamer};
use crate::task_context::{stopped, Ctx, READ_BATCH_ROWS};
use crate::task_report::{new_report, TaskReport};
use arrow_array::RecordBatch;
use std::ops::Range;
use std::sync::atomic::Ordering;

pub(crate) fn kv_task(
    ctx: &Ctx,
    task: u64,
    rows: Range<u64>,
    name_col: &str,
) -> Result<TaskReport> {
    let mut out = new_report(task);
    let mut namer = ShardNamer::new(task);
    let target = ctx.opts.target_shard_bytes();
    let mut tensors: Vec<(String, Samples, Vec<u64>)> = Vec::new();
    let mut shard_rows = 0u64;
    let mut shard_bytes = 0u64;
    let sep = &ctx.opts.kv_separator;
    let mut seal = |tensors: Vec<(String, Samples, Vec<u64>)>,
                    shard_rows: u64,
                    out: &mut TaskReport|
     -> Result<()> {
        for (k, s, _) in &tensors {
            note_sample(out, k, s)?;
        }
        write_shard(ctx, &namer.next(), tensors, shard_rows, out).map(drop)
    };
    ctx.input.read_range(
        rows,
        &ctx.plan.read_cols,
        READ_BATCH_ROWS,
        &mut |b: &RecordBatch, row0, _| {
            stopped(ctx, task)?;
            let keys = b.column_by_name(name_col).expect("projected");
            for r in 0..b.num_rows() {
                let row = row0 + r as u64;
                let name = key_of(keys.as_ref(), r).ok_or_else(|| null_key(name_col, row))?;
                let mut wrote = false;
                for (ci, plan) in ctx.plan.plans.iter().enumerate() {
                    if ctx.superseded.contains(&(row, ci)) {
                        continue;
                    }
                    let mut s = Samples::default();
                    plan.append_rows(b, r..r + 1, row0, &mut s)?;
                    let key = format!("{name}{sep}{}", plan.name);
                    shard_bytes += s.bytes.len() as u64 + 200;
                    let shape = s.sample_shape.clone().expect("sampled");
                    tensors.push((key, s, shape));
                    wrote = true;
                }
                out.rows += 1;
                ctx.progress.rows.fetch_add(1, Ordering::Relaxed);
                if wrote {
                    shard_rows += 1;
                }
                if shard_bytes >= target {
                    seal(std::mem::take(&mut tensors), shard_rows, &mut out)?;
                    shard_rows = 0;
                    shard_bytes = 0;
                }
            }
            Ok(())
        },
    )?;
    if !tensors.is_empty() {
        seal(tensors, shard_rows, &mut out)?;
    }
    Ok(out)
}
