//! Where a commit reads the version it builds on (commit_prepare.rs): the store the dataset
//! lives in (a local folder is one, store_local.rs). An append reads the base's index, or each shard's header where the
//! base has no index (`generate_index`), and a KV append with lastWin copies the base shards
//! holding keys it replaces without those keys. Headers are read by range and a shard to
//! copy is fetched into the staging folder first (a folder's is read in place) (the copy needs every byte of it
//! but the replaced tensors, and reads it mapped, so its memory stays bounded).

use crate::commit::versions::Snapshot;
use crate::error::{DatasetError, Result};
use crate::manifest::ShardInfo;
use crate::store::index;
use crate::store::seam::Store;
use crate::tensor_index_file::{self, IndexEntry, SharedNames};
use crate::write::duplicates::supersede_in_copy;
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

/// The store holding the base version (S3, Azure, GCS, or a local folder: store_local.rs).
#[derive(Clone, Copy)]
pub(crate) struct BaseAt<'a>(pub &'a dyn Store);

/// Bytes fetched per read when a base shard is copied down from a store.
const FETCH: u64 = 8 << 20;

impl BaseAt<'_> {
    /// The base version's index entries, `None` when it has no index.
    pub fn index_entries(&self, b: &Snapshot) -> Result<Option<Vec<IndexEntry>>> {
        let BaseAt(store) = self;
        index::index_entries(*store, b)
    }

    /// The index entries of `shards`, from their headers.
    pub fn entries_from_headers(&self, shards: &[ShardInfo]) -> Result<Vec<IndexEntry>> {
        let BaseAt(store) = *self;
        let keys: Vec<&str> = shards.iter().map(|s| s.shard_path.as_str()).collect();
        let mut out = Vec::new();
        let mut names = SharedNames::default();
        for (key, h) in keys.iter().zip(crate::store::seam::headers(store, &keys)) {
            tensor_index_file::entries_of(&h?, key, &mut names, &mut out);
        }
        Ok(out)
    }

    /// The base shard `s` written to `to` without the tensors in `gone` (`None`: none left,
    /// nothing written). The base shard itself is never changed.
    pub fn copy_without(
        &self,
        s: &ShardInfo,
        to: &Path,
        gone: &HashSet<String>,
    ) -> Result<Option<ShardInfo>> {
        let BaseAt(store) = *self;
        // A folder's shard is read in place.
        if let Some(path) = store.local_file(&s.shard_path) {
            return supersede_in_copy(&path, s, to, gone);
        }
        let local = to.with_extension("base");
        let copied = fetch(store, &s.shard_path, &local)
            .and_then(|()| supersede_in_copy(&local, s, to, gone));
        let _ = std::fs::remove_file(&local);
        copied
    }
}

/// The object `key` of `store` written to the local file `to`, a block at a time.
fn fetch(store: &dyn Store, key: &str, to: &Path) -> Result<()> {
    let r = store.open(key)?;
    let mut f = std::fs::File::create(to).map_err(|e| DatasetError::io(to, e))?;
    let mut at = 0;
    while at < r.len() {
        let end = (at + FETCH).min(r.len());
        let bytes = r.read(at..end)?;
        f.write_all(&bytes).map_err(|e| DatasetError::io(to, e))?;
        at = end;
    }
    Ok(())
}
