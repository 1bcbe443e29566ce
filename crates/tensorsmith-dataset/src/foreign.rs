//! What other writers do to a dataset folder. safetensors-spark (and any tool that knows only
//! the layout) commits by rewriting `dataset_manifest.json`; it never sees tensorsmith's
//! versions. A manifest that lists a shard no version lists is such a writer's commit:
//! readers refuse it (naming what differs and how to adopt it), writers and `dataset adopt`
//! (`verify --repair`) make it the next version, each new shard checked first. A manifest
//! that lists only shards some version lists is the mirror of a commit killed after its
//! commit point, which `republish` writes again. Files named like shards in a folder that
//! holds no dataset are a user's: a write in mode error or append refuses them, and nothing
//! here ever deletes them.

use crate::commit_lock;
use crate::error::{DatasetError, Result};
use crate::manifest::{Manifest, ShardInfo, INDEX_NAME, MANIFEST_NAME};
use crate::publish::republish;
use crate::tensor_index_file;
use crate::versions::{self, indexes_dir, now_ms, Snapshot, Version};
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

/// The current snapshot of `dir` for a reader: a manifest another writer committed over it
/// is an error saying what differs and how to adopt it.
pub(crate) fn current_checked(dir: &Path) -> Result<Option<Snapshot>> {
    let snap = Snapshot::current(dir)?;
    if let Some(s) = &snap {
        if let Some(f) = detect(dir, s)? {
            return Err(f.error(dir));
        }
    }
    Ok(snap)
}

