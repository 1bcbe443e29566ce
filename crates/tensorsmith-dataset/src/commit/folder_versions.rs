//! A folder's versions, read through the store seam: store_versions.rs on the folder
//! (store_local.rs), as on S3, Azure and GCS. `Snapshot::current` and `Snapshot::at` are
//! defined here, on the folder's store, so that versions.rs (the format) imports no store.

use crate::commit::versions::Snapshot;
use crate::error::Result;
use crate::manifest::MANIFEST_NAME;
use crate::store::local::LocalStore;
use crate::store::versions as sv;
use std::path::Path;

impl Snapshot {
    /// The current snapshot of `dir` as its versions say (the highest version, else the
    /// manifest of a dataset without versions), `None` when it holds no dataset. Readers go
    /// through `current_checked`, which also refuses a manifest another writer committed
    /// over it.
    pub fn current(dir: &Path) -> Result<Option<Snapshot>> {
        sv::current(&LocalStore::new(dir))
    }

    /// Version `n` of `dir` (0 of a dataset without versions: its manifest).
    pub fn at(dir: &Path, n: u64) -> Result<Snapshot> {
        sv::at(&LocalStore::new(dir), n)
    }
}

/// The version numbers in `dir`, ascending (none for a dataset without versions).
pub(crate) fn list(dir: &Path) -> Result<Vec<u64>> {
    Ok(sv::list(&LocalStore::new(dir))?
        .into_iter()
        .map(|l| l.n)
        .collect())
}

/// When `dataset clean` removed version `n` (ms since the epoch), if it did.
pub(crate) fn removed_at(dir: &Path, n: u64) -> Option<u64> {
    sv::removed_at(&LocalStore::new(dir), n)
}

/// What the folder holds now: its highest version, `Some(0)` for a dataset without versions
/// (a manifest only), `None` for no dataset.
pub(crate) fn current_id(dir: &Path) -> Result<Option<u64>> {
    Ok(match list(dir)?.last() {
        Some(&n) => Some(n),
        None => dir.join(MANIFEST_NAME).exists().then_some(0),
    })
}

/// The current snapshot of `dir` for a reader (and `clean`): a manifest another writer
/// committed over it is an error saying what differs and how to adopt it (foreign.rs).
pub(crate) fn current_checked(dir: &Path) -> Result<Option<Snapshot>> {
    sv::current_checked(&LocalStore::new(dir))
}
