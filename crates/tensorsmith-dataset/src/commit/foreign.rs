//! What other writers do to a dataset folder. safetensors-spark (and any tool that knows only
//! the layout) commits by rewriting `dataset_manifest.json`; it never sees tensorsmith's
//! versions. A manifest that lists a shard no version lists is such a writer's commit:
//! readers refuse it (naming what differs and how to adopt it), writers and `dataset adopt`
//! (`verify --repair`) make it the next version, each new shard checked first. A manifest
//! that lists only shards some version lists is the mirror of a commit killed after its
//! commit point, which `republish` writes again. Files named like shards in a folder that
//! holds no dataset are a user's: a write in mode error or append refuses them, and nothing
//! here ever deletes them.

use crate::commit::versions::{now_ms, Snapshot, Version};
use crate::error::{DatasetError, Result};
use crate::manifest::{Manifest, ShardInfo, MANIFEST_NAME};
use crate::tensor_index_file::IndexEntry;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A manifest another writer committed over version `base`.
#[derive(Debug, Clone)]
pub struct ForeignManifest {
    /// The version that was current when the other writer committed: the one its manifest
    /// replaces (adopting it makes version `base + 1`).
    pub base: u64,
    /// The other writer's manifest, as `dataset_manifest.json` holds it.
    pub manifest: Manifest,
    /// Shards the manifest lists and no version does.
    pub added: Vec<String>,
    /// Shards version `base` lists and the manifest does not.
    pub dropped: Vec<String>,
}

fn same_shards(a: &[ShardInfo], b: &[ShardInfo]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (&x.shard_path, x.bytes, x.samples_count) == (&y.shard_path, y.bytes, y.samples_count)
        })
}

/// The manifest bytes `text` (at `path`) against `snap`: another writer's commit when it lists
/// a shard that no version lists (`listed` gives every version's shards, asked only when the
/// manifest differs from `snap`'s). Local folders and stores alike.
pub(crate) fn compare(
    snap: &Snapshot,
    text: &[u8],
    path: &Path,
    listed: impl FnOnce() -> Result<HashSet<String>>,
) -> Result<Option<ForeignManifest>> {
    let mine = snap.manifest();
    if text == mine.to_json().as_bytes() {
        return Ok(None);
    }
    // A manifest that does not parse is not a commit of anyone's: `republish` replaces it.
    let Ok(theirs) = Manifest::parse(text, path) else {
        return Ok(None);
    };
    // In the order of a version's manifest (sorted by path), to compare.
    let theirs = Manifest::new(theirs.shards, theirs.schema);
    if same_shards(&theirs.shards, &mine.shards) {
        return Ok(None);
    }
    let listed = listed()?;
    let added: Vec<String> = theirs
        .shards
        .iter()
        .map(|s| s.shard_path.clone())
        .filter(|p| !listed.contains(p))
        .collect();
    if added.is_empty() {
        return Ok(None);
    }
    let theirs_names: HashSet<&str> = theirs
        .shards
        .iter()
        .map(|s| s.shard_path.as_str())
        .collect();
    let dropped = mine
        .shards
        .iter()
        .map(|s| s.shard_path.clone())
        .filter(|p| !theirs_names.contains(p.as_str()))
        .collect();
    Ok(Some(ForeignManifest {
        base: snap.version.version,
        manifest: theirs,
        added,
        dropped,
    }))
}

impl ForeignManifest {
    /// What differs between the manifest and version `base`, for people.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{MANIFEST_NAME} was committed by another writer (safetensors-spark or another tool that knows only the manifest) after version {}: it lists {} shard(s) no version lists ({})",
            self.base,
            self.added.len(),
            crate::commit::outsiders::list_names(&self.added)
        );
        if !self.dropped.is_empty() {
            s.push_str(&format!(
                " and leaves out {} of version {}'s ({})",
                self.dropped.len(),
                self.base,
                crate::commit::outsiders::list_names(&self.dropped)
            ));
        }
        s
    }

    /// The error of a reader of the dataset at `location` (a folder or a store URL).
    pub(crate) fn error(&self, location: &str) -> DatasetError {
        DatasetError::Conflict {
            dir: PathBuf::from(location),
            msg: format!(
                "{}; `tensorsmith dataset adopt {location}` (or `dataset verify --repair`) makes it version {} after checking its shards; any tensorsmith write adopts it too",
                self.describe(),
                self.base + 1
            ),
        }
    }

    /// The shards the other writer added, as its manifest lists them.
    pub(crate) fn added_shards(&self) -> impl Iterator<Item = &ShardInfo> {
        self.manifest
            .shards
            .iter()
            .filter(|s| self.added.contains(&s.shard_path))
    }

    /// The error of an added shard that fails its check (`path` names it).
    pub(crate) fn not_adopted(path: PathBuf, msg: String) -> DatasetError {
        DatasetError::Corrupt {
            path,
            msg: format!("listed by another writer's {MANIFEST_NAME}, {msg}: not adopted"),
        }
    }

    /// The adopted version's index: the base's entries less the shards the manifest left
    /// out, plus `added` (read from the added shards' headers), sorted as a write sorts them.
    pub(crate) fn index_entries(
        &self,
        mut base: Vec<IndexEntry>,
        added: Vec<IndexEntry>,
    ) -> Vec<IndexEntry> {
        let keep: HashSet<&str> = self
            .manifest
            .shards
            .iter()
            .map(|s| s.shard_path.as_str())
            .collect();
        base.retain(|e| keep.contains(&*e.file_name));
        base.extend(added);
        base.sort_by(|a, b| (&a.file_name, &a.tensor_key).cmp(&(&b.file_name, &b.tensor_key)));
        base
    }

    /// The adopted version, next after the base, with the index file `index`.
    pub(crate) fn version(&self, index: Option<String>) -> Version {
        Version {
            version: self.base + 1,
            base: Some(self.base),
            committed_ms: now_ms(),
            mode: "adopted".into(),
            manifest: self.manifest.clone(),
            index,
        }
    }

    /// The error when another commit took the adopted version's number first.
    pub(crate) fn lost_race(&self, location: &str) -> DatasetError {
        DatasetError::Conflict {
            dir: PathBuf::from(location),
            msg: format!(
                "version {} was committed while the other writer's manifest was adopted; nothing was adopted",
                self.base + 1
            ),
        }
    }
}
