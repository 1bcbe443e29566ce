//! A version's index file on a store (`_tensorsmith/index/<name>`, named by the version):
//! read by the readers of versions (store_versions.rs) and by a commit building on a version
//! (commit_base.rs), which must not depend on the versions' readers (they sit above the
//! local commit's files).

use crate::commit::versions::Snapshot;
use crate::error::{DatasetError, Result};
use crate::store::seam::Store;
use crate::tensor_index_file::{self, IndexEntry};
use std::path::PathBuf;

pub(crate) const INDEX_PREFIX: &str = "_tensorsmith/index/";
/// Where a dataset's version files live on a store (store_versions.rs reads them); here so
/// that the local store's test hook names it without depending on the versions' readers.
pub(crate) const VERSIONS_PREFIX: &str = "_tensorsmith/versions/";

pub(crate) fn index_key(name: &str) -> String {
    format!("{INDEX_PREFIX}{name}")
}

/// The index entries of `snap`'s index file (`None`: it has none).
pub(crate) fn index_entries(store: &dyn Store, snap: &Snapshot) -> Result<Option<Vec<IndexEntry>>> {
    let Some(name) = snap.version.index.as_ref().filter(|_| snap.versioned) else {
        return Ok(None);
    };
    let key = index_key(name);
    let path = PathBuf::from(store.show(&key));
    match store.get(&key)? {
        Some(b) => tensor_index_file::read_bytes(b.into(), &path).map(Some),
        None => Err(DatasetError::Corrupt {
            path,
            msg: format!(
                "the index file of version {} is missing",
                snap.version.version
            ),
        }),
    }
}
