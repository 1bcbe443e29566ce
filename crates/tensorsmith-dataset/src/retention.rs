//! What a dataset keeps for its readers, and for how long: versions other than the current
//! one stay readable (with the shards they list) until they have been superseded for longer
//! than the retention; `clean` then removes them, leaving a marker so their readers get a
//! clear error, with the shards they list that no remaining version lists (retired shards),
//! the shards of commits killed before their commit point (`_tensorsmith/pending` names
//! them), unreferenced index files, and the staging folders of dead writers. A file no
//! version ever listed is never removed, whatever its name. It holds the commit lock, so no commit runs meanwhile, and it
//! repairs the entry files of a commit killed after its commit point.

use crate::commit_lock::{self, DEFAULT_LOCK_TIMEOUT};
use crate::error::{DatasetError, Result};
use crate::manifest::{is_index_file_name, is_shard_file_name, MANIFEST_NAME};
use crate::publish::{remove_pending, republish};

use crate::versions::{self, indexes_dir, now_ms, version_path, Snapshot};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

/// A live writer renews its staging heartbeat every minute: the CLI and the commits' own
/// cleans never take a folder idle for less than this for a dead writer's, whatever the
/// retention.
pub const STAGING_FLOOR: Duration = Duration::from_secs(3 * 60);
/// Temporary and unreferenced files of writers are kept at least this long (a writer may
/// still be waiting for the lock with them).
const WRITER_FILES_FLOOR: Duration = Duration::from_secs(3600);

/// What `clean` removed.
#[derive(Debug, Default)]
pub struct CleanReport {
    pub staging: Vec<PathBuf>,
    pub versions: Vec<u64>,
    /// Shard files removed, with their bytes.
    pub shards: Vec<(String, u64)>,
    pub index_files: Vec<String>,
    /// Multipart uploads never completed that were aborted (object stores), as `URL (upload ID)`.
    pub uploads: Vec<String>,
    /// Whether `dataset_manifest.json` was written again from the current version.
    pub repaired: bool,
    /// What the clean left for now because it is too recent, and when a clean with the same
    /// retention will take it.
    pub kept: Vec<Kept>,
}

/// Something `clean` leaves for now: what it is, and from when (milliseconds since the epoch)
/// a clean with the same retention removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub what: String,
    pub from_ms: u64,
}

/// A version of a dataset, as `dataset info` lists it.
#[derive(Debug, Clone)]
pub struct VersionInfo {
    pub version: u64,
    pub mode: String,
    pub committed_ms: u64,
    pub shards: usize,
    pub samples: u64,
    pub bytes: u64,
    /// When a later version replaced it (`None`: the current version).
    pub superseded_ms: Option<u64>,
}

/// A shard that only versions older than the current one list.
#[derive(Debug, Clone)]
pub struct RetiredShard {
    pub shard_path: String,
    pub bytes: u64,
    /// The last version that lists it.
    pub last_version: u64,
}

fn mtime_ms(p: &Path) -> Option<u64> {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
}

fn is_dataset(dir: &Path) -> Result<bool> {
    Ok(dir.join(MANIFEST_NAME).exists()
        || !versions::list(dir)?.is_empty()
        || !crate::staging::staging_folders(dir)?.is_empty())
}

/// [`clean_with`] for staging folders idle for longer than `older_than` too, waiting up to
/// 10 minutes for the commit lock.
pub fn clean(dir: &Path, older_than: Duration) -> Result<CleanReport> {
    clean_with(dir, older_than, older_than, DEFAULT_LOCK_TIMEOUT)
}

