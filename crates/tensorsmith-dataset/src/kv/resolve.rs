//! KV duplicate keys within one write (the threads of `write_dataset`, or one task of a job),
//! found after its tasks have streamed their rows into shards, from their key lists: each
//! report's index entries with the input row and column of each (`TaskReport::cells`), in
//! input order. `fail`: the first key written twice, as the error a pass over the key
//! column before the write gave (same key, same rows). `lastWin`: a task holding a
//! superseded tensor has its shards rewritten from the first one holding one, by the KV
//! strategy's sealing rule over the tensors that stay, so the staged shards are exactly
//! those a write that never saw the superseded tensors would have made. The kept tensors are
//! copied file to file: memory holds the shards' headers, no tensor.
//! Keys written by different tasks of a job meet at the commit (`duplicates.rs`).

use crate::error::{DatasetError, Result};
use crate::kv::strategy::TENSOR_OVERHEAD;
use crate::options::Duplicates;
use crate::write::shard_record::{record_shard, sync_files, ShardNamer};
use crate::write::task_context::Ctx;
use crate::write::task_report::TaskReport;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::atomic::Ordering;
use tensorsmith::bytes::Backend;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::{FilePieces, Piece, SafetensorsFile};
use tensorsmith::OpenOptions;

/// Resolves duplicate keys across `reports` (KV tasks of one write, in task order, rows in
/// input order). A KV report's sample schemas stay empty: the commit reads each key's dtype
/// and shape from its index entry, so a write holds them once.
pub(crate) fn resolve(ctx: &Ctx, reports: &mut [TaskReport]) -> Result<()> {
    let superseded = find(reports, ctx.opts.duplicates)?;
    for (r, gone) in reports.iter_mut().zip(superseded) {
        if !gone.is_empty() {
            repack(ctx, r, &gone)?;
        }
    }
    Ok(())
}

/// Per report, the entries a later one with the same key supersedes. With `fail`, the
/// first repeated key in input order is the error: the first repeat between shards, or a
/// repeat within a shard where a task stopped (`TaskReport::repeat`), whichever comes first.
fn find(reports: &[TaskReport], strategy: Duplicates) -> Result<Vec<BTreeSet<usize>>> {
    let mut latest: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut gone = vec![BTreeSet::new(); reports.len()];
    // (second row, column, key, first row) of the first repeat in input order.
    let mut first: Option<(u64, u32, String, u64)> = None;
    'scan: for (ri, r) in reports.iter().enumerate() {
        for (ei, e) in r.index.iter().enumerate() {
            let Some((pr, pe)) = latest.insert(e.tensor_key.as_str(), (ri, ei)) else {
                continue;
            };
            match strategy {
                Duplicates::Fail => {
                    let (row, ci) = r.cells[ei];
                    let prev = reports[pr].cells[pe].0;
                    first = Some((row, ci, e.tensor_key.clone(), prev));
                    break 'scan;
                }
                Duplicates::LastWin => {
                    gone[pr].insert(pe);
                }
            }
        }
    }
    let stopped = reports
        .iter()
        .filter_map(|r| r.repeat.clone())
        .map(|(key, prev, row, ci)| (row, ci, key, prev));
    match first.into_iter().chain(stopped).min() {
        Some((second, _, key, first)) => Err(DatasetError::DuplicateKey { key, first, second }),
        None => Ok(gone),
    }
}

/// A tensor of a new shard: its key, dtype, shape and where its bytes are (old shard,
/// byte range).
type Moved = (String, DType, Vec<u64>, usize, Range<u64>);

