//! Another writer's `dataset_manifest.json` on a store (safetensors-spark appending through
//! s3a) made the next version, as `foreign::adopt` does in a folder: each shard it added
//! checked (present, its size, a valid safetensors header read by range), then the version
//! created only if absent (the store's commit point), then the entry files mirrored.

use crate::error::{DatasetError, Result};
use crate::store::Store;
use crate::store_clean::republish;
use crate::store_versions::{self as sv, version_key};
use crate::versions::{now_ms, to_bytes, Version};
use std::path::PathBuf;

/// Adopts the other writer's manifest of `store` as the next version; `None` when the
/// manifest is the current version's.
pub(crate) fn adopt_store(store: &dyn Store) -> Result<Option<u64>> {
    let Some(snap) = sv::current_unchecked(store)? else {
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
    let mut added_entries = Vec::new();
    let mut names = crate::tensor_index_file::SharedNames::default();
    for s in f
        .manifest
        .shards
        .iter()
        .filter(|s| f.added.contains(&s.shard_path))
    {
        let path = PathBuf::from(store.show(&s.shard_path));
        let not = |msg: String| DatasetError::Corrupt {
            path: path.clone(),
            msg: format!("listed by another writer's dataset_manifest.json, {msg}: not adopted"),
        };
        match sizes.get(&s.shard_path) {
            None => return Err(not("missing".into())),
            Some(&n) if n != s.bytes => {
                return Err(not(format!(
                    "{n} bytes where the manifest says {}",
                    s.bytes
                )))
            }
            Some(_) => {}
        }
        let r = store.open(&s.shard_path)?;
        let index = tensorsmith::safetensors::read_index(&*r, &tensorsmith::OpenOptions::new())
            .map_err(|e| not(format!("not a valid safetensors file ({e})")))?;
        for t in &index.tensors {
            added_entries.push(crate::tensor_index_file::IndexEntry {
                tensor_key: t.name.clone(),
                file_name: names.get(&s.shard_path),
                shape: t.shape.to_vec(),
                dtype: names.get(t.dtype.safetensors_name()),
            });
        }
    }
    let next = f.base + 1;
    // The base's index, less the shards the manifest left out, plus the added shards' tensors
    // (read from their headers above): readers and appends keep an index.
    let index = match sv::index_entries(store, &snap)? {
        Some(mut entries) => {
            let keep: std::collections::HashSet<&str> = f
                .manifest
                .shards
                .iter()
                .map(|s| s.shard_path.as_str())
                .collect();
            entries.retain(|e| keep.contains(&*e.file_name));
            entries.extend(added_entries);
            entries
                .sort_by(|a, b| (&a.file_name, &a.tensor_key).cmp(&(&b.file_name, &b.tensor_key)));
            let name = format!("{next:08}-{}.parquet", uuid::Uuid::new_v4().simple());
            let path = std::env::temp_dir().join(format!(".tensorsmith-adopt-{name}"));
            crate::tensor_index_file::prepare(&path, &entries)?.commit()?;
            let put = store.put_file(&sv::index_key(&name), &path);
            let _ = std::fs::remove_file(&path);
            put?;
            Some(name)
        }
        None => None,
    };
    let v = Version {
        version: next,
        base: Some(f.base),
        committed_ms: now_ms(),
        mode: "adopted".into(),
        manifest: f.manifest,
        index,
    };
    if !store.create(&version_key(next), &to_bytes(&v))? {
        return Err(DatasetError::Conflict {
            dir: PathBuf::from(store.location()),
            msg: format!("version {next} was committed while the other writer's manifest was adopted; nothing was adopted"),
        });
    }
    if let Some(s) = sv::current_unchecked(store)? {
        republish(store, &s)?;
    }
    Ok(Some(next))
}
