//! One file of a model: its bytes (a local file or a URL: `http(s)://`, `s3://`, `hf://`, through the byte
//! layer), the format its first bytes name (one loop over the registered formats), and the
//! index that format's reader validated.

use crate::bytes::{is_url, scheme_name, LocalFile, ReadAt};
use crate::error::{Error, Result};
use crate::format::{FileFormat, OpenOptions, SNIFF_LEN};
use crate::formats;
use crate::index::TensorIndex;
use std::path::Path;

/// First bytes fetched from a remote file when it is opened: most headers of every format fit,
/// so one request is enough.
#[cfg(feature = "remote")]
const REMOTE_FIRST_READ: u64 = 256 << 10;

/// One file of a model: the only one, or a shard of a sharded checkpoint.
#[derive(Debug)]
pub struct ModelFile {
    /// Path or URL.
    pub location: String,
    /// The name a shard index gives it (`model-00001-of-00002.safetensors`); empty for a
    /// single-file model.
    pub name: String,
    /// Bytes before the tensor data.
    pub header_len: u64,
    /// Length of the file in bytes.
    pub file_len: u64,
    /// SHA-1 hex digests recorded for the whole file, each with a tensor that records it
    /// (ONNX external data `checksum`); checked by `verify`.
    pub sha1: Vec<(String, String)>,
    bytes: Box<dyn ReadAt>,
    format: &'static dyn FileFormat,
}

impl ModelFile {
    /// A file holding only tensor bytes for another file's index (ONNX external data), read
    /// as `format` reads raw parts.
    pub(crate) fn data_file(
        location: String,
        name: String,
        bytes: Box<dyn ReadAt>,
        format: &'static dyn FileFormat,
    ) -> ModelFile {
        ModelFile {
            location,
            name,
            header_len: 0,
            file_len: bytes.len(),
            sha1: Vec::new(),
            bytes,
            format,
        }
    }

    /// Where the file's bytes come from (a map, pread, HTTP ranges, memory).
    pub fn bytes(&self) -> &dyn ReadAt {
        &*self.bytes
    }

    /// The format that read the file.
    pub fn format(&self) -> &'static dyn FileFormat {
        self.format
    }

    /// `e`, naming this file.
    pub(crate) fn at(&self, e: Error) -> Error {
        e.in_file(Path::new(&self.location))
    }
}

/// The scheme of a `scheme://…` location that no byte source reads (`gs`, `az`, `ftp`).
fn unread_scheme(location: &str) -> Option<&str> {
    scheme_name(location).filter(|_| !is_url(location))
}

/// The bytes of a local path or a URL.
pub(crate) fn open_bytes(location: &str, opts: &OpenOptions) -> Result<Box<dyn ReadAt>> {
    if let Some(scheme) = unread_scheme(location) {
        return Err(Error::new(crate::error::ErrorKind::Unsupported(format!(
            "unsupported URL scheme \"{scheme}\" (local paths and http(s)://, s3://, s3a:// \
             and hf:// URLs are read)"
        )))
        .in_file(Path::new(location)));
    }
    if is_url(location) {
        #[cfg(feature = "remote")]
        return crate::bytes::open_url(location, opts.storage_options(), REMOTE_FIRST_READ);
        #[cfg(not(feature = "remote"))]
        return Err(Error::new(crate::error::ErrorKind::Unsupported(
            "http(s) URLs (this build has no `remote` feature)".into(),
        ))
        .in_file(Path::new(location)));
    }
    Ok(Box::new(LocalFile::open(
        Path::new(location),
        opts.backend(),
    )?))
}

/// One file, its format told by its first bytes, validated by that format's reader.
pub(crate) fn open_file(location: &str, opts: &OpenOptions) -> Result<(TensorIndex, ModelFile)> {
    read_file(location, open_bytes(location, opts)?, opts)
}

/// One file whose bytes the caller opened (a descriptor, a reader over a file object), its
/// format told by its first bytes; `location` names it in errors.
pub(crate) fn read_file(
    location: &str,
    bytes: Box<dyn ReadAt>,
    opts: &OpenOptions,
) -> Result<(TensorIndex, ModelFile)> {
    let at = |e: Error| e.in_file(Path::new(location));
    let first = bytes
        .read(0..bytes.len().min(SNIFF_LEN as u64))
        .map_err(at)?;
    let format = formats::sniff_named(location, &first);
    drop(first);
    let index = format.read_index(&*bytes, opts).map_err(at)?;
    let file = ModelFile {
        location: location.to_owned(),
        name: String::new(),
        header_len: index.header_len,
        file_len: index.file_len,
        sha1: Vec::new(),
        bytes,
        format,
    };
    Ok((index, file))
}
