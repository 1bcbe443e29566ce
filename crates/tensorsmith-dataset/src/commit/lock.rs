//! The dataset's commit lock, `_tensorsmith/lock`: an exclusive `flock` every commit, clean and
//! repair holds while it reads the current version and publishes the next. Probed when a
//! write starts, so a filesystem that cannot lock is refused before any shard is written.

use crate::error::{DatasetError, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tensorsmith::file_lock::FileLock;

pub use tensorsmith::file_lock::DEFAULT_LOCK_TIMEOUT;

/// The dataset's own folder: the commit lock, versions, index files.
pub const META_DIR: &str = "_tensorsmith";

/// The commit lock file of the dataset in `dir`: `DIR/_tensorsmith/lock`.
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join(META_DIR).join("lock")
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| DatasetError::io(dir, e))
}

fn ensure_meta(dir: &Path) -> Result<PathBuf> {
    let p = lock_path(dir);
    let meta = p.parent().expect("in _tensorsmith");
    std::fs::create_dir_all(meta).map_err(|e| DatasetError::io(meta, e))?;
    Ok(p)
}

/// `op` on the lock file, made first; again (up to 3 times) when `_tensorsmith/` vanished
/// meanwhile: a failed first write removes it ([`remove_unused`]) while this one starts.
fn with_meta<T>(dir: &Path, op: impl Fn(&Path) -> tensorsmith::Result<T>) -> Result<T> {
    let mut tries = 0;
    loop {
        let p = ensure_meta(dir)?;
        match op(&p) {
            Err(_) if tries < 2 && !p.parent().is_some_and(Path::is_dir) => tries += 1,
            r => return Ok(r?),
        }
    }
}

/// Checks that `dir`'s filesystem can lock (creating `_tensorsmith/`).
pub(crate) fn probe(dir: &Path) -> Result<()> {
    with_meta(dir, FileLock::probe)
}

/// Takes `dir`'s commit lock, waiting up to `timeout`.
pub(crate) fn acquire(dir: &Path, timeout: Duration) -> Result<FileLock> {
    with_meta(dir, |p| FileLock::acquire(p, timeout))
}

/// What a write leaves when it fails before committing anything to a folder with no
/// dataset: `_tensorsmith/` with the lock and an empty `jobs/`. Removed under the lock (the
/// lock file last, before the lock is dropped, so a writer waiting on it starts again), then
/// `dir` itself when `remove_dir` (the write made it) and it is empty. Left alone when
/// anything else is there (a dataset, a staging folder, another writer's job marks) or the
/// lock is held. Returns whether `_tensorsmith/` was removed.
pub(crate) fn remove_unused(dir: &Path, remove_dir: bool) -> bool {
    let meta = dir.join(META_DIR);
    if !meta.is_dir() {
        return false;
    }
    let Ok(lock) = FileLock::acquire(&lock_path(dir), Duration::from_millis(200)) else {
        return false;
    };
    let only_ours = std::fs::read_dir(&meta).is_ok_and(|entries| {
        entries.flatten().all(|e| match e.file_name().to_str() {
            Some("lock") => true,
            Some("jobs") => std::fs::read_dir(e.path()).is_ok_and(|mut j| j.next().is_none()),
            _ => false,
        })
    });
    let unused = only_ours
        && !dir.join(crate::manifest::MANIFEST_NAME).exists()
        && crate::commit::staging::staging_folders(dir).is_ok_and(|s| s.is_empty());
    if !unused {
        return false;
    }
    let _ = std::fs::remove_dir(meta.join("jobs"));
    lock.release_and_remove();
    let removed = std::fs::remove_dir(&meta).is_ok();
    if remove_dir {
        let _ = std::fs::remove_dir(dir);
    }
    removed
}
