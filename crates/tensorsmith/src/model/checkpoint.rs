//! Sharded checkpoints (the Hugging Face convention) opened as one model: a
//! `*.safetensors.index.json` (local or URL) whose `weight_map` names the shard of every
//! tensor, or a folder of shards. Index parsing is lenient (unknown keys, any `metadata`), and
//! only the tensors the weight map lists are taken from each shard.

use super::file::{open_bytes, open_file, ModelFile};
use super::Model;
use crate::error::{Error, ErrorKind, Result};
use crate::format::OpenOptions;
use crate::index::{MetaValue, TensorIndex, TensorInfo};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// Largest index file read (real ones are well under a megabyte).
pub const MAX_INDEX_LEN: u64 = 64 << 20;

/// Suffix of a shard index file.
pub const INDEX_SUFFIX: &str = ".safetensors.index.json";

fn bad(location: &str, msg: String) -> Error {
    Error::new(ErrorKind::BadShardIndex(msg)).in_file(Path::new(location))
}

/// The weight map of an index file: tensor name → shard file name, plus the shard names in
/// sorted order. Unknown keys are ignored; shard names must be relative paths inside the
/// index's folder.
pub fn parse_index(location: &str, json: &[u8]) -> Result<(BTreeMap<String, String>, Vec<String>)> {
    let v: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| bad(location, format!("not JSON: {e}")))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad(location, "no \"weight_map\" object".into()))?;
    let mut weight_map = BTreeMap::new();
    for (name, file) in map {
        let file = file.as_str().ok_or_else(|| {
            bad(
                location,
                format!("weight_map entry '{name}' is not a file name"),
            )
        })?;
        let p = Path::new(file);
        let safe = !file.is_empty()
            && p.is_relative()
            && p.components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !safe {
            return Err(bad(
                location,
                format!("shard name '{file}' leaves the index's folder"),
            ));
        }
        weight_map.insert(name.clone(), file.to_owned());
    }
    let mut shards: Vec<String> = weight_map
        .values()
        .cloned()
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    shards.sort();
    Ok((weight_map, shards))
}

/// For a local `.safetensors` file named as one shard of a checkpoint
/// (`NAME-0000N-of-0000M.safetensors`) with a shard index beside it: a line saying so and how
/// to take the whole checkpoint. The file is still read alone: the user named it.
pub fn shard_notice(target: &str) -> Option<String> {
    if crate::bytes::is_url(target) {
        return None;
    }
    let path = Path::new(target);
    let name = path.file_name()?.to_str()?;
    let (left, count) = name.strip_suffix(".safetensors")?.rsplit_once("-of-")?;
    let (_, no) = left.rsplit_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(no) && digits(count)) {
        return None;
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut indexes: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(INDEX_SUFFIX))
        .collect();
    indexes.sort();
    let index = indexes.first()?;
    let (no, count) = (no.trim_start_matches('0'), count.trim_start_matches('0'));
    Some(format!(
        "{target} is shard {no} of {count} of a sharded checkpoint; only its own tensors are read. \
         For the whole checkpoint, pass its folder ({}) or its index ({})",
        dir.display(),
        dir.join(index).display()
    ))
}

/// Whether `target` names a shard index (by its name).
pub fn is_index(target: &str) -> bool {
    target.ends_with(".index.json")
}

/// Opens a local or remote shard index and its shards.
pub(super) fn open_index(target: &str, opts: &OpenOptions) -> Result<Model> {
    let bytes = open_bytes(target, opts)?;
    let len = bytes.len();
    if len > MAX_INDEX_LEN {
        return Err(bad(
            target,
            format!("index of {len} bytes is over the limit of {MAX_INDEX_LEN}"),
        ));
    }
    let json = bytes
        .read(0..len)
        .map_err(|e| e.in_file(Path::new(target)))?;
    let (weight_map, shards) = parse_index(target, &json)?;
    let base = match target.rfind('/') {
        Some(i) => &target[..=i],
        None => "",
    };
    let mut files = Vec::with_capacity(shards.len());
    let mut indexes = Vec::with_capacity(shards.len());
    for name in &shards {
        let (index, file) = open_shard(&format!("{base}{name}"), name, opts)?;
        files.push(file);
        indexes.push(index);
    }
    merge(target, files, indexes, Some(&weight_map))
}

/// One shard, named as the index or folder names it.
fn open_shard(location: &str, name: &str, opts: &OpenOptions) -> Result<(TensorIndex, ModelFile)> {
    let (index, mut file) = open_file(location, opts)?;
    file.name = name.to_owned();
    Ok((index, file))
}

