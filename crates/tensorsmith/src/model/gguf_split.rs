//! A split GGUF model opened as one: any part (local or URL) names the others by the naming
//! rule of `gguf::split`, and every part is checked before anything is read from it:
//! - every part from 1 to `split.count` is present, and its `split.no` is the one its name
//!   gives (so each number appears once);
//! - every part agrees on `split.count` and `split.tensors.count`;
//! - the tensors add up to `split.tensors.count`, and no name is in two parts.
//!
//! The model's metadata is the first part's, without the `split.*` keys ([`Model::split`]
//! describes the split). A folder of GGUF files opens its one model; a folder of several
//! (quant variants, an `mmproj-*.gguf` beside the parts) is refused, naming them.

use super::file::{open_file, ModelFile};
use super::{Model, Split};
use crate::bytes::is_http_url;
use crate::error::{Error, ErrorKind, Result};
use crate::format::OpenOptions;
use crate::gguf::split::{bad, is_split_key, parse_part_name, part_name, split_keys, SplitKeys};
use crate::index::{Format, TensorIndex};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The split keys of a GGUF file's index, `None` for other formats and for whole files.
pub(super) fn keys_of(index: &TensorIndex, location: &str) -> Result<Option<SplitKeys>> {
    if !matches!(index.format, Format::Gguf { .. }) {
        return Ok(None);
    }
    split_keys(&index.metadata).map_err(|e| e.in_file(Path::new(location)))
}

/// `location` split into the part before the file name, the file name, and a URL's query.
fn name_parts(location: &str) -> (&str, &str, &str) {
    let (path, query) = match (is_http_url(location), location.find(['?', '#'])) {
        (true, Some(i)) => location.split_at(i),
        _ => (location, ""),
    };
    let cut = path.rfind('/').map_or(0, |i| i + 1);
    (&path[..cut], &path[cut..], query)
}

/// Opens every part of the split model that `first` (already opened at `location`, with
/// `keys`) belongs to, as one model.
pub(super) fn open_parts(
    location: &str,
    index: TensorIndex,
    file: ModelFile,
    keys: SplitKeys,
    opts: &OpenOptions,
) -> Result<Model> {
    let at = |e: Error| e.in_file(Path::new(location));
    let (prefix, name, query) = name_parts(location);
    let Some(parsed) = parse_part_name(name) else {
        if keys.count == 1 {
            return assemble(location, vec![(index, file)], keys);
        }
        return Err(at(bad(format!(
            "this file is part {} of {} of a split model, but its name does not end in \
             -NNNNN-of-NNNNN.gguf, so the other parts cannot be found (name the parts as \
             gguf-split does, or pass --part-only to read this part alone)",
            keys.no + 1,
            keys.count
        ))));
    };
    if (parsed.no, parsed.count) != (keys.no + 1, keys.count) {
        return Err(at(bad(format!(
            "named part {} of {}, but its keys say {} {} of {} {}",
            parsed.no, parsed.count, "split.no", keys.no, "split.count", keys.count
        ))));
    }
    let mut given = Some((index, file));
    let mut parts = Vec::with_capacity(keys.count as usize);
    for no in 1..=keys.count {
        let part = part_name(parsed.stem, no, keys.count);
        let part_location = format!("{prefix}{part}{query}");
        let (ix, mut f) = if no == parsed.no {
            given.take().expect("the given part is taken once")
        } else {
            open_part(&part_location, no, keys.count, opts)?
        };
        f.name = part;
        parts.push((ix, f));
    }
    assemble(location, parts, keys)
}

/// Part `no` of `count`, opened; a missing or unreadable part is a split error naming it.
fn open_part(
    location: &str,
    no: u64,
    count: u64,
    opts: &OpenOptions,
) -> Result<(TensorIndex, ModelFile)> {
    open_file(location, opts).map_err(|e| match e.kind() {
        ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            bad(format!("part {no} of {count} is missing")).in_file(Path::new(location))
        }
        ErrorKind::Io(_) | ErrorKind::Http(_) => {
            bad(format!("part {no} of {count} is unreadable: {}", e.kind()))
                .in_file(Path::new(location))
        }
        _ => e,
    })
}