/// Removes from `dir` what has been retired or abandoned for longer than `older_than`:
/// versions superseded that long ago (their shards that no remaining version lists, their
/// index files), shards no version lists; and staging folders whose heartbeat is older than
/// `staging_idle`. `Duration::ZERO` removes every version but the current one now. Waits up
/// to `timeout` for the commit lock.
pub fn clean_with(
    dir: &Path,
    older_than: Duration,
    staging_idle: Duration,
    timeout: Duration,
) -> Result<CleanReport> {
    if !dir.is_dir() {
        return Err(DatasetError::input(format!(
            "{}: not a dataset folder (no such directory)",
            dir.display()
        )));
    }
    if !is_dataset(dir)? {
        return Err(DatasetError::input(format!(
            "{}: not a dataset folder (no {MANIFEST_NAME}, versions or tensorsmith staging folders)",
            dir.display()
        )));
    }
    let _lock = commit_lock::acquire(dir, timeout)?;
    // Another writer's manifest is adopted or refused before anything is removed: its
    // shards are listed by no version yet.
    let current = crate::foreign::current_checked(dir)?;
    let mut report = CleanReport::default();
    for f in crate::staging::staging_folders(dir)? {
        if f.idle > staging_idle {
            std::fs::remove_dir_all(&f.path).map_err(|e| DatasetError::io(&f.path, e))?;
            report.staging.push(f.path);
        } else {
            let idle_ms = f.idle.as_millis() as u64;
            report.kept.push(Kept {
                what: format!(
                    "staging folder {} (a writer's, idle {} s)",
                    f.path.display(),
                    idle_ms / 1000
                ),
                from_ms: now_ms().saturating_sub(idle_ms) + staging_idle.as_millis() as u64 + 1,
            });
        }
    }
    for name in remove_pending(dir)? {
        report.shards.push((name, 0));
    }
    let list = versions::list(dir)?;
    let now = now_ms();
    let limit = older_than.as_millis() as u64;
    let mut remove = Vec::new();
    for w in list.windows(2) {
        let superseded = mtime_ms(&version_path(dir, w[1])).unwrap_or(now);
        if now.saturating_sub(superseded) >= limit {
            remove.push(w[0]);
        } else {
            report.kept.push(Kept {
                what: format!("version {} (and the shards only it lists)", w[0]),
                from_ms: superseded + limit,
            });
        }
    }
    let keep_versions: Vec<u64> = list
        .iter()
        .copied()
        .filter(|v| !remove.contains(v))
        .collect();
    // The shards and index files that the remaining versions list. Only a shard that a
    // removed version lists (and no remaining one) is removed: a file no version of this
    // dataset ever listed is not tensorsmith's to delete, whatever its name (a user's own
    // `part-*.safetensors`, another writer's shard). Killed commits name theirs in
    // `_tensorsmith/pending` (removed above).
    let mut keep: HashSet<String> = HashSet::new();
    let mut keep_index: HashSet<String> = HashSet::new();
    if current.as_ref().is_some_and(|s| s.versioned) {
        for &v in &keep_versions {
            let v = versions::read(dir, v)?;
            keep.extend(v.manifest.shards.into_iter().map(|s| s.shard_path));
            keep_index.extend(v.index);
        }
    }
    // Index files of removed versions go now; other unreferenced ones (a writer waiting for
    // the lock, or killed) only past the floor.
    let mut removed_index: HashSet<String> = HashSet::new();
    let mut retired: HashSet<String> = HashSet::new();
    for &v in &remove {
        if let Ok(v) = versions::read(dir, v) {
            removed_index.extend(v.index);
            retired.extend(v.manifest.shards.into_iter().map(|s| s.shard_path));
        }
        versions::remove(dir, v)?;
        report.versions.push(v);
    }
    let mut retired: Vec<String> = retired.into_iter().filter(|n| !keep.contains(n)).collect();
    retired.sort();
    for name in retired {
        if !is_shard_file_name(&name) {
            continue;
        }
        let path = dir.join(&name);
        match std::fs::metadata(&path) {
            Ok(m) => {
                std::fs::remove_file(&path).map_err(|err| DatasetError::io(&path, err))?;
                report.shards.push((name, m.len()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DatasetError::io(&path, e)),
        }
    }
    report.shards.sort();
    let floor = older_than.max(WRITER_FILES_FLOOR).as_millis() as u64;
    let old = |p: &Path| now.saturating_sub(mtime_ms(p).unwrap_or(now)) >= floor;
    if !keep_versions.is_empty() {
        if let Ok(entries) = std::fs::read_dir(indexes_dir(dir)) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let unused = is_index_file_name(&name) && !keep_index.contains(&name);
                if unused && (removed_index.contains(&name) || old(&e.path())) {
                    let _ = std::fs::remove_file(e.path());
                    report.index_files.push(name);
                }
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(versions::versions_dir(dir)) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") && old(&e.path()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    if let Some(s) = Snapshot::current(dir)? {
        report.repaired = republish(dir, &s)?;
    }
    Ok(report)
}

/// Under the commit lock: `dataset_manifest.json` and the index written again from the
/// current version, when a commit was killed after its commit point. Returns whether it did.
/// A manifest another writer committed is adopted as the next version instead (foreign.rs).
pub fn repair(dir: &Path, timeout: Duration) -> Result<bool> {
    if crate::foreign::adopt(dir, timeout)?.is_some() {
        return Ok(true);
    }
    let _lock = commit_lock::acquire(dir, timeout)?;
    match Snapshot::current(dir)? {
        Some(s) => republish(dir, &s),
        None => Ok(false),
    }
}

/// The versions of `dir`, oldest first, and the retired shards (listed only by versions
/// older than the current one) with their bytes.
pub fn versions_info(dir: &Path) -> Result<(Vec<VersionInfo>, Vec<RetiredShard>)> {
    let list = versions::list(dir)?;
    let mut infos = Vec::new();
    let mut last_listed: HashMap<String, (u64, u64)> = HashMap::new();
    for (i, &n) in list.iter().enumerate() {
        let v = versions::read(dir, n)?;
        let superseded_ms = list
            .get(i + 1)
            .map(|&next| mtime_ms(&version_path(dir, next)).unwrap_or(0));
        for s in &v.manifest.shards {
            last_listed.insert(s.shard_path.clone(), (n, s.bytes));
        }
        infos.push(VersionInfo {
            version: n,
            mode: v.mode,
            committed_ms: v.committed_ms,
            shards: v.manifest.shards.len(),
            samples: v.manifest.total_samples,
            bytes: v.manifest.total_bytes,
            superseded_ms,
        });
    }
    let current = list.last().copied().unwrap_or(0);
    let mut retired: Vec<RetiredShard> = last_listed
        .into_iter()
        .filter(|(_, (v, _))| *v != current)
        .map(|(shard_path, (last_version, bytes))| RetiredShard {
            shard_path,
            bytes,
            last_version,
        })
        .collect();
    retired.sort_by(|a, b| a.shard_path.cmp(&b.shard_path));
    Ok((infos, retired))
}
