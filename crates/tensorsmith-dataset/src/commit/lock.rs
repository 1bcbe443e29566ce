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

/// Checks that `dir`'s filesystem can lock (creating `_tensorsmith/`).
pub(crate) fn probe(dir: &Path) -> Result<()> {
    Ok(FileLock::probe(&ensure_meta(dir)?)?)
}

/// Takes `dir`'s commit lock, waiting up to `timeout`.
pub(crate) fn acquire(dir: &Path, timeout: Duration) -> Result<FileLock> {
    Ok(FileLock::acquire(&ensure_meta(dir)?, timeout)?)
}
