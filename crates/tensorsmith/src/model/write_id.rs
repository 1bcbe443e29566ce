//! One write id per sharded checkpoint (`tensorsmith.write_id` in every shard's `__metadata__`
//! and in the index's `metadata`), so a set whose shards come from different writes (a
//! rewrite killed half way, another tool's shards beside ours) is refused by `validate` and
//! `verify`, naming the odd shards. Sets that carry no id (written by other tools) pass as
//! before.

use crate::error::{Error, ErrorKind, Result};
use crate::model::{Model, INDEX_SUFFIX};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The metadata key of the write id.
pub const WRITE_ID_KEY: &str = "tensorsmith.write_id";

/// A new write id: time, process and a counter, 32 hex digits.
pub fn new_write_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let salt = (u64::from(std::process::id()) << 32) | COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{nanos:016x}{salt:016x}")
}

/// The shard index a local checkpoint was opened through (the index itself, or the one
/// a folder is opened by), if any.
fn index_of(location: &str) -> Option<PathBuf> {
    let p = Path::new(location);
    if location.ends_with(".index.json") {
        return Some(p.to_path_buf());
    }
    if !p.is_dir() {
        return None;
    }
    let mut names: Vec<String> = std::fs::read_dir(p)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(INDEX_SUFFIX))
        .collect();
    names.sort();
    let pick = names
        .iter()
        .find(|n| *n == "model.safetensors.index.json")
        .or_else(|| names.first())?;
    Some(p.join(pick))
}

fn index_write_id(path: &Path) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v.get("metadata")?
        .get(WRITE_ID_KEY)?
        .as_str()
        .map(str::to_owned)
}

/// Checks that every file of `model` (and its local shard index) carries the same write id,
/// or none does.
pub fn check(model: &Model) -> Result<()> {
    if model.files.len() < 2 && !crate::model::is_index(&model.location) {
        return Ok(());
    }
    let mut ids: Vec<(String, Option<String>)> = Vec::new();
    for (i, f) in model.files.iter().enumerate() {
        let id = match model.json_header(i)? {
            Some(h) => serde_json::from_slice::<serde_json::Value>(&h)
                .ok()
                .and_then(|v| {
                    v.get("__metadata__")?
                        .get(WRITE_ID_KEY)?
                        .as_str()
                        .map(str::to_owned)
                }),
            None => None,
        };
        let name = if f.name.is_empty() {
            f.location.clone()
        } else {
            f.name.clone()
        };
        ids.push((name, id));
    }
    let index = index_of(&model.location).filter(|p| p.is_file());
    let index_id = index.as_deref().and_then(index_write_id);
    if index_id.is_none() && ids.iter().all(|(_, id)| id.is_none()) {
        return Ok(());
    }
    // The id the set should have: the index's, else the most common among the shards.
    let expected = index_id.clone().or_else(|| {
        let mut count: BTreeMap<&Option<String>, usize> = BTreeMap::new();
        for (_, id) in &ids {
            *count.entry(id).or_default() += 1;
        }
        count
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .and_then(|(id, _)| id.clone())
    });
    let odd: Vec<String> = ids
        .iter()
        .filter(|(_, id)| *id != expected)
        .map(|(name, id)| format!("{name} ({})", id.as_deref().unwrap_or("no write id")))
        .collect();
    if odd.is_empty() {
        return Ok(());
    }
    let whose = match index_id {
        Some(_) => "the index's",
        None => "most shards'",
    };
    Err(Error::new(ErrorKind::BadShardIndex(format!(
        "shards from different writes: {} disagree with {whose} {WRITE_ID_KEY} {} (a rewrite was interrupted, or another writer changed some shards); write the checkpoint again",
        odd.join(", "),
        expected.as_deref().unwrap_or("(none)")
    )))
    .in_file(Path::new(&model.location)))
}
