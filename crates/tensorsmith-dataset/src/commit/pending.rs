//! `_tensorsmith/pending`: the shards a commit of the lock protocol (tensorsmith before the
//! one store protocol) was moving into the dataset folder, named before the first moved in,
//! so that those of a commit killed before its commit point are known to be tensorsmith's.
//! Nothing writes it now; `remove_pending` (the local clean) removes those no version lists,
//! and `verify` and the outsiders check still read it, for folders an older tensorsmith left.

use crate::commit::versions::{meta_dir, Snapshot};
use crate::error::{DatasetError, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

pub(crate) fn pending_path(out: &Path) -> PathBuf {
    meta_dir(out).join("pending")
}

/// The pending file's text, `None` when there is none.
pub(crate) fn read_pending(out: &Path) -> Result<Option<String>> {
    let path = pending_path(out);
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(DatasetError::io(&path, e)),
    }
}

/// The shards a killed commit moved into `out` (its next commit or clean removes those no
/// version lists).
pub(crate) fn pending_names(out: &Path) -> Result<HashSet<String>> {
    Ok(read_pending(out)?
        .map(|t| t.lines().map(String::from).collect())
        .unwrap_or_default())
}

/// Under the commit lock: the shards a killed commit moved in but never published (those
/// `_tensorsmith/pending` names that the current version does not list) are removed.
pub(crate) fn remove_pending(out: &Path) -> Result<Vec<String>> {
    let path = pending_path(out);
    let Some(text) = read_pending(out)? else {
        return Ok(vec![]);
    };
    let listed: HashSet<String> = match Snapshot::current(out)? {
        Some(s) => s
            .version
            .manifest
            .shards
            .into_iter()
            .map(|s| s.shard_path)
            .collect(),
        None => HashSet::new(),
    };
    let mut removed = Vec::new();
    for name in text.lines() {
        if crate::manifest::is_shard_file_name(name) && !listed.contains(name) {
            let p = out.join(name);
            if std::fs::remove_file(&p).is_ok() {
                removed.push(name.to_string());
            }
        }
    }
    std::fs::remove_file(&path).map_err(|e| DatasetError::io(&path, e))?;
    Ok(removed)
}