/// The parts, in order, checked against each other and made one model.
fn assemble(
    location: &str,
    parts: Vec<(TensorIndex, ModelFile)>,
    first_keys: SplitKeys,
) -> Result<Model> {
    let mut tensors = Vec::new();
    let mut shard_of: HashMap<String, usize> = HashMap::new();
    let (mut header_len, mut file_len) = (0, 0);
    let mut files = Vec::with_capacity(parts.len());
    let mut metadata = BTreeMap::new();
    let mut format = None;
    for (i, (index, file)) in parts.into_iter().enumerate() {
        let here = |e: Error| e.in_file(Path::new(&file.location));
        let keys = keys_of(&index, &file.location)?.ok_or_else(|| {
            here(bad(format!(
                "part {} of {} has no split keys (not a GGUF part)",
                i + 1,
                first_keys.count
            )))
        })?;
        if keys.no != i as u64 {
            return Err(here(bad(format!(
                "part {} says split.no {} (each part's number must appear once)",
                i + 1,
                keys.no
            ))));
        }
        if (keys.count, keys.tensors) != (first_keys.count, first_keys.tensors) {
            return Err(here(bad(format!(
                "split.count {} and split.tensors.count {} disagree with the other parts' {} and {}",
                keys.count, keys.tensors, first_keys.count, first_keys.tensors
            ))));
        }
        header_len += index.header_len;
        file_len += index.file_len;
        if i == 0 {
            format = Some(index.format.clone());
            metadata = index.metadata;
            metadata.retain(|k, _| !is_split_key(k));
        }
        for t in index.tensors {
            if let Some(other) = shard_of.insert(t.name.clone(), i) {
                let other: &ModelFile = &files[other];
                return Err(here(
                    bad(format!("tensor '{}' is also in {}", t.name, other.name))
                        .at_tensor(&t.name),
                ));
            }
            tensors.push(t);
        }
        files.push(file);
    }
    if tensors.len() as u64 != first_keys.tensors {
        return Err(bad(format!(
            "the {} parts hold {} tensors, but split.tensors.count says {}",
            first_keys.count,
            tensors.len(),
            first_keys.tensors
        ))
        .in_file(Path::new(location)));
    }
    Ok(Model {
        location: location.to_owned(),
        index: TensorIndex {
            format: format.unwrap_or(Format::Gguf { version: 3 }),
            header_len,
            file_len,
            metadata,
            tensors,
        },
        files,
        shard_of: Some(shard_of),
        split: Some(Split {
            count: first_keys.count,
            tensors: first_keys.tensors,
        }),
    })
}

/// The models among a folder's `.gguf` files: parts grouped by stem and count, any other
/// file a model of its own. Each entry is the name to open and how it is shown.
pub(super) fn models_in(names: &[String]) -> Vec<(String, String)> {
    let mut seen: BTreeMap<(String, u64), (u64, String)> = BTreeMap::new();
    let mut out = Vec::new();
    for name in names {
        match parse_part_name(name) {
            Some(p) => {
                let e = seen
                    .entry((p.stem.to_owned(), p.count))
                    .or_insert((u64::MAX, String::new()));
                if p.no < e.0 {
                    *e = (p.no, name.clone());
                }
            }
            None => out.push((name.clone(), name.clone())),
        }
    }
    for ((stem, count), (_, name)) in seen {
        out.push((name, format!("{stem} ({count} parts)")));
    }
    out.sort();
    out
}

/// The model to open in a folder without safetensors files or shard index: its one GGUF
/// model (a part of it, or the file); `None` when it holds no `.gguf` file; an error naming
/// the models when it holds several.
pub(super) fn gguf_in_dir(dir: &Path) -> Result<Option<String>> {
    let at = |e: std::io::Error| Error::from(e).in_file(dir);
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(at)? {
        let entry = entry.map_err(at)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_gguf = Path::new(&name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
        if is_gguf && !name.starts_with('.') && entry.path().is_file() {
            names.push(name);
        }
    }
    let models = models_in(&names);
    match models.as_slice() {
        [] => Ok(None),
        [(name, _)] => Ok(Some(dir.join(name).to_string_lossy().into_owned())),
        _ => Err(bad(format!(
            "the folder holds {} GGUF models: {}; name the one to open",
            models.len(),
            models
                .iter()
                .map(|(_, shown)| shown.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .in_file(dir)),
    }
}
