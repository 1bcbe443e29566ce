//! A commit prepared against one version: the write's shards merged with that version's
//! (append) or on their own (overwrite, new dataset), its index file and the next version
//! file written in a local folder (store_commit.rs uploads them). What grows with the data
//! happens here, so the commit itself only puts the version with an exclusive create. A
//! concurrent commit makes it stale: it is then dropped (removing its files) and prepared
//! again against the new version.

use crate::commit::base::BaseAt;
use crate::commit::versions::{self, format_utc, indexes_dir, now_ms, Snapshot, Version};
use crate::error::{DatasetError, Result};
use crate::manifest::{Manifest, ShardInfo, TensorSchema};
use crate::options::{Duplicates, Naming, WriteOptions};
use crate::tensor_index_file::{self, IndexEntry};
use crate::write::job_options::WriteMode;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// What a write adds, gathered from its task reports (duplicates between tasks resolved).
pub(crate) struct Written {
    pub shards: Vec<ShardInfo>,
    pub entries: Vec<IndexEntry>,
    /// Batch mode: column schemas with the batch dimension; KV: per tensor key.
    pub schema: BTreeMap<String, TensorSchema>,
}

/// An index file in `_tensorsmith/index/`, removed on drop unless published.
pub(crate) struct IndexFile {
    pub path: PathBuf,
    pub name: String,
    pub keep: bool,
}

impl Drop for IndexFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Shards in staging this preparation wrote (lastWin copies), removed on drop unless the
/// commit moved them in.
pub(crate) struct Copies {
    pub dir: PathBuf,
    pub files: Vec<ShardInfo>,
}

impl Drop for Copies {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(self.dir.join(&f.shard_path));
        }
    }
}

pub(crate) struct Prepared {
    /// Copies of committed shards to move in beside the write's own.
    pub copies: Copies,
    /// Version 0 to write first when the base is a dataset without versions.
    pub adopt: Option<versions::Prepared>,
    pub version: versions::Prepared,
    pub index: Option<IndexFile>,
}

fn base_label(b: &Snapshot) -> String {
    let v = &b.version;
    match v.mode.as_str() {
        "adopted" => "the existing dataset".into(),
        m => format!(
            "version {} (committed by {} at {})",
            v.version,
            match m {
                "overwrite" => "an overwrite",
                "append" => "an append",
                _ => "a new write",
            },
            format_utc(v.committed_ms)
        ),
    }
}

