//! Opening any model: a local file or an `http(s)://` URL through the byte layer, its format
//! told by its first bytes (one loop over the registered formats), or a checkpoint (a folder
//! or a shard index).

use super::file::{open_file, read_file};
use super::{checkpoint, gguf_split, onnx_external, write_id, Model};
use crate::bytes::{is_url, ReadAt};
use crate::error::Result;
use crate::format::OpenOptions;
use std::path::Path;

/// Opens and validates a local file, a folder or index of shards, or an `http(s)://` URL (of
/// a file or of a shard index).
///
/// ```no_run
/// let model = tensorsmith::open("model.safetensors", &tensorsmith::OpenOptions::new())?;
/// for t in &model.index.tensors {
///     println!("{} {} {:?}", t.name, t.type_name(), t.shape);
/// }
/// # Ok::<(), tensorsmith::Error>(())
/// ```
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

/// A checkpoint is read only when its shards come from one write: a rewrite killed half way
/// leaves new shards beside old ones, which would read as one model of both.
fn one_write(m: Model) -> Result<Model> {
    write_id::check(&m)?;
    Ok(m)
}
