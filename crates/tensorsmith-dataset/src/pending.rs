//! `_tensorsmith/pending`: the shards a commit is moving into the dataset folder, named before
//! the first moves in, so that those of a commit killed before its commit point are known to
//! be tensorsmith's (publish.rs removes them; nothing else named like a shard ever is).

use crate::error::{DatasetError, Result};
use crate::versions::meta_dir;
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
