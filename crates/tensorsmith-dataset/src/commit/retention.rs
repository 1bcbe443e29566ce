//! What a dataset keeps for its readers, and for how long: versions other than the current
//! one stay readable (with the shards they list) until they have been superseded for longer
//! than the retention; `clean` then removes them, leaving a marker so their readers get a
//! clear error, with the shards they list that no remaining version lists (retired shards),
//! the shards of commits killed before their commit point (`_tensorsmith/pending` names
//! them), unreferenced index files, and the staging folders of dead writers. A file no
//! version ever listed is never removed, whatever its name. It holds the commit lock, so no commit runs meanwhile, and it
//! repairs the entry files of a commit killed after its commit point.

pub use crate::commit::clean_report::{CleanReport, Kept, RetiredShard, VersionInfo};
use crate::commit::lock::{self, DEFAULT_LOCK_TIMEOUT};
use crate::commit::pending::remove_pending;
use crate::commit::versions::{self, now_ms, Snapshot};
use crate::error::{DatasetError, Result};
use crate::manifest::MANIFEST_NAME;
use crate::store::clean::clean_folder_store;
use crate::store::local::LocalStore;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// A live writer renews its staging heartbeat every minute: the CLI and the commits' own
/// cleans never take a folder idle for less than this for a dead writer's, whatever the
/// retention.
pub const STAGING_FLOOR: Duration = Duration::from_secs(3 * 60);
/// Temporary and unreferenced files of writers are kept at least this long (a writer may
/// still be waiting for the lock with them).
const WRITER_FILES_FLOOR: Duration = Duration::from_secs(3600);

fn mtime_ms(p: &Path) -> Option<u64> {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
}

fn is_dataset(dir: &Path) -> Result<bool> {
    Ok(dir.join(MANIFEST_NAME).exists()
        || !crate::commit::folder_versions::list(dir)?.is_empty()
        || !crate::commit::staging::staging_folders(dir)?.is_empty())
}

/// [`clean_with`] for staging folders idle for longer than `older_than` too, waiting up to
/// 10 minutes for the commit lock.
///
/// # Errors
///
/// - [`DatasetError::Input`]: `dir` is not a folder holding a dataset (or a writer's staging
///   folder).
/// - [`DatasetError::Conflict`]: another writer committed a manifest over the current version;
///   adopt it first.
/// - [`DatasetError::Tensor`]: the commit lock is not had within 10 minutes, or the filesystem
///   cannot lock.
/// - [`DatasetError::Io`]: something cannot be listed or removed.
/// - [`DatasetError::Corrupt`]: a version file is damaged.
pub fn clean(dir: &Path, older_than: Duration) -> Result<CleanReport> {
    clean_with(dir, older_than, older_than, DEFAULT_LOCK_TIMEOUT)
}

/// Removes from `dir` what has been retired or abandoned for longer than `older_than`:
/// versions superseded that long ago (their shards that no remaining version lists, their
/// index files), shards no version lists; and staging folders whose heartbeat is older than
/// `staging_idle`. `Duration::ZERO` removes every version but the current one now. Waits up
/// to `timeout` for the commit lock.
///
/// # Errors
///
/// - [`DatasetError::Input`]: `dir` is not a folder holding a dataset (or a writer's staging
///   folder).
/// - [`DatasetError::Conflict`]: another writer committed a manifest over the current version;
///   adopt it first.
/// - [`DatasetError::Tensor`]: the commit lock is not had within `timeout`, or the filesystem
///   cannot lock.
/// - [`DatasetError::Io`]: something cannot be listed or removed.
/// - [`DatasetError::Corrupt`]: a version file is damaged.
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
        // Only the lock a refused first write left (one killed before it could remove it):
        // removed, and nothing else to do.
        if lock::remove_unused(dir, false) {
            return Ok(CleanReport::default());
        }
        return Err(DatasetError::input(format!(
            "{}: not a dataset folder (no {MANIFEST_NAME}, versions or tensorsmith staging folders)",
            dir.display()
        )));
    }
    let _lock = lock::acquire(dir, timeout)?;
    // Another writer's manifest is adopted or refused before anything is removed: its
    // shards are listed by no version yet.
    crate::commit::folder_versions::current_checked(dir)?;
    let mut staging = Vec::new();
    let mut kept = Vec::new();
    for f in crate::commit::staging::staging_folders(dir)? {
        if f.idle > staging_idle {
            std::fs::remove_dir_all(&f.path).map_err(|e| DatasetError::io(&f.path, e))?;
            staging.push(f.path);
        } else {
            let idle_ms = f.idle.as_millis() as u64;
            kept.push(Kept {
                what: format!(
                    "staging folder {} (a writer's, idle {} s)",
                    f.path.display(),
                    idle_ms / 1000
                ),
                from_ms: now_ms().saturating_sub(idle_ms) + staging_idle.as_millis() as u64 + 1,
            });
        }
    }
    // Shards a commit of the lock's protocol (a distributed job's) moved in and was killed
    // before publishing.
    let pending = remove_pending(dir)?;
    // The rest as on any store: the folder is one (store_local.rs), its lock held here.
    let mut report = clean_folder_store(&LocalStore::locked(dir), older_than)?;
    report.staging = staging;
    kept.append(&mut report.kept);
    report.kept = kept;
    report.shards.extend(pending.into_iter().map(|n| (n, 0)));
    report.shards.sort();
    // Temporary version files of writers killed while writing one.
    let floor = older_than.max(WRITER_FILES_FLOOR).as_millis() as u64;
    let now = now_ms();
    if let Ok(entries) = std::fs::read_dir(versions::versions_dir(dir)) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let old = now.saturating_sub(mtime_ms(&e.path()).unwrap_or(now)) >= floor;
            if name.starts_with('.') && name.ends_with(".tmp") && old {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(report)
}

/// Under the commit lock: `dataset_manifest.json` and the index written again from the
/// current version, when a commit was killed after its commit point. Returns whether it did.
/// A manifest another writer committed is adopted as the next version instead (foreign.rs).
///
/// # Errors
///
/// - Those of [`adopt`](crate::adopt), when another writer's manifest is there.
/// - [`DatasetError::Tensor`]: the commit lock is not had within `timeout`.
/// - [`DatasetError::Io`]: the entry files cannot be written.
/// - [`DatasetError::Corrupt`]: a version file is damaged.
pub fn repair(dir: &Path, timeout: Duration) -> Result<bool> {
    if crate::store::adopt::adopt(dir, timeout)?.is_some() {
        return Ok(true);
    }
    let _lock = lock::acquire(dir, timeout)?;
    match Snapshot::current(dir)? {
        Some(s) => crate::store::clean::republish(&LocalStore::locked(dir), &s),
        None => Ok(false),
    }
}

/// The versions of `dir`, oldest first, and the retired shards (listed only by versions
/// older than the current one) with their bytes.
///
/// # Errors
///
/// - [`DatasetError::Corrupt`]: a version file is damaged.
/// - [`DatasetError::Io`]: the versions cannot be listed or read.
pub fn versions_info(dir: &Path) -> Result<(Vec<VersionInfo>, Vec<RetiredShard>)> {
    crate::store::versions::info(&LocalStore::new(dir))
}
