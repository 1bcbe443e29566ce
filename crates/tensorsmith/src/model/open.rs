//! Opening any model: a local file or an `http(s)://` URL through the byte layer, its format
//! told by its first bytes (one loop over the registered formats), or a checkpoint (a folder
//! or a shard index).

use super::file::{open_file, read_file};
use super::{checkpoint, gguf_split, onnx_external, write_id, Model};
use crate::bytes::{is_url, ReadAt};
use crate::error::Result;
use crate::format::OpenOptions;
use std::path::Path;

/// Opens and validates a local file, a folder or index of shards, or a URL (of a file, of a
/// shard index, or of a folder: one ending in `/`, or an `hf://ORG/REPO[@REV]` repository,
/// where `model.safetensors.index.json`, then `model.safetensors` is read).
///
/// ```no_run
/// let model = tensorsmith::open("model.safetensors", &tensorsmith::OpenOptions::new())?;
/// for t in &model.index.tensors {
///     println!("{} {} {:?}", t.name, t.type_name(), t.shape);
/// }
/// # Ok::<(), tensorsmith::Error>(())
/// ```
///
/// # Errors
///
/// Every error names the file (or URL, without credentials) it is about.
///
/// - [`ErrorKind::Io`](crate::ErrorKind::Io) when a local file or folder cannot be opened or
///   read.
/// - [`ErrorKind::NotATensorFile`](crate::ErrorKind::NotATensorFile) when no format claims the
///   file.
/// - The format's own rule when the file is not valid: the safetensors variants
///   (`HeaderJson`, `Hole`, `Truncated`, ...; see
///   [`SafetensorsFile::open_with`](crate::safetensors::SafetensorsFile::open_with)),
///   [`ErrorKind::Gguf`](crate::ErrorKind::Gguf), the `ErrorKind::Zt*` and `Cbor*` variants
///   (see [`ztensor::open`](crate::ztensor::open)),
///   [`ErrorKind::Onnx`](crate::ErrorKind::Onnx); over a limit of `opts`,
///   [`ErrorKind::HeaderTooLarge`](crate::ErrorKind::HeaderTooLarge) or
///   [`ErrorKind::ZtManifestTooLarge`](crate::ErrorKind::ZtManifestTooLarge).
/// - [`ErrorKind::BadShardIndex`](crate::ErrorKind::BadShardIndex) for a folder or shard index
///   that is not one checkpoint; [`ErrorKind::BadSplit`](crate::ErrorKind::BadSplit) for a
///   split GGUF whose parts do not make one whole (or a part, without `part_only`).
/// - For a URL, the remote kinds of `bytes::open_url`:
///   [`ErrorKind::RemoteNotFound`](crate::ErrorKind::RemoteNotFound),
///   [`ErrorKind::AccessDenied`](crate::ErrorKind::AccessDenied),
///   [`ErrorKind::Unreachable`](crate::ErrorKind::Unreachable),
///   [`ErrorKind::Http`](crate::ErrorKind::Http), ...
pub fn open(target: &str, opts: &OpenOptions) -> Result<Model> {
    if checkpoint::is_index(target) {
        return checkpoint::open_index(target, opts).and_then(one_write);
    }
    if !is_url(target) && Path::new(target).is_dir() {
        let dir = Path::new(target);
        if !checkpoint::has_safetensors(dir)? {
            if let Some(model) = gguf_split::gguf_in_dir(dir)? {
                return open(&model, opts);
            }
            if let Some(model) = onnx_external::onnx_in_dir(dir)? {
                return open(&model, opts);
            }
        }
        return checkpoint::open_dir(dir, opts).and_then(one_write);
    }
    #[cfg(feature = "remote")]
    if is_url(target) && names_folder(target) {
        return open_url_folder(target, opts);
    }
    let (index, file) = open_file(target, opts)?;
    if onnx_external::has_external(&index) {
        return onnx_external::open_with_data(target, index, file, opts);
    }
    match gguf_split::keys_of(&index, target)? {
        Some(keys) if !opts.part_only() => gguf_split::open_parts(target, index, file, keys, opts),
        _ => Ok(Model::single(target, index, file)),
    }
}

/// Opens and validates one file from bytes the caller already has access to (an open
/// descriptor as a [`crate::bytes::LocalFile`], a buffer, any [`ReadAt`]); `location` names
/// it in errors and in [`Model::location`].
///
/// # Errors
///
/// As [`open`] for one file: the format's rule that the bytes break, or
/// [`ErrorKind::NotATensorFile`](crate::ErrorKind::NotATensorFile); for one part of a split
/// GGUF (without `part_only`), [`ErrorKind::BadSplit`](crate::ErrorKind::BadSplit).
pub fn open_reader(location: &str, bytes: Box<dyn ReadAt>, opts: &OpenOptions) -> Result<Model> {
    let (index, file) = read_file(location, bytes, opts)?;
    if onnx_external::has_external(&index) {
        return onnx_external::open_with_data(location, index, file, opts);
    }
    if let Some(keys) = gguf_split::keys_of(&index, location)? {
        if !opts.part_only() && keys.count > 1 {
            return Err(crate::gguf::split::bad(format!(
                "this file is part {} of {} of a split model; open it by its path (or its \
                 folder) to read every part, or read this part alone with part_only",
                keys.no + 1,
                keys.count
            ))
            .in_file(Path::new(location)));
        }
    }
    Ok(Model::single(location, index, file))
}

/// Whether a URL names a folder rather than a file: it ends in `/`, or it is an `hf://` URL of a
/// repository (`hf://ORG/REPO[@REV]`, no path).
#[cfg(feature = "remote")]
fn names_folder(target: &str) -> bool {
    target.ends_with('/') || crate::bytes::hf_repo_name(target).is_some()
}

/// A model folder named by URL: a store or the Hub is not listed, so its files are looked for
/// by the names transformers looks for, its shard index (`model.safetensors.index.json`)
/// first, then `model.safetensors`.
#[cfg(feature = "remote")]
fn open_url_folder(target: &str, opts: &OpenOptions) -> Result<Model> {
    use crate::error::{Error, ErrorKind};
    // `s3://` alone (or `az:///`) names nothing: not the local folder `s3:`.
    if let Some((scheme, rest)) = target.split_once("://") {
        if rest.trim_matches('/').is_empty() {
            return Err(Error::new(ErrorKind::BadStorageOption(format!(
                "{scheme}:// URLs name a bucket (or container, repository) and a path:                  {scheme}://BUCKET/KEY"
            )))
            .in_file(Path::new(target)));
        }
    }
    let base = target.trim_end_matches('/');
    let index = format!("{base}/model{}", checkpoint::INDEX_SUFFIX);
    match open(&index, opts) {
        Err(e) if matches!(e.kind(), ErrorKind::RemoteNotFound(_)) => {}
        other => return other,
    }
    match open(&format!("{base}/model.safetensors"), opts) {
        Err(e) if matches!(e.kind(), ErrorKind::RemoteNotFound(_)) => {
            Err(Error::new(ErrorKind::RemoteNotFound(format!(
                "no model.safetensors.index.json nor model.safetensors in the folder {}",
                crate::bytes::redact_url(target)
            )))
            .in_file(Path::new(&crate::bytes::redact_url(target))))
        }
        other => other,
    }
}

/// A checkpoint is read only when its shards come from one write: a rewrite killed half way
/// leaves new shards beside old ones, which would read as one model of both.
fn one_write(m: Model) -> Result<Model> {
    write_id::check(&m)?;
    Ok(m)
}