/// Rewrites `r`'s shards from the first holding an entry of `gone` without those entries,
/// sealed by the KV strategy's rule. The kept tensors are copied file to file from the old
/// shards (`copy_file_range`): nothing passes through memory but the shards' headers.
fn repack(ctx: &Ctx, r: &mut TaskReport, gone: &BTreeSet<usize>) -> Result<()> {
    let first_gone = *gone.first().expect("not empty");
    let first_shard = r
        .shards
        .iter()
        .position(|s| *s.shard_path == *r.index[first_gone].file_name)
        .expect("every entry's shard is reported");
    let e0 = r
        .index
        .iter()
        .position(|e| *e.file_name == *r.shards[first_shard].shard_path)
        .expect("found above");
    let mut namer =
        ShardNamer::resume(r.task, &r.shards[first_shard].shard_path).expect("the task named it");
    // The old shards move aside (their names are the new shards' names), are read from
    // there, and are removed once the new ones are written.
    let old_shards = r.shards.split_off(first_shard);
    let old_index = r.index.split_off(e0);
    let old_cells = r.cells.split_off(e0);
    let opts = OpenOptions::new().with_backend(Backend::Pread);
    let mut old = Vec::new();
    for s in &old_shards {
        let from = ctx.staging.join(&s.shard_path);
        let to = ctx.staging.join(format!("{}.superseded", s.shard_path));
        std::fs::rename(&from, &to).map_err(|e| DatasetError::io(&from, e))?;
        ctx.progress.bytes.fetch_sub(s.bytes, Ordering::Relaxed);
        ctx.progress.shards.fetch_sub(1, Ordering::Relaxed);
        let f = SafetensorsFile::open_with(&to, &opts)?;
        old.push((s.shard_path.as_str(), to, f));
    }
    let target = ctx.opts.target_shard_bytes();
    let mut tensors: Vec<Moved> = Vec::new();
    let mut cells: Vec<(u64, u32)> = Vec::new();
    let (mut shard_rows, mut shard_bytes) = (0u64, 0u64);
    let mut seal = |tensors: &mut Vec<Moved>,
                    cells: &mut Vec<(u64, u32)>,
                    shard_rows: u64,
                    r: &mut TaskReport|
     -> Result<()> {
        let mut w = tensorsmith::safetensors::Writer::new();
        w.record_digests(ctx.opts.digest);
        let mut described = Vec::new();
        for (key, dtype, shape, si, range) in tensors.drain(..) {
            let file = old[si].2.source().file();
            let pieces = vec![Piece::Range(file, range)];
            w.add(&key, dtype, &shape, FilePieces { pieces })?;
            described.push((key, dtype, shape));
        }
        let name = namer.next();
        let path = ctx.staging.join(&name);
        let mut f = std::fs::File::create(&path).map_err(|e| DatasetError::io(&path, e))?;
        let bytes = w.write_to_file(&mut f).map_err(|e| e.in_file(&path))?;
        record_shard(ctx, &name, described, bytes, shard_rows, r)?;
        r.cells.append(cells);
        Ok(())
    };
    let mut row: Option<u64> = None;
    let mut row_wrote = false;
    for (i, (e, cell)) in old_index.iter().zip(&old_cells).enumerate() {
        if row.is_some_and(|w| w != cell.0) {
            // The end of a row: counted if it kept a tensor; the shard sealed at the target.
            shard_rows += u64::from(row_wrote);
            row_wrote = false;
            if shard_bytes >= target {
                seal(&mut tensors, &mut cells, shard_rows, r)?;
                (shard_rows, shard_bytes) = (0, 0);
            }
        }
        row = Some(cell.0);
        if gone.contains(&(e0 + i)) {
            continue;
        }
        let si = old
            .iter()
            .position(|o| *o.0 == *e.file_name)
            .expect("every entry's shard is reported");
        let info = old[si].2.info(&e.tensor_key)?;
        let range = info.data_range();
        shard_bytes += range.end - range.start + TENSOR_OVERHEAD;
        tensors.push((
            e.tensor_key.clone(),
            info.dtype,
            info.shape.to_vec(),
            si,
            range,
        ));
        cells.push(*cell);
        row_wrote = true;
    }
    shard_rows += u64::from(row_wrote);
    if !tensors.is_empty() {
        seal(&mut tensors, &mut cells, shard_rows, r)?;
    }
    let aside: Vec<_> = old.into_iter().map(|o| o.1).collect();
    sync_files(ctx.staging, &r.shards[first_shard..])?;
    for p in aside {
        std::fs::remove_file(&p).map_err(|e| DatasetError::io(&p, e))?;
    }
    Ok(())
}