/// A manifest another writer committed over version `base`.
#[derive(Debug, Clone)]
pub struct ForeignManifest {
    pub base: u64,
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

/// The manifest of `dir` when another writer committed it over `snap` (a version file).
pub(crate) fn detect(dir: &Path, snap: &Snapshot) -> Result<Option<ForeignManifest>> {
    if !snap.versioned {
        return Ok(None);
    }
    let path = dir.join(MANIFEST_NAME);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(DatasetError::io(&path, e)),
    };
    compare(snap, &text, &path, || {
        let mut listed: HashSet<String> = HashSet::new();
        for n in versions::list(dir)? {
            if let Ok(v) = versions::read(dir, n) {
                listed.extend(v.manifest.shards.into_iter().map(|s| s.shard_path));
            }
        }
        Ok(listed)
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
    let mut sorted = theirs.shards.clone();
    sorted.sort_by(|a, b| a.shard_path.cmp(&b.shard_path));
    if same_shards(&sorted, &mine.shards) {
        return Ok(None);
    }
    let listed = listed()?;
    let added: Vec<String> = sorted
        .iter()
        .map(|s| s.shard_path.clone())
        .filter(|p| !listed.contains(p))
        .collect();
    if added.is_empty() {
        return Ok(None);
    }
    let theirs_names: HashSet<&str> = sorted.iter().map(|s| s.shard_path.as_str()).collect();
    let dropped = mine
        .shards
        .iter()
        .map(|s| s.shard_path.clone())
        .filter(|p| !theirs_names.contains(p.as_str()))
        .collect();
    Ok(Some(ForeignManifest {
        base: snap.version.version,
        manifest: Manifest::new(sorted, theirs.schema),
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
            crate::outsiders::list_names(&self.added)
        );
        if !self.dropped.is_empty() {
            s.push_str(&format!(
                " and leaves out {} of version {}'s ({})",
                self.dropped.len(),
                self.base,
                crate::outsiders::list_names(&self.dropped)
            ));
        }
        s
    }

    pub(crate) fn error(&self, dir: &Path) -> DatasetError {
        DatasetError::Conflict {
            dir: dir.to_path_buf(),
            msg: format!(
                "{}; `tensorsmith dataset adopt {}` (or `dataset verify --repair`) makes it version {} after checking its shards; any tensorsmith write adopts it too",
                self.describe(),
                dir.display(),
                self.base + 1
            ),
        }
    }

    /// The error of a reader or writer of a dataset on a store.
    pub(crate) fn store_error(&self, location: &str) -> DatasetError {
        DatasetError::Conflict {
            dir: std::path::PathBuf::from(location),
            msg: format!(
                "{}; `tensorsmith dataset adopt {location}` (or `dataset verify --repair`) makes it version {} after checking its shards",
                self.describe(),
                self.base + 1
            ),
        }
    }
}

/// Each shard the other writer added: present, of the size its manifest says, with a valid
/// safetensors header.
fn check_added(dir: &Path, f: &ForeignManifest) -> Result<()> {
    for s in f
        .manifest
        .shards
        .iter()
        .filter(|s| f.added.contains(&s.shard_path))
    {
        let path = dir.join(&s.shard_path);
        let len = std::fs::metadata(&path)
            .map_err(|e| DatasetError::io(&path, e))?
            .len();
        if len != s.bytes {
            return Err(DatasetError::Corrupt {
                path,
                msg: format!(
                    "{len} bytes, {MANIFEST_NAME} (written by another writer) says {}: not adopted",
                    s.bytes
                ),
            });
        }
        tensorsmith::safetensors::SafetensorsFile::open(&path).map_err(|e| {
            DatasetError::Corrupt {
                path: path.clone(),
                msg: format!("listed by another writer's {MANIFEST_NAME}, not a valid safetensors file ({e}): not adopted"),
            }
        })?;
    }
    Ok(())
}

/// Makes another writer's manifest of `dir` the next version (mode `adopted`), each shard it
/// added checked first, under the commit lock (waiting up to `timeout`). Returns the new
/// version, `None` when the manifest is the current version's.
pub fn adopt(dir: &Path, timeout: Duration) -> Result<Option<u64>> {
    let _lock = commit_lock::acquire(dir, timeout)?;
    let Some(snap) = Snapshot::current(dir)? else {
        return Ok(None);
    };
    let Some(f) = detect(dir, &snap)? else {
        return Ok(None);
    };
    check_added(dir, &f)?;
    let next = f.base + 1;
    let index = adopted_index(dir, &f, &snap, next)?;
    let prepared = versions::prepare(
        dir,
        Version {
            version: next,
            base: Some(f.base),
            committed_ms: now_ms(),
            mode: "adopted".into(),
            manifest: f.manifest.clone(),
            index: index.as_ref().map(|(n, _)| n.clone()),
        },
    )?;
    if !prepared.publish(dir)? {
        if let Some((_, p)) = index {
            let _ = std::fs::remove_file(p);
        }
        return Err(DatasetError::Conflict {
            dir: dir.to_path_buf(),
            msg: format!("version {next} was committed while the other writer's manifest was adopted; nothing was adopted"),
        });
    }
    if let Some(s) = Snapshot::current(dir)? {
        republish(dir, &s)?;
    }
    Ok(Some(next))
}

/// The adopted version's index file: the other writer's `_tensor_index.parquet` when it
/// covers exactly the manifest's shards, else one read from the shards' headers when the
/// base version had an index; `None` when neither.
fn adopted_index(
    dir: &Path,
    f: &ForeignManifest,
    base: &Snapshot,
    next: u64,
) -> Result<Option<(String, std::path::PathBuf)>> {
    let shards: HashSet<&str> = f
        .manifest
        .shards
        .iter()
        .map(|s| s.shard_path.as_str())
        .collect();
    let theirs = tensor_index_file::read(&dir.join(INDEX_NAME))
        .ok()
        .filter(|e| {
            let named: HashSet<&str> = e.iter().map(|x| &*x.file_name).collect();
            named == shards
        });
    let entries = match theirs {
        Some(e) => e,
        None if base.version.index.is_some() => {
            tensor_index_file::entries_from_headers(dir, &f.manifest.shards)?
        }
        None => return Ok(None),
    };
    let idir = indexes_dir(dir);
    std::fs::create_dir_all(&idir).map_err(|e| DatasetError::io(&idir, e))?;
    let name = format!("{next:08}-{}.parquet", uuid::Uuid::new_v4().simple());
    let path = idir.join(&name);
    tensor_index_file::prepare(&path, &entries)?.commit()?;
    Ok(Some((name, path)))
}
