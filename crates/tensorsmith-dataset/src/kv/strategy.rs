//! KV mode: a tensor per row and column, keyed `<key><kv_separator><column>`, streamed into
//! shards sealed whenever they reach the target size. Each tensor's row and column go into
//! the report beside its index entry: the key list that duplicates are resolved from once
//! the write's tasks are done (`kv_resolve.rs`), so no tensor is held beyond its shard.
//! A key repeated within the shard being filled never reaches a shard twice: with lastWin
//! the earlier tensor leaves the shard (as if never written: its bytes no longer count
//! toward the target, its row no longer counts if nothing else of it is left); with fail
//! the task seals what it has and stops, noting the repeat.

use crate::column::Samples;
use crate::error::{DatasetError, Result};
use crate::kv::keys::{key_of, null_key};
use crate::options::Duplicates;
use crate::write::shard_record::{note_shard, write_tensors, ShardNamer};
use crate::write::task_context::{stopped, Ctx};
use crate::write::task_report::{new_report, TaskReport};
use arrow_array::RecordBatch;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::Ordering;
use tensorsmith::dtype::DType;

/// What a tensor counts toward the target shard size beyond its bytes (its header entry).
pub(crate) const TENSOR_OVERHEAD: u64 = 200;

/// Rows per record batch a KV task reads: a few MiB of 16 KiB samples, so the batch read
/// ahead stays small beside the shard being filled.
const KV_READ_ROWS: usize = 256;

/// The shard being filled: its tensors (key, dtype, shape, bytes in `data`), each one's
/// (row, column), its keys. The tensors' bytes lie end to end in one buffer, kept from shard
/// to shard: no allocation per tensor, and the task's memory is that buffer.
#[derive(Default)]
struct Pending {
    tensors: Vec<(String, DType, Vec<u64>, Range<usize>)>,
    data: Vec<u8>,
    /// Bytes of `data` no tensor points at (tensors a later row replaced).
    dead: usize,
    cells: Vec<(u64, u32)>,
    keys: HashSet<String>,
    bytes: u64,
}

impl Pending {
    /// Rows with a tensor in the shard (cells are in row order).
    fn rows(&self) -> u64 {
        let mut n = 0;
        let mut last = None;
        for c in &self.cells {
            if last != Some(c.0) {
                n += 1;
                last = Some(c.0);
            }
        }
        n
    }

    /// Drops tensor `at` (a later row replaced it): its bytes stay in `data` until dead
    /// bytes outweigh the living, when the living are moved together.
    fn remove(&mut self, at: usize) {
        let (_, _, _, gone) = self.tensors.remove(at);
        self.cells.remove(at);
        self.bytes -= gone.len() as u64 + TENSOR_OVERHEAD;
        self.dead += gone.len();
        if self.dead > self.data.len() / 2 {
            let mut end = 0;
            for t in &mut self.tensors {
                let r = t.3.clone();
                self.data.copy_within(r.clone(), end);
                t.3 = end..end + r.len();
                end += r.len();
            }
            self.data.truncate(end);
            self.dead = 0;
        }
    }

    fn seal(&mut self, ctx: &Ctx, namer: &mut ShardNamer, out: &mut TaskReport) -> Result<()> {
        if self.tensors.is_empty() {
            return Ok(());
        }
        let rows = self.rows();
        let name = namer.next();
        let data = &self.data;
        let tensors = self
            .tensors
            .iter()
            .map(|(k, d, s, r)| (k.as_str(), *d, &s[..], &data[r.clone()]));
        let (bytes, digest) = write_tensors(ctx, &name, tensors, false)?;
        let described = self.tensors.drain(..).map(|(k, d, s, _)| (k, d, s));
        note_shard(ctx, &name, described, bytes, rows, digest, out);
        out.cells.append(&mut self.cells);
        self.data.clear();
        self.dead = 0;
        self.keys.clear();
        self.bytes = 0;
        Ok(())
    }
}

