//! The commit itself, under the dataset's commit lock: the write's shards renamed in from
//! staging (listed by no version yet: invisible), the version file created (the commit
//! point), then `dataset_manifest.json` and `_tensor_index.parquet` written from it for
//! readers of the safetensors-spark layout. The old index goes before the new manifest, so a
//! kill between the steps never leaves a manifest beside another version's index. A kill
//! after the commit point leaves the entry files of the previous version: `republish`
//! (the next commit, `dataset verify --repair`, `dataset clean`) writes them again. A kill
//! before the commit point leaves shards no version lists: `_tensorsmith/pending` names
//! them, and the next commit or clean removes them.

use crate::commit_lock::sync_dir;
use crate::commit_prepare::Prepared;
use crate::error::{DatasetError, Result};
use crate::manifest::{ShardInfo, INDEX_NAME, MANIFEST_NAME};
use crate::pending::{pending_path, read_pending};
use crate::versions::{indexes_dir, Snapshot};
use std::collections::HashSet;
use std::path::Path;
use tensorsmith::sink::AtomicFile;

/// Publishes `p` (prepared against the version that is still current: the caller checked,
/// under the lock), moving `shards` from `staging` into `out`. The caller drops `p` once the
/// lock is released (freeing a large manifest takes time).
pub(crate) fn publish(
    out: &Path,
    staging: &Path,
    shards: &[ShardInfo],
    p: &mut Prepared,
) -> Result<()> {
    remove_pending(out)?;
    // Copies of committed shards (KV lastWin) move in beside the write's own.
    let copies = std::mem::take(&mut p.copies.files);
    let shards: Vec<&ShardInfo> = shards.iter().chain(&copies).collect();
    // Not fsynced: a machine crash that loses it only leaves strays for a full clean.
    let pending = pending_path(out);
    let names: Vec<&str> = shards.iter().map(|s| s.shard_path.as_str()).collect();
    std::fs::write(&pending, names.join("\n")).map_err(|e| DatasetError::io(&pending, e))?;
    test_pause(0);
    for s in &shards {
        let from = staging.join(&s.shard_path);
        let to = out.join(&s.shard_path);
        std::fs::rename(&from, &to).map_err(|e| DatasetError::io(&to, e))?;
    }
    sync_dir(out)?;
    test_pause(1);
    if let Some(a) = &p.adopt {
        if !a.publish(out)? {
            return Err(lost_race(out, 0));
        }
    }
    test_pause(2);
    if !p.version.publish(out)? {
        return Err(lost_race(out, p.version.version.version));
    }
    test_pause(3);
    if let Some(i) = &mut p.index {
        i.keep = true;
    }
    let _ = std::fs::remove_file(&pending);
    // Committed. What follows only mirrors the version for the layout's readers.
    remove_top_index(out)?;
    test_pause(4);
    p.manifest.take().expect("published once").commit()?;
    test_pause(5);
    if let Some(i) = &p.index {
        link_top_index(out, &i.name)?;
    }
    Ok(())
}

/// For the kill tests: with `TENSORSMITH_TEST_COMMIT_PAUSE=N`, the commit says so on stderr
/// and stops for a minute at its step `N` (0: before the shards move in, 3: just after the
/// commit point, 5: between the manifest and the index), holding the lock. The object-store
/// commit (store_commit.rs) has steps 10 (shards uploaded, before the commit point) and 13
/// (just after it).
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

fn lost_race(out: &Path, n: u64) -> DatasetError {
    DatasetError::Conflict {
        dir: out.to_path_buf(),
        msg: format!(
            "version {n} was committed by a writer that did not hold the commit lock (an older tensorsmith?); nothing of this write was committed"
        ),
    }
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
