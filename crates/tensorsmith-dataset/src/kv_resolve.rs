//! KV duplicate keys within one write (the threads of `write_dataset`, or one task of a job),
//! found after its tasks have streamed their rows into shards, from their key lists: each
//! report's index entries with the input row and column of each (`TaskReport::cells`), in
//! input order. `fail`: the first key written twice, as the error a pass over the key
//! column before the write gave (same key, same rows). `lastWin`: a task holding a
//! superseded tensor has its shards rewritten from the first one holding one, by the KV
//! strategy's sealing rule over the tensors that stay, so the staged shards are exactly
//! those a write that never saw the superseded tensors would have made. Tensors are read
//! back one shard's worth at a time (pread, no map): memory stays one shard.
//! Keys written by different tasks of a job meet at the commit (`duplicates.rs`).

use crate::column::Samples;
use crate::error::{DatasetError, Result};
use crate::kv_strategy::TENSOR_OVERHEAD;
use crate::manifest::TensorSchema;
use crate::options::Duplicates;
use crate::shard_record::{sync_files, write_shard, ShardNamer};
use crate::task_context::Ctx;
use crate::task_report::TaskReport;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use tensorsmith::bytes::Backend;
use tensorsmith::safetensors::SafetensorsFile;
use tensorsmith::OpenOptions;

/// Resolves duplicate keys across `reports` (KV tasks of one write, in task order, rows in
/// input order) and fills in each report's sample schemas.
pub(crate) fn resolve(ctx: &Ctx, reports: &mut [TaskReport]) -> Result<()> {
    let superseded = find(reports, ctx.opts.duplicates)?;
    for (r, gone) in reports.iter_mut().zip(superseded) {
        if !gone.is_empty() {
            repack(ctx, r, &gone)?;
        }
        r.samples = r
            .index
            .iter()
            .map(|e| {
                let schema = TensorSchema {
                    dtype: e.dtype.clone(),
                    shape: e.shape.clone(),
                };
                (e.tensor_key.clone(), schema)
            })
            .collect();
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

/// Rewrites `r`'s shards from the first holding an entry of `gone` without those entries.
fn repack(ctx: &Ctx, r: &mut TaskReport, gone: &BTreeSet<usize>) -> Result<()> {
    let first_gone = *gone.first().expect("not empty");
    let first_shard = r
        .shards
        .iter()
        .position(|s| s.shard_path == r.index[first_gone].file_name)
        .expect("every entry's shard is reported");
    let e0 = r
        .index
        .iter()
        .position(|e| e.file_name == r.shards[first_shard].shard_path)
        .expect("found above");
    let mut namer =
        ShardNamer::resume(r.task, &r.shards[first_shard].shard_path).expect("the task named it");
    // The old shards move aside (their names are the new shards' names), are read from
    // there, and are removed once the new ones are written.
    let old_shards = r.shards.split_off(first_shard);
    let old_index = r.index.split_off(e0);
    let old_cells = r.cells.split_off(e0);
    let mut aside = Vec::new();
    for s in &old_shards {
        let from = ctx.staging.join(&s.shard_path);
        let to = ctx.staging.join(format!("{}.superseded", s.shard_path));
        std::fs::rename(&from, &to).map_err(|e| DatasetError::io(&from, e))?;
        ctx.progress.bytes.fetch_sub(s.bytes, Ordering::Relaxed);
        ctx.progress.shards.fetch_sub(1, Ordering::Relaxed);
        aside.push((s.shard_path.clone(), to));
    }
    let opts = OpenOptions::new().with_backend(Backend::Pread);
    let target = ctx.opts.target_shard_bytes();
    let mut open: Option<(usize, SafetensorsFile)> = None;
    let mut tensors: Vec<(String, Samples, Vec<u64>)> = Vec::new();
    let mut cells: Vec<(u64, u32)> = Vec::new();
    let (mut shard_rows, mut shard_bytes) = (0u64, 0u64);
    let mut row: Option<u64> = None;
    let mut row_wrote = false;
    // The end of a row: counted if it kept a tensor; the shard sealed at the target size.
    let mut end_row = |row_wrote: bool,
                       tensors: &mut Vec<(String, Samples, Vec<u64>)>,
                       cells: &mut Vec<(u64, u32)>,
                       shard_rows: &mut u64,
                       shard_bytes: &mut u64,
                       force: bool,
                       r: &mut TaskReport|
     -> Result<()> {
        if row_wrote {
            *shard_rows += 1;
        }
        if (*shard_bytes >= target || force) && !tensors.is_empty() {
            write_shard(ctx, &namer.next(), std::mem::take(tensors), *shard_rows, r)?;
            r.cells.append(cells);
            *shard_rows = 0;
            *shard_bytes = 0;
        }
        Ok(())
    };
    for (i, (e, cell)) in old_index.iter().zip(&old_cells).enumerate() {
        if row.is_some_and(|w| w != cell.0) {
            end_row(
                row_wrote,
                &mut tensors,
                &mut cells,
                &mut shard_rows,
                &mut shard_bytes,
                false,
                r,
            )?;
            row_wrote = false;
        }
        row = Some(cell.0);
        if gone.contains(&(e0 + i)) {
            continue;
        }
        let si = old_shards
            .iter()
            .position(|s| s.shard_path == e.file_name)
            .expect("every entry's shard is reported");
        if open.as_ref().is_none_or(|(at, _)| *at != si) {
            let f = SafetensorsFile::open_with(&aside[si].1, &opts)?;
            open = Some((si, f));
        }
        let f = &open.as_ref().expect("opened").1;
        let info = f.info(&e.tensor_key)?;
        let s = Samples {
            dtype: Some(info.dtype),
            sample_shape: Some(info.shape.to_vec()),
            count: 1,
            bytes: f.read_vec(&e.tensor_key)?,
            expected: 0,
        };
        shard_bytes += s.bytes.len() as u64 + TENSOR_OVERHEAD;
        tensors.push((e.tensor_key.clone(), s, info.shape.to_vec()));
        cells.push(*cell);
        row_wrote = true;
    }
    end_row(
        row_wrote,
        &mut tensors,
        &mut cells,
        &mut shard_rows,
        &mut shard_bytes,
        true,
        r,
    )?;
    drop(open);
    sync_files(ctx.staging, &r.shards[first_shard..])?;
    for (_, p) in aside {
        std::fs::remove_file(&p).map_err(|e| DatasetError::io(&p, e))?;
    }
    Ok(())
}
