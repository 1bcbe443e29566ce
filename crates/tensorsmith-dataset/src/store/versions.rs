//! A dataset's versions read through the store seam (an S3 prefix): the same files as on disk
//! (`_tensorsmith/versions/0000000N.json`, `.removed` markers, index files in
//! `_tensorsmith/index/`, `dataset_manifest.json` for a dataset written before versions),
//! parsed and checked by versions.rs and manifest.rs. A reader trusts only what the highest
//! version lists; when a version was superseded is the time its successor was created.

use crate::commit::clean_report::{RetiredShard, VersionInfo};
use crate::commit::versions::{self, format_utc, Snapshot, Version};
use crate::error::{DatasetError, Result};
use crate::manifest::{Manifest, MANIFEST_NAME, MAX_MANIFEST_LEN};
pub(crate) use crate::store::index::{index_entries, index_key, INDEX_PREFIX};
use crate::store::seam::Store;
use std::collections::HashMap;
use std::path::PathBuf;

pub(crate) use crate::store::index::VERSIONS_PREFIX;

pub(crate) fn version_key(n: u64) -> String {
    format!("{VERSIONS_PREFIX}{n:08}.json")
}

pub(crate) fn removed_key(n: u64) -> String {
    format!("{VERSIONS_PREFIX}{n:08}.removed")
}

/// A version of the listing: its number and when it was created.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Listed {
    pub n: u64,
    pub created_ms: u64,
}

/// The versions in the store, ascending.
pub(crate) fn list(store: &dyn Store) -> Result<Vec<Listed>> {
    let mut out: Vec<Listed> = store
        .list(VERSIONS_PREFIX)?
        .into_iter()
        .filter_map(|e| {
            let stem = e.key.strip_prefix(VERSIONS_PREFIX)?.strip_suffix(".json")?;
            (stem.len() == 8 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| Listed {
                n: stem.parse().expect("digits"),
                created_ms: e.modified_ms,
            })
        })
        .collect();
    out.sort_by_key(|l| l.n);
    Ok(out)
}

/// When `dataset clean` removed version `n`, if it did.
pub(crate) fn removed_at(store: &dyn Store, n: u64) -> Option<u64> {
    let bytes = store.get(&removed_key(n)).ok()??;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v["removed_ms"].as_u64()
}

fn shown(store: &dyn Store, key: &str) -> PathBuf {
    PathBuf::from(store.show(key))
}

/// Version `n`; one `dataset clean` removed is an error saying so.
pub(crate) fn read(store: &dyn Store, n: u64) -> Result<Version> {
    let key = version_key(n);
    match store.get(&key)? {
        Some(bytes) => versions::parse(&bytes, &shown(store, &key), n),
        None => Err(match removed_at(store, n) {
            Some(at) => DatasetError::VersionRemoved {
                dir: PathBuf::from(store.location()),
                version: n,
                at: format_utc(at),
            },
            None => DatasetError::Corrupt {
                path: shown(store, &key),
                msg: format!("no version {n} of this dataset"),
            },
        }),
    }
}

/// The manifest of a dataset written before versions (by safetensors-spark through s3a, or
/// an older tensorsmith), as version 0; `None` when there is none.
fn unversioned(store: &dyn Store) -> Result<Option<Snapshot>> {
    let Some(entry) = store
        .list(MANIFEST_NAME)?
        .into_iter()
        .find(|e| e.key == MANIFEST_NAME)
    else {
        return Ok(None);
    };
    let path = shown(store, MANIFEST_NAME);
    if entry.size > MAX_MANIFEST_LEN {
        return Err(DatasetError::Corrupt {
            path,
            msg: format!(
                "{} bytes, over the {MAX_MANIFEST_LEN}-byte limit for a manifest",
                entry.size
            ),
        });
    }
    let Some(bytes) = store.get(MANIFEST_NAME)? else {
        return Ok(None);
    };
    let manifest = Manifest::parse(&bytes, &path)?;
    Ok(Some(Snapshot {
        version: Version {
            version: 0,
            base: None,
            committed_ms: entry.modified_ms,
            mode: "adopted".into(),
            manifest,
            index: None,
        },
        versioned: false,
    }))
}