/// Prepares `w` as the version after `base` (none: a new dataset), read from `at`; the
/// version, index and manifest files are prepared in `out`.
pub(crate) fn prepare(
    out: &Path,
    staging: &Path,
    w: &Written,
    (base, at): (Option<&Snapshot>, BaseAt<'_>),
    opts: &WriteOptions,
    mode: WriteMode,
) -> Result<Prepared> {
    let mut schema = w.schema.clone();
    // The rows of a dataset are its shards' in manifest order: the base's first, as they were
    // (an append never moves a row), then this write's, in input order (their paths sort so).
    let mut shards = Vec::new();
    let mut own = w.shards.clone();
    own.sort_by(|a, b| a.shard_path.cmp(&b.shard_path));
    let mut copies = Copies {
        dir: staging.to_path_buf(),
        files: Vec::new(),
    };
    let mut entries: Vec<IndexEntry> = if opts.generate_index {
        w.entries.clone()
    } else {
        Vec::new()
    };
    if let Some(b) = base {
        match mode {
            WriteMode::ErrorIfExists => return Err(DatasetError::Exists(out.to_path_buf())),
            WriteMode::Overwrite => {}
            WriteMode::Append => {
                let gone = merge_schema(&mut schema, b, opts)?;
                if !gone.is_empty() {
                    let (kept, kept_entries, new_copies) = supersede(at, staging, b, &gone, opts)?;
                    shards.extend(kept);
                    entries.extend(kept_entries);
                    copies.files = new_copies;
                } else {
                    shards.extend(b.manifest().shards.iter().cloned());
                    if opts.generate_index {
                        match at.index_entries(b)? {
                            Some(old) => entries.extend(old),
                            None => entries.extend(at.entries_from_headers(&b.manifest().shards)?),
                        }
                    }
                }
            }
        }
    }
    shards.extend(own);
    let manifest = Manifest::in_order(shards, schema);
    let next = base.map_or(1, |b| b.version.version + 1);
    let index = if opts.generate_index {
        entries.sort_by(|a, b| (&a.file_name, &a.tensor_key).cmp(&(&b.file_name, &b.tensor_key)));
        let idir = indexes_dir(out);
        std::fs::create_dir_all(&idir).map_err(|e| DatasetError::io(&idir, e))?;
        let name = tensor_index_file::new_file_name(next);
        let path = idir.join(&name);
        let f = tensor_index_file::prepare(&path, &entries)?;
        let file = IndexFile {
            path,
            name,
            keep: false,
        };
        f.commit()?;
        Some(file)
    } else {
        None
    };
    let adopt = match base {
        Some(b) if !b.versioned => Some(versions::prepare(out, b.version.clone())?),
        _ => None,
    };
    let version = versions::prepare(
        out,
        Version {
            version: next,
            base: base.map(|b| b.version.version),
            committed_ms: now_ms(),
            mode: match mode {
                WriteMode::ErrorIfExists => "error",
                WriteMode::Overwrite => "overwrite",
                WriteMode::Append => "append",
            }
            .into(),
            index: index.as_ref().map(|i| i.name.clone()),
            manifest,
        },
    )?;
    Ok(Prepared {
        copies,
        adopt,
        version,
        index,
    })
}

/// Append: the base's schema must agree with the write's (batch: same dtype and shape per
/// column; KV: no key already there), and is merged into it.
fn merge_schema(
    schema: &mut BTreeMap<String, TensorSchema>,
    b: &Snapshot,
    opts: &WriteOptions,
) -> Result<HashSet<String>> {
    let mut clashes = HashSet::new();
    let old = &b.manifest().schema;
    if matches!(opts.naming, Naming::Batch(_)) && !old.is_empty() {
        let missing = old.keys().find(|k| !schema.contains_key(*k));
        let extra = schema.keys().find(|k| !old.contains_key(*k));
        if let Some(k) = extra.or(missing) {
            let (is, here) = if extra.is_some() {
                ("is not", "is")
            } else {
                ("is", "is not")
            };
            return Err(DatasetError::column(
                k,
                format!(
                    "{is} a column of {}, and {here} one here: append needs the same columns",
                    base_label(b)
                ),
            ));
        }
    }
    for (k, v) in &b.manifest().schema {
        match (schema.get(k), &opts.naming) {
            (Some(n), Naming::Batch(_)) if n != v => {
                return Err(DatasetError::column(
                    k,
                    format!(
                        "is {} {:?} in {}, {} {:?} here: append needs the same dtype and shape",
                        v.dtype,
                        v.shape,
                        base_label(b),
                        n.dtype,
                        n.shape
                    ),
                ))
            }
            (Some(_), Naming::Kv { .. }) if opts.duplicates == Duplicates::Fail => {
                return Err(DatasetError::input(format!(
                    "tensor key '{k}' is already in {}: duplicatesStrategy=fail (lastWin replaces it)",
                    base_label(b)
                )))
            }
            (Some(_), Naming::Kv { .. }) => {
                clashes.insert(k.clone());
            }
            _ => {}
        }
        schema.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Ok(clashes)
}

/// KV append with lastWin: the committed shards holding keys this write replaces, copied
/// into `staging` under new names without those keys (the committed files stay as they are
/// for readers of their version). Returns the base's shards and index entries with the
/// copies in place of the originals, and the copies to move in at the commit.
fn supersede(
    at: BaseAt<'_>,
    staging: &Path,
    b: &Snapshot,
    gone: &HashSet<String>,
    opts: &WriteOptions,
) -> Result<(Vec<ShardInfo>, Vec<IndexEntry>, Vec<ShardInfo>)> {
    let entries = match at.index_entries(b)? {
        Some(e) => e,
        None => at.entries_from_headers(&b.manifest().shards)?,
    };
    let mut hit: BTreeMap<&str, HashSet<String>> = BTreeMap::new();
    for e in entries.iter().filter(|e| gone.contains(&e.tensor_key)) {
        hit.entry(&e.file_name)
            .or_default()
            .insert(e.tensor_key.clone());
    }
    let mut renamed: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut copies = Vec::new();
    let mut shards = Vec::new();
    for s in &b.manifest().shards {
        let Some(keys) = hit.get(s.shard_path.as_str()) else {
            shards.push(s.clone());
            continue;
        };
        // `part-TTTTT-NNNN-<uuid>.safetensors`: the same task and number, a new uuid.
        let stem: String = s
            .shard_path
            .splitn(4, '-')
            .take(3)
            .collect::<Vec<_>>()
            .join("-");
        let name = format!("{stem}-{}.safetensors", uuid::Uuid::new_v4());
        let copy = at.copy_without(s, &staging.join(&name), keys)?;
        renamed.insert(
            s.shard_path.clone(),
            copy.as_ref().map(|c| c.shard_path.clone()),
        );
        if let Some(c) = copy {
            shards.push(c.clone());
            copies.push(c);
        }
    }
    let mut names = crate::tensor_index_file::SharedNames::default();
    let entries = if opts.generate_index {
        entries
            .into_iter()
            .filter(|e| !gone.contains(&e.tensor_key))
            .map(|mut e| {
                if let Some(Some(n)) = renamed.get(&*e.file_name) {
                    e.file_name = names.get(n);
                }
                e
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok((shards, entries, copies))
}
