//! Where a Hugging Face model folder's small files are read: config.json, generation_config.json,
//! the tokenizer files, the chat template and the model card (README.md). A local folder is read in place. A remote one
//! (`hf://ORG/REPO[@REV]`, an `s3://`, `az://`, `gs://` or `http(s)://` URL of the folder),
//! whose weights are read by range where they lie, has those files fetched whole into a
//! temporary folder first: they are small (a tokenizer.json is a few MiB), the tokenizer code
//! reads them from a folder, and the reference converter reads a local snapshot too.

use crate::error::Result;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A model folder: where its small files are, how errors name it, and its name (what the
/// reference's `general.name` heuristics read when config.json does not say).
pub struct Folder {
    /// The local folder the small files are read from: the model folder itself, or for a
    /// remote model the temporary folder they were fetched into.
    pub path: PathBuf,
    /// The folder as errors show it: the path as given, or the URL with credentials redacted.
    pub shown: String,
    /// The folder's own name (the last path or URL segment), for `general.name`.
    pub name: String,
    /// The temporary folder holding a remote folder's small files, removed with this.
    #[cfg(feature = "remote")]
    _fetched: Option<tempfile::TempDir>,
}

/// The small files the conversion reads, beside the weights.
#[cfg(feature = "remote")]
const SMALL_FILES: &[&str] = &[
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
    "README.md",
];

/// The most bytes a small file may have (a tokenizer.json of a large vocabulary is ~30 MiB).
#[cfg(feature = "remote")]
const SMALL_FILE_LIMIT: u64 = 256 << 20;

fn names_architecture(config: &[u8]) -> bool {
    serde_json::from_slice::<Value>(config)
        .ok()
        .is_some_and(|c| c.get("architectures").is_some_and(Value::is_array))
}

/// Whether `path` is a local folder holding a Hugging Face model: a config.json that names an
/// architecture.
pub fn is_hf_folder(path: &Path) -> bool {
    path.is_dir()
        && std::fs::read(path.join("config.json"))
            .ok()
            .is_some_and(|b| names_architecture(&b))
}

/// The Hugging Face model folder that `location` (a model's, as opened: a folder, its shard
/// index or its `model.safetensors`, local or remote) belongs to: one whose config.json names
/// an architecture. `None` when there is none (a remote folder without a config.json
/// included); an error when the remote folder could not be read.
pub fn folder_of(location: &str, storage: &crate::bytes::StorageOptions) -> Result<Option<Folder>> {
    let _ = storage;
    if crate::bytes::is_url(location) {
        #[cfg(feature = "remote")]
        return remote(location, storage);
        #[cfg(not(feature = "remote"))]
        return Ok(None);
    }
    let p = Path::new(location);
    let dir = if p.is_dir() {
        p.to_path_buf()
    } else if location.ends_with(crate::model::checkpoint::INDEX_SUFFIX) {
        match p.parent() {
            Some(d) if d.as_os_str().is_empty() => PathBuf::from("."),
            Some(d) => d.to_path_buf(),
            None => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    if !is_hf_folder(&dir) {
        return Ok(None);
    }
    let name = std::fs::canonicalize(&dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.to_string_lossy().into_owned());
    Ok(Some(Folder {
        shown: dir.to_string_lossy().into_owned(),
        path: dir,
        name,
        #[cfg(feature = "remote")]
        _fetched: None,
    }))
}

/// A remote model's folder: the URL up to the model file's name, when a config.json there
/// names an architecture; its small files fetched into a temporary folder.
#[cfg(feature = "remote")]
fn remote(location: &str, storage: &crate::bytes::StorageOptions) -> Result<Option<Folder>> {
    let file = location.rsplit('/').next().unwrap_or_default();
    if !(file.ends_with(".safetensors") || file.ends_with(crate::model::checkpoint::INDEX_SUFFIX)) {
        return Ok(None);
    }
    let base = &location[..location.len() - file.len()];
    let fetch = |name: &str| -> Result<Option<Vec<u8>>> {
        let url = format!("{base}{name}");
        let f = match crate::bytes::open_url(&url, storage, 1 << 20) {
            Ok(f) => f,
            Err(e) if absent(e.kind()) => return Ok(None),
            Err(e) => return Err(e),
        };
        let len = f.len();
        if len > SMALL_FILE_LIMIT {
            return Err(super::refuse(
                &crate::bytes::redact_url(&url),
                &format!("{len} bytes: over the {SMALL_FILE_LIMIT}-byte limit of a model folder's small files"),
            ));
        }
        Ok(Some(f.read(0..len)?.into_owned()))
    };
    let config = match fetch("config.json")? {
        Some(c) if names_architecture(&c) => c,
        _ => return Ok(None),
    };
    let name = folder_name(base);
    let tmp = tempfile::Builder::new()
        .prefix(".tensorsmith-hf-")
        .tempdir()
        .map_err(crate::Error::from)?;
    // The folder's own name below the temporary one: part of what general.name is made of.
    let path = tmp
        .path()
        .join(if name.is_empty() { "model" } else { &name });
    std::fs::create_dir(&path).map_err(|e| crate::Error::from(e).in_file(&path))?;
    for f in SMALL_FILES {
        let bytes = match *f {
            "config.json" => Some(config.clone()),
            _ => fetch(f)?,
        };
        if let Some(b) = bytes {
            let to = path.join(f);
            std::fs::write(&to, b).map_err(|e| crate::Error::from(e).in_file(&to))?;
        }
    }
    Ok(Some(Folder {
        path,
        shown: crate::bytes::redact_url(base.trim_end_matches('/')),
        name,
        _fetched: Some(tmp),
    }))
}

/// Whether an error says the file is not there for us: missing (a store's or the Hub's 404,
/// a plain server's 404 or 410), or not ours to read (403: a store refuses a missing key to a
/// reader that may not list). Anything else (an unreachable endpoint, a 5xx after retries) is
/// an error, not "no model folder": a folder read half would give another file.
#[cfg(feature = "remote")]
fn absent(kind: &crate::error::ErrorKind) -> bool {
    use crate::error::ErrorKind;
    match kind {
        ErrorKind::RemoteNotFound(_) | ErrorKind::AccessDenied(_) => true,
        ErrorKind::Http(m) => ["404", "410", "403"]
            .iter()
            .any(|c| m.starts_with(&format!("HTTP status {c}"))),
        _ => false,
    }
}

/// The name of a remote folder: its last path segment; for the root of a Hub repository, the
/// repository's name (without the revision).
#[cfg(feature = "remote")]
fn folder_name(base: &str) -> String {
    let trimmed = base.trim_end_matches('/');
    if let Some(repo) = crate::bytes::hf_repo_name(trimmed) {
        return repo;
    }
    let last = trimmed.rsplit('/').next().unwrap_or_default();
    last.split(['?', '#'])
        .next()
        .unwrap_or_default()
        .to_string()
}

#[cfg(all(test, feature = "remote"))]
mod tests {
    use super::folder_name;

    #[test]
    fn a_remote_folder_is_named_as_a_local_snapshot_would_be() {
        assert_eq!(folder_name("hf://Qwen/Qwen3-8B/"), "Qwen3-8B");
        assert_eq!(folder_name("hf://Qwen/Qwen3-8B@v1.0/"), "Qwen3-8B");
        assert_eq!(folder_name("hf://org/repo@refs/pr/3/"), "repo");
        assert_eq!(folder_name("hf://org/repo/sub/dir/"), "dir");
        assert_eq!(folder_name("s3://bucket/models/llama-3/"), "llama-3");
    }
}
