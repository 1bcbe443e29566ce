//! Another writer's `dataset_manifest.json` in a store (safetensors-spark appending through
//! s3a, or in a folder: a folder is one more store) made the next version: each shard it
//! added checked (present, its size, a valid safetensors header read by range), then the
//! version created only if absent (the store's commit point), then the entry files mirrored.
//! `adopt` is the folder's, under its lock.

use crate::commit::foreign::ForeignManifest;
use crate::commit::versions::to_bytes;
use crate::error::Result;
use crate::store::clean::republish;
use crate::store::seam::Store;
use crate::store::versions::{self as sv, version_key};
use crate::tensor_index_file::{self, SharedNames};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Adopts the other writer's manifest of `store` as the next version; `None` when the
/// manifest is the current version's.
pub(crate) fn adopt_store(store: &dyn Store) -> Result<Option<u64>> {
    let Some(snap) = sv::current(store)? else {
        return Ok(None);
    };
    let Some(f) = sv::detect(store, &snap)? else {
        return Ok(None);
    };
    let sizes: std::collections::HashMap<String, u64> = store
        .list("part-")?
        .into_iter()
        .map(|e| (e.key, e.size))
        .collect();
    let mut added = Vec::new();
    let mut names = SharedNames::default();
    let shards: Vec<&crate::manifest::ShardInfo> = f.added_shards().collect();
    for s in &shards {
        let path = PathBuf::from(store.show(&s.shard_path));
        match sizes.get(&s.shard_path) {
            None => return Err(ForeignManifest::not_adopted(path, "missing".into())),
            Some(&n) if n != s.bytes => {
                let msg = format!("{n} bytes where the manifest says {}", s.bytes);
                return Err(ForeignManifest::not_adopted(path, msg));
            }
            Some(_) => {}
        }
    }
    let keys: Vec<&str> = shards.iter().map(|s| s.shard_path.as_str()).collect();
    for (key, h) in keys.iter().zip(crate::store::seam::headers(store, &keys)) {
        let index = h.map_err(|e| {
            let path = PathBuf::from(store.show(key));
            ForeignManifest::not_adopted(path, format!("not a valid safetensors file ({e})"))
        })?;
        tensor_index_file::entries_of(&index, key, &mut names, &mut added);
    }
    let index = match sv::index_entries(store, &snap)? {
        Some(base) => {
            let name = tensor_index_file::new_file_name(f.base + 1);
            let path = std::env::temp_dir().join(format!(".tensorsmith-adopt-{name}"));
            tensor_index_file::prepare(&path, &f.index_entries(base, added))?.commit()?;
            let put = store.put_file(&sv::index_key(&name), &path);
            let _ = std::fs::remove_file(&path);
            put?;
            Some(name)
        }
        None => None,
    };
    if !store.create(&version_key(f.base + 1), &to_bytes(&f.version(index)))? {
        return Err(f.lost_race(&store.location()));
    }
    if let Some(s) = sv::current(store)? {
        republish(store, &s)?;
    }
    Ok(Some(f.base + 1))
}

/// Makes another writer's manifest of `dir` the next version (mode `adopted`), each shard it
/// added checked first (`store_adopt` on the folder), under the commit lock (waiting up to
/// `timeout`), so that a clean never runs beside it. Returns the new version, `None` when
/// the manifest is the current version's.
///
/// # Errors
///
/// - [`DatasetError::Corrupt`](crate::DatasetError::Corrupt): a shard the other writer's
///   manifest added is missing or does not match it (nothing is adopted).
/// - [`DatasetError::Conflict`](crate::DatasetError::Conflict): a version was committed while
///   the manifest was being adopted.
/// - [`DatasetError::Tensor`](crate::DatasetError::Tensor): the commit lock is not had within
///   `timeout`.
/// - [`DatasetError::Io`](crate::DatasetError::Io): the new version cannot be written.
pub fn adopt(dir: &Path, timeout: Duration) -> Result<Option<u64>> {
    let _lock = crate::commit::lock::acquire(dir, timeout)?;
    adopt_store(&crate::store::local::LocalStore::locked(dir))
}
