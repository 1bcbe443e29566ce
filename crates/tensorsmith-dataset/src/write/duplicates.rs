//! Duplicate tensor keys (KV mode) between tasks of a job (each with its own input), found
//! at the commit from the task reports (within one write's tasks: `kv_resolve.rs`): `fail`
//! refuses the commit; `lastWin` keeps the tensor of the highest task (then the later shard)
//! and rewrites every shard holding a superseded tensor without it, so the committed dataset
//! holds one tensor per key.

use crate::error::{DatasetError, Result};
use crate::manifest::{shard_content_digest, ShardInfo};
use crate::options::Duplicates;
use crate::write::task_report::TaskReport;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use tensorsmith::digest::kind_of;
use tensorsmith::safetensors::digest_record::{self, DIGEST_KEY};

/// Resolves keys written by more than one task. `reports` are in task order and their shards
/// are still in `staging`. With lastWin, the losing tensors leave their shards (rewritten in
/// place, atomically), their reports' index and samples; a shard left with no tensor is
/// removed from staging and from its report.
pub(crate) fn across_tasks(
    reports: &mut [TaskReport],
    staging: &Path,
    strategy: Duplicates,
) -> Result<()> {
    // Key -> (report, entry) of the latest writer so far; losers by (report, shard file).
    let mut latest: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut losers: BTreeMap<(usize, String), HashSet<String>> = BTreeMap::new();
    for (ri, r) in reports.iter().enumerate() {
        for (ei, e) in r.index.iter().enumerate() {
            let Some((pr, pe)) = latest.insert(e.tensor_key.as_str(), (ri, ei)) else {
                continue;
            };
            if strategy == Duplicates::Fail {
                return Err(DatasetError::DuplicateKeyInTasks {
                    key: e.tensor_key.clone(),
                    first: reports[pr].task,
                    second: r.task,
                });
            }
            let lost = &reports[pr].index[pe];
            losers
                .entry((pr, lost.file_name.to_string()))
                .or_default()
                .insert(lost.tensor_key.clone());
        }
    }
    for ((ri, shard), gone) in losers {
        let r = &mut reports[ri];
        let before = r.index.iter().filter(|e| *e.file_name == *shard).count() as u64;
        let left = rewrite_without(&staging.join(&shard), &gone)?;
        r.index
            .retain(|e| !(*e.file_name == *shard && gone.contains(&e.tensor_key)));
        let pos = r
            .shards
            .iter()
            .position(|s| s.shard_path == shard)
            .expect("checked: every entry's shard is listed");
        match left {
            None => {
                r.shards.remove(pos);
            }
            Some(bytes) => {
                let s = &mut r.shards[pos];
                // Every row of a KV shard has one tensor per column and a later row with the
                // same key replaces all of them, so rows go in proportion to tensors.
                let kept = before - gone.len() as u64;
                s.samples_count = (s.samples_count * kept / before.max(1)).max(1);
                s.bytes = bytes;
                if s.content_digest.is_some() {
                    s.content_digest = shard_content_digest(&staging.join(&shard))?;
                }
            }
        }
    }
    Ok(())
}

/// Rewrites the shard at `path` without the tensors named in `gone` (through tensorsmith's
/// reader and atomic writer). Returns its new size, or `None` when no tensor is left (the
/// file is then removed).
fn rewrite_without(path: &Path, gone: &HashSet<String>) -> Result<Option<u64>> {
    let left = copy_without(path, path, gone)?;
    if left.is_none() {
        std::fs::remove_file(path).map_err(|e| DatasetError::io(path, e))?;
    }
    Ok(left)
}

/// A committed shard (`from`, never changed: readers of its version may hold it) written
/// as a new shard `to` without the tensors named in `gone`, for a KV append with lastWin
/// whose keys replace committed ones. Returns the new shard's record, `None` when no tensor
/// is left (nothing is written).
pub(crate) fn supersede_in_copy(
    from: &Path,
    old: &ShardInfo,
    to: &Path,
    gone: &HashSet<String>,
) -> Result<Option<ShardInfo>> {
    let before = tensorsmith::safetensors::SafetensorsFile::open(from)?
        .index()
        .tensors
        .len() as u64;
    let Some(bytes) = copy_without(from, to, gone)? else {
        return Ok(None);
    };
    let kept = before.saturating_sub(gone.len() as u64);
    Ok(Some(ShardInfo {
        shard_path: to
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        samples_count: (old.samples_count * kept / before.max(1)).max(1),
        bytes,
        content_digest: match old.content_digest {
            Some(_) => shard_content_digest(to)?,
            None => None,
        },
    }))
}

/// `from` without the tensors in `gone`, written atomically to `to` (which may be `from`).
/// `None`: no tensor left, nothing written.
fn copy_without(from: &Path, to: &Path, gone: &HashSet<String>) -> Result<Option<u64>> {
    let path = to;
    let f = tensorsmith::safetensors::SafetensorsFile::open(from)?;
    let kept: Vec<_> = f
        .index()
        .tensors
        .iter()
        .filter(|t| !gone.contains(&t.name))
        .collect();
    if kept.is_empty() {
        return Ok(None);
    }
    let views = kept
        .iter()
        .map(|t| f.tensor(&t.name))
        .collect::<Result<Vec<_>, _>>()?;
    // A shard written with digests keeps them (recomputed for what is kept).
    let digest = f
        .metadata()
        .get(DIGEST_KEY)
        .and_then(|v| match v {
            tensorsmith::index::MetaValue::Str(s) => digest_record::decode(s),
            _ => None,
        })
        .and_then(|m| m.values().next().map(kind_of));
    let mut w = tensorsmith::safetensors::Writer::new();
    w.record_digests(digest);
    for (t, v) in kept.iter().zip(&views) {
        w.add(&t.name, t.dtype, &t.shape, v.bytes())?;
    }
    Ok(Some(w.write_file(path)?))
}
