//! The checks of `dataset verify` that do not depend on where the dataset lives
//! (store_verify.rs runs them): a shard's tensors against the manifest's schema and sample
//! counts and its content digest, every column or key covered, the index naming only listed
//! shards and tensors they hold; and `DatasetReport`, what verify found.

use crate::error::Result;
use crate::manifest::{content_digest_of, Manifest, ShardInfo};
use crate::read::dataset::{mode_of, DatasetMode};
use crate::tensor_index_file;
use std::collections::{HashMap, HashSet};
use tensorsmith::index::TensorIndex;

/// What `verify` found: problems, one line each (empty when the dataset is sound), and notes
/// on files beside it that no version lists (a killed writer's shards, a user's own files):
/// they do not make the dataset unsound.
#[derive(Debug, Default)]
pub struct DatasetReport {
    /// How many shards the manifest lists.
    pub shards: usize,
    /// How many tensors the shards whose headers could be read hold, together.
    pub tensors: usize,
    /// What makes the dataset unsound, one line each, naming the shard or file (a missing
    /// shard, a size, shape or digest that differs from the manifest, an index entry that
    /// names no tensor).
    pub problems: Vec<String>,
    /// Files beside the dataset that no version lists, one line each; they do not make it
    /// unsound.
    pub notes: Vec<String>,
}

impl DatasetReport {
    /// Whether the dataset is sound: no problems found (notes do not count).
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The mode of a dataset told from its first shard whose header reads (`headers`, in the
/// manifest's order, `None` for one that does not): a damaged first shard must not make a
/// batch dataset look like a KV one, each of whose other shards would then seem to repeat its
/// neighbours' keys. KV when no header reads.
pub(crate) fn mode_of_shards<H: std::borrow::Borrow<TensorIndex>>(
    m: &Manifest,
    headers: impl IntoIterator<Item = Option<H>>,
) -> DatasetMode {
    m.shards
        .iter()
        .zip(headers)
        .find_map(|(s, h)| {
            let h = h?;
            let tensors: Vec<(&str, Option<u64>)> = h
                .borrow()
                .tensors
                .iter()
                .map(|t| (t.name.as_str(), t.shape.first().copied()))
                .collect();
            Some(mode_of(m, s.samples_count, &tensors))
        })
        .unwrap_or(DatasetMode::Kv)
}

/// The tensors of shard `s` (its header's `index`) checked against the manifest `m`.
pub(crate) fn check_tensors<'a>(
    r: &mut DatasetReport,
    s: &'a ShardInfo,
    index: &TensorIndex,
    mode: DatasetMode,
    m: &Manifest,
    tensors_of: &mut HashMap<&'a str, HashSet<String>>,
    seen_keys: &mut HashMap<String, String>,
) {
    let p = &s.shard_path;
    if let Some(want) = &s.content_digest {
        match content_digest_of(&index.metadata) {
            Some(got) if &got == want => {}
            Some(got) => r.problems.push(format!(
                "{p}: its digest record hashes to {got}, the manifest says {want} (another shard's content)"
            )),
            None => r.problems.push(format!(
                "{p}: records no digests, the manifest says it was written with them"
            )),
        }
    }
    let names = tensors_of.entry(p.as_str()).or_default();
    for t in &index.tensors {
        r.tensors += 1;
        names.insert(t.name.clone());
        let dtype = t.dtype.safetensors_name();
        match mode {
            DatasetMode::Batch => {
                if t.shape.first() != Some(&s.samples_count) {
                    r.problems.push(format!(
                        "{p}: tensor '{}' has shape {:?}, the manifest says {} samples",
                        t.name, t.shape, s.samples_count
                    ));
                }
            }
            DatasetMode::Kv => {
                if let Some(other) = seen_keys.insert(t.name.clone(), p.clone()) {
                    r.problems
                        .push(format!("{p}: tensor '{}' is also in {other}", t.name));
                }
            }
        }
        // Batch-mode schema shapes hold the full batch: compare the sample dimensions.
        let skip = usize::from(mode == DatasetMode::Batch);
        match m.schema.get(&t.name) {
            Some(sc) if sc.dtype != dtype || sc.shape.get(skip..) != t.shape.get(skip..) => {
                r.problems.push(format!(
                    "{p}: tensor '{}' is {dtype} {:?}, the schema says {} {:?}",
                    t.name, t.shape, sc.dtype, sc.shape
                ))
            }
            None if !m.schema.is_empty() => r.problems.push(format!(
                "{p}: tensor '{}' is not in the manifest's schema",
                t.name
            )),
            _ => {}
        }
    }
}

/// Batch mode: every shard holds every column; KV: every schema key is in some shard (not
/// checked when a shard could not be read).
pub(crate) fn check_coverage(
    r: &mut DatasetReport,
    m: &Manifest,
    mode: DatasetMode,
    tensors_of: &HashMap<&str, HashSet<String>>,
    seen_keys: &HashMap<String, String>,
) {
    if mode == DatasetMode::Batch {
        for col in m.schema.keys() {
            for s in &m.shards {
                if tensors_of
                    .get(s.shard_path.as_str())
                    .is_some_and(|n| !n.contains(col))
                {
                    r.problems
                        .push(format!("{}: no tensor '{col}'", s.shard_path));
                }
            }
        }
    } else if !m.schema.is_empty() {
        // A shard that could not be read (reported already) may hold any key: not every key
        // it held is reported again.
        if m.shards
            .iter()
            .any(|s| !tensors_of.contains_key(s.shard_path.as_str()))
        {
            return;
        }
        for k in m.schema.keys().filter(|k| !seen_keys.contains_key(*k)) {
            r.problems
                .push(format!("schema names '{k}', which no shard holds"));
        }
    }
}

/// The index's entries (as read) checked against the shards' tensors; `iname` names it.
/// Entries pointing at a shard the manifest lists but that could not be read are not
/// reported again (the shard's own problem says why).
pub(crate) fn check_index(
    r: &mut DatasetReport,
    entries: Result<Vec<tensor_index_file::IndexEntry>>,
    iname: &str,
    m: &Manifest,
    tensors_of: &HashMap<&str, HashSet<String>>,
) {
    let listed: HashSet<&str> = m.shards.iter().map(|s| s.shard_path.as_str()).collect();
    match entries {
        Ok(entries) => {
            for e in entries {
                match tensors_of.get(&*e.file_name) {
                    None if listed.contains(&*e.file_name) => {}
                    None => r.problems.push(format!(
                        "{iname}: '{}' points at {}, which the manifest does not list",
                        e.tensor_key, e.file_name
                    )),
                    Some(n) if !n.contains(&e.tensor_key) => r.problems.push(format!(
                        "{iname}: '{}' is not in {}",
                        e.tensor_key, e.file_name
                    )),
                    _ => {}
                }
            }
        }
        Err(e) => r.problems.push(format!("{iname}: unreadable: {e}")),
    }
}