/// Whether a folder holds a shard index or a `.safetensors` file.
pub(super) fn has_safetensors(dir: &Path) -> Result<bool> {
    let at = |e: std::io::Error| Error::from(e).in_file(dir);
    for entry in std::fs::read_dir(dir).map_err(at)? {
        let name = entry.map_err(at)?.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(INDEX_SUFFIX) || name.ends_with(".safetensors") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Opens a folder: its shard index if it has one (`model.safetensors.index.json` preferred),
/// else its `.safetensors` files, as one model.
pub(super) fn open_dir(dir: &Path, opts: &OpenOptions) -> Result<Model> {
    let at = |e: std::io::Error| Error::from(e).in_file(dir);
    let mut indexes = Vec::new();
    let mut shards = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(at)? {
        let name = entry
            .map_err(at)?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(INDEX_SUFFIX) {
            indexes.push(name);
        } else if name.ends_with(".safetensors") {
            shards.push(name);
        }
    }
    indexes.sort();
    shards.sort();
    let pick = indexes
        .iter()
        .find(|n| *n == "model.safetensors.index.json")
        .or_else(|| indexes.first());
    if let Some(index) = pick {
        // `NAME.safetensors` beside `NAME.safetensors.index.json`: two layouts of one
        // checkpoint, which readers disagree on (transformers takes the single file).
        let single = index.strip_suffix(".index.json").unwrap_or(index);
        if shards.iter().any(|s| s == single) {
            return Err(bad(
                &dir.to_string_lossy(),
                format!(
                    "the folder holds both {single} and {index}, two layouts of one checkpoint (a rewrite that left the other one behind?); open the one meant by its path"
                ),
            ));
        }
        return open_index(&dir.join(index).to_string_lossy(), opts);
    }
    let shown = dir.to_string_lossy();
    if let Some(missing) = missing_shard(&shards) {
        return Err(bad(
            &shown,
            format!("{missing} is missing and there is no shard index: the folder holds part of a checkpoint"),
        ));
    }
    match shards.len() {
        0 => Err(bad(
            &shown,
            "no .safetensors or .gguf files and no shard index".into(),
        )),
        _ => {
            let mut files = Vec::new();
            let mut ixs = Vec::new();
            for name in shards {
                let location = dir.join(&name).to_string_lossy().into_owned();
                let (ix, file) = open_shard(&location, &name, opts)?;
                files.push(file);
                ixs.push(ix);
            }
            merge(&shown, files, ixs, None)
        }
    }
}

/// In a folder of `NAME-0000i-of-0000N.safetensors` files, the first of a set's names that
/// is not there.
fn missing_shard(names: &[String]) -> Option<String> {
    let mut sets: BTreeMap<(String, String), HashSet<u64>> = BTreeMap::new();
    for n in names {
        let Some((left, count)) = n
            .strip_suffix(".safetensors")
            .and_then(|s| s.rsplit_once("-of-"))
        else {
            continue;
        };
        let Some((stem, no)) = left.rsplit_once('-') else {
            continue;
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if digits(no) && digits(count) && no.len() == count.len() {
            if let Ok(no) = no.parse() {
                sets.entry((stem.to_owned(), count.to_owned()))
                    .or_default()
                    .insert(no);
            }
        }
    }
    for ((stem, count), have) in sets {
        let n: u64 = count.parse().ok()?;
        if let Some(i) = (1..=n).find(|i| !have.contains(i)) {
            let w = count.len();
            return Some(format!("{stem}-{i:0w$}-of-{count}.safetensors"));
        }
    }
    None
}

/// One model from shards: the tensors the weight map gives each shard (all of them without a
/// map), metadata merged (the first shard's value wins).
fn merge(
    location: &str,
    files: Vec<ModelFile>,
    indexes: Vec<TensorIndex>,
    weight_map: Option<&BTreeMap<String, String>>,
) -> Result<Model> {
    let indexes_format = indexes
        .first()
        .map_or(crate::index::Format::Safetensors, |ix| ix.format.clone());
    let mut tensors: Vec<TensorInfo> = Vec::new();
    let mut shard_of: HashMap<String, usize> = HashMap::new();
    let mut metadata: BTreeMap<String, MetaValue> = BTreeMap::new();
    let (mut header_len, mut file_len) = (0, 0);
    for (i, (file, index)) in files.iter().zip(indexes).enumerate() {
        header_len += index.header_len;
        file_len += index.file_len;
        for (k, v) in index.metadata {
            metadata.entry(k).or_insert(v);
        }
        let mut have: HashSet<&str> = HashSet::new();
        for t in index.tensors {
            if let Some(map) = weight_map {
                if map.get(&t.name) != Some(&file.name) {
                    continue; // not listed for this shard: not loaded
                }
            }
            if let Some(other) = shard_of.insert(t.name.clone(), i) {
                if weight_map.is_none() {
                    // A folder of files, not one checkpoint: say so, naming both.
                    return Err(bad(
                        location,
                        format!(
                            "the folder is not one checkpoint: tensor '{}' is in both {} and {} (and there is no shard index to say which is meant)",
                            t.name, files[other].name, file.name
                        ),
                    ));
                }
                return Err(Error::new(ErrorKind::DuplicateKey)
                    .at_tensor(&t.name)
                    .in_file(Path::new(&file.location)));
            }
            tensors.push(t);
        }
        if let Some(map) = weight_map {
            have.extend(
                tensors
                    .iter()
                    .filter(|t| shard_of[&t.name] == i)
                    .map(|t| t.name.as_str()),
            );
            if let Some((name, _)) = map
                .iter()
                .find(|(n, f)| **f == file.name && !have.contains(n.as_str()))
            {
                return Err(bad(
                    location,
                    format!(
                        "weight_map puts tensor '{name}' in {}, which does not hold it",
                        file.name
                    ),
                ));
            }
        }
    }
    let index = TensorIndex {
        // Shards of one checkpoint share a format: the first one's.
        format: indexes_format,
        header_len,
        file_len,
        metadata,
        tensors,
    };
    Ok(Model {
        location: location.to_owned(),
        index,
        files,
        shard_of: Some(shard_of),
        split: None,
    })
}