/// [`current`] for a reader (and `clean`): a manifest another writer committed over the
/// current version is an error saying what differs and how to adopt it (foreign.rs).
pub(crate) fn current_checked(store: &dyn Store) -> Result<Option<Snapshot>> {
    let snap = current(store)?;
    if let Some(s) = &snap {
        if let Some(f) = detect(store, s)? {
            return Err(f.error(&store.location()));
        }
    }
    Ok(snap)
}

/// The manifest of `store` when another writer committed it over `snap` (foreign.rs).
pub(crate) fn detect(
    store: &dyn Store,
    snap: &Snapshot,
) -> Result<Option<crate::commit::foreign::ForeignManifest>> {
    if !snap.versioned {
        return Ok(None);
    }
    let Some(bytes) = store.get(MANIFEST_NAME)? else {
        return Ok(None);
    };
    crate::commit::foreign::compare(snap, &bytes, &shown(store, MANIFEST_NAME), || {
        let mut listed = std::collections::HashSet::new();
        for l in list(store)? {
            match read(store, l.n) {
                Ok(v) => listed.extend(v.manifest.shards.into_iter().map(|s| s.shard_path)),
                Err(DatasetError::VersionRemoved { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(listed)
    })
}

/// The current snapshot: the highest version, else the manifest of a dataset without
/// versions, else `None` (no dataset). Readers take [`current_checked`].
pub(crate) fn current(store: &dyn Store) -> Result<Option<Snapshot>> {
    // A version listed may be cleaned before it is read (a newer one came meanwhile): again.
    for _ in 0..8 {
        match list(store)?.last() {
            Some(l) => match read(store, l.n) {
                Err(DatasetError::VersionRemoved { .. }) => continue,
                r => return r.map(|v| Some(Snapshot::file(v))),
            },
            None => return unversioned(store),
        }
    }
    Err(DatasetError::input(format!(
        "{}: its versions keep being removed while it is opened",
        store.location()
    )))
}

/// Version `n` (0 of a dataset without versions: its manifest).
pub(crate) fn at(store: &dyn Store, n: u64) -> Result<Snapshot> {
    if n == 0 && list(store)?.is_empty() {
        return unversioned(store)?.ok_or_else(|| DatasetError::Corrupt {
            path: shown(store, MANIFEST_NAME),
            msg: "no dataset here (no versions, no manifest)".into(),
        });
    }
    read(store, n).map(Snapshot::file)
}

/// The versions, oldest first, and the retired shards (listed only by older versions).
pub(crate) fn info(store: &dyn Store) -> Result<(Vec<VersionInfo>, Vec<RetiredShard>)> {
    let list = list(store)?;
    let mut infos = Vec::new();
    let mut last_listed: HashMap<String, (u64, u64)> = HashMap::new();
    for (i, l) in list.iter().enumerate() {
        let v = match read(store, l.n) {
            Err(DatasetError::VersionRemoved { .. }) => continue,
            r => r?,
        };
        for s in &v.manifest.shards {
            last_listed.insert(s.shard_path.clone(), (l.n, s.bytes));
        }
        infos.push(VersionInfo {
            version: l.n,
            mode: v.mode,
            committed_ms: v.committed_ms,
            shards: v.manifest.shards.len(),
            samples: v.manifest.total_samples,
            bytes: v.manifest.total_bytes,
            superseded_ms: list.get(i + 1).map(|next| next.created_ms),
        });
    }
    let current = list.last().map_or(0, |l| l.n);
    let mut retired: Vec<RetiredShard> = last_listed
        .into_iter()
        .filter(|(_, (v, _))| *v != current)
        .map(|(shard_path, (last_version, bytes))| RetiredShard {
            shard_path,
            bytes,
            last_version,
        })
        .collect();
    retired.sort_by(|a, b| a.shard_path.cmp(&b.shard_path));
    Ok((infos, retired))
}
