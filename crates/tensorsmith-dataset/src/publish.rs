//! A local folder's entry files, `dataset_manifest.json` and `_tensor_index.parquet`, as the
//! mirror of its current version for readers of the safetensors-spark layout: whether they
//! mirror it (`is_published`) and written again when they do not (`republish`: the repair of
//! a commit killed after its commit point, by `dataset verify --repair`, `dataset clean` and
//! the adoption of another writer's manifest). Also `remove_pending`: the shards that a
//! commit of the lock protocol (tensorsmith before the one store protocol) moved in and was
//! killed before publishing, named by `_tensorsmith/pending`; and the commit's test pauses.

use crate::commit_lock::sync_dir;
use crate::error::{DatasetError, Result};
use crate::manifest::{INDEX_NAME, MANIFEST_NAME};
use crate::pending::{pending_path, read_pending};
use crate::versions::{indexes_dir, Snapshot};
use std::collections::HashSet;
use std::path::Path;
use tensorsmith::sink::AtomicFile;

/// For the kill tests: with `TENSORSMITH_TEST_COMMIT_PAUSE=N`, the commit (store_commit.rs)
/// says so on stderr and stops for a minute at its step `N`: 10 (shards moved in or
/// uploaded, before the commit point) or 13 (just after it).
pub(crate) fn test_pause(step: u32) {
    static AT: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| {
        std::env::var("TENSORSMITH_TEST_COMMIT_PAUSE")
            .ok()
            .and_then(|s| s.parse().ok())
    });
    if *at == Some(step) {
        eprintln!("TENSORSMITH_TEST_PAUSED at commit step {step}");
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
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

fn remove_top_index(out: &Path) -> Result<()> {
    let path = out.join(INDEX_NAME);
    match std::fs::remove_file(&path) {
        Ok(()) => sync_dir(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(DatasetError::io(&path, e)),
    }
}

/// `_tensor_index.parquet` as a hard link of the version's index file (renamed into place).
fn link_top_index(out: &Path, name: &str) -> Result<()> {
    let from = indexes_dir(out).join(name);
    let tmp = out.join(format!(
        ".{INDEX_NAME}.{}.tmp",
        uuid::Uuid::new_v4().simple()
    ));
    if std::fs::hard_link(&from, &tmp).is_err() {
        std::fs::copy(&from, &tmp).map_err(|e| DatasetError::io(&tmp, e))?;
    }
    let to = out.join(INDEX_NAME);
    std::fs::rename(&tmp, &to).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        DatasetError::io(&to, e)
    })?;
    sync_dir(out)
}

/// Whether `dataset_manifest.json` (and the index) mirror `snap`.
pub(crate) fn is_published(out: &Path, snap: &Snapshot) -> bool {
    let manifest_ok = std::fs::read(out.join(MANIFEST_NAME))
        .is_ok_and(|b| b == snap.manifest().to_json().as_bytes());
    let index_ok = match &snap.version.index {
        Some(name) => same_file(&indexes_dir(out).join(name), &out.join(INDEX_NAME)),
        None => !out.join(INDEX_NAME).exists(),
    };
    manifest_ok && index_ok
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Writes `dataset_manifest.json` and the index again from `snap` (a version file), when
/// they do not mirror it: the repair of a commit killed after its commit point. The caller
/// holds the commit lock. Returns whether anything was written.
pub(crate) fn republish(out: &Path, snap: &Snapshot) -> Result<bool> {
    if !snap.versioned || is_published(out, snap) {
        return Ok(false);
    }
    remove_top_index(out)?;
    let mpath = out.join(MANIFEST_NAME);
    let mut f = AtomicFile::create(&mpath)?;
    std::io::Write::write_all(&mut f, snap.manifest().to_json().as_bytes())
        .map_err(|e| DatasetError::io(&mpath, e))?;
    f.commit()?;
    if let Some(name) = &snap.version.index {
        link_top_index(out, name)?;
    }
    Ok(true)
}