pub(crate) fn kv_task(
    ctx: &Ctx,
    task: u64,
    rows: Range<u64>,
    name_col: &str,
) -> Result<TaskReport> {
    let mut out = new_report(task);
    let mut namer = ShardNamer::new(task);
    let target = ctx.opts.target_shard_bytes();
    let mut p = Pending::default();
    let sep = &ctx.opts.kv_separator;
    let read = ctx.input.read_range(
        rows,
        &ctx.plan.read_cols,
        KV_READ_ROWS,
        &mut |b: &RecordBatch, row0, _| {
            stopped(ctx, task)?;
            let keys = b.column_by_name(name_col).expect("projected");
            for r in 0..b.num_rows() {
                let row = row0 + r as u64;
                let name = key_of(keys.as_ref(), r).ok_or_else(|| null_key(name_col, row))?;
                for (ci, plan) in ctx.plan.plans.iter().enumerate() {
                    // The tensor's bytes go straight onto the end of the shard's buffer.
                    if p.data.capacity() == 0 {
                        p.data.reserve(target.min(1 << 28) as usize);
                    }
                    let start = p.data.len();
                    let mut s = Samples {
                        bytes: std::mem::take(&mut p.data),
                        ..Default::default()
                    };
                    plan.append_rows(b, r..r + 1, row0, &mut s)?;
                    p.data = s.bytes;
                    let key = format!("{name}{sep}{}", plan.name);
                    let range = start..p.data.len();
                    let repeat = match p.keys.insert(key.clone()) {
                        true => None,
                        false => Some(p.tensors.iter().position(|t| t.0 == key).expect("pending")),
                    };
                    if let (Some(at), Duplicates::Fail) = (repeat, ctx.opts.duplicates) {
                        out.repeat = Some((key, p.cells[at].0, row, ci as u32));
                        p.data.truncate(start);
                        p.seal(ctx, &mut namer, &mut out)?;
                        return Err(DatasetError::Stopped);
                    }
                    p.bytes += range.len() as u64 + TENSOR_OVERHEAD;
                    let dtype = s.dtype.expect("sampled");
                    let shape = s.sample_shape.expect("sampled");
                    p.tensors.push((key, dtype, shape, range));
                    p.cells.push((row, ci as u32));
                    if let Some(at) = repeat {
                        // lastWin: the earlier tensor leaves the shard.
                        p.remove(at);
                    }
                }
                out.rows += 1;
                ctx.progress.rows.fetch_add(1, Ordering::Relaxed);
                if p.bytes >= target {
                    p.seal(ctx, &mut namer, &mut out)?;
                }
            }
            Ok(())
        },
    );
    match read {
        Err(DatasetError::Stopped) if out.repeat.is_some() => return Ok(out),
        r => r?,
    }
    p.seal(ctx, &mut namer, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pending shard of tensors `t0..tN`, tensor i `len` bytes of value i.
    fn pending(n: u8, len: usize) -> Pending {
        let mut p = Pending::default();
        for i in 0..n {
            let start = p.data.len();
            p.data.extend(std::iter::repeat_n(i, len));
            p.tensors.push((
                format!("t{i}"),
                DType::U8,
                vec![len as u64],
                start..p.data.len(),
            ));
            p.cells.push((i as u64, 0));
            p.bytes += len as u64 + TENSOR_OVERHEAD;
        }
        p
    }

    fn contents(p: &Pending) -> Vec<(String, Vec<u8>)> {
        let t = p.tensors.iter();
        t.map(|(k, _, _, r)| (k.clone(), p.data[r.clone()].to_vec()))
            .collect()
    }

    #[test]
    fn removed_tensors_are_compacted_away_once_dead_bytes_outweigh_the_living() {
        let mut p = pending(4, 10);
        p.remove(1);
        // 10 dead of 40: left in place.
        assert_eq!((p.dead, p.data.len()), (10, 40));
        assert_eq!(p.bytes, 3 * (10 + TENSOR_OVERHEAD));
        p.remove(0);
        // 20 dead of 40: still not more than half.
        assert_eq!((p.dead, p.data.len()), (20, 40));
        p.remove(0);
        // 30 dead of 40: the living tensor moves to the front.
        assert_eq!((p.dead, p.data.len()), (0, 10));
        assert_eq!(contents(&p), vec![("t3".to_string(), vec![3; 10])]);
        assert_eq!(p.cells, vec![(3, 0)]);
    }

    #[test]
    fn compaction_keeps_every_living_tensor_in_order() {
        let mut p = pending(6, 7);
        // t4, t1, t0, then t5 (at 2 of t2 t3 t5) leave.
        for at in [4, 1, 0, 2] {
            p.remove(at);
        }
        assert_eq!(
            contents(&p),
            vec![
                ("t2".to_string(), vec![2; 7]),
                ("t3".to_string(), vec![3; 7])
            ]
        );
        assert_eq!((p.dead, p.data.len()), (0, 14));
    }
}
