//! Opening any model file or URL by what its first bytes say: safetensors or GGUF, local
//! (memory-mapped or pread) or remote (HTTP range requests). Operations that work on the
//! neutral index (inspect, hash, diff) start here.

use crate::error::{Error, Result};
use crate::gguf::{self, GgufOptions};
use crate::index::{TensorIndex, TensorInfo};
use crate::remote::{is_url, RemoteFile};
use crate::safetensors::{self, ReadOptions};
use crate::source::{Backend, Source};
use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;

/// Options for [`open`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    pub safetensors: ReadOptions,
    pub gguf: GgufOptions,
    /// zTensor manifest limit (0: the default of 1 GiB).
    pub ztensor_max_manifest_len: u64,
}

impl OpenOptions {
    /// Options with one backend for every format.
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.safetensors.backend = backend;
        self.gguf.backend = backend;
        self
    }
}

/// Where a file's bytes are.
#[derive(Debug)]
pub enum FileBytes {
    Local(Source),
    Remote(RemoteFile),
}

impl FileBytes {
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        match self {
            FileBytes::Local(s) => s.bytes(range),
            FileBytes::Remote(r) => r.read(range).map(Cow::Owned),
        }
    }
}

/// One file of a model: the only one, or a shard of a sharded checkpoint.
#[derive(Debug)]
pub struct ModelFile {
    /// Path or URL.
    pub location: String,
    /// The name a shard index gives it (`model-00001-of-00002.safetensors`); empty for a
    /// single-file model.
    pub name: String,
    pub bytes: FileBytes,
    /// Bytes before the tensor data.
    pub header_len: u64,
    pub file_len: u64,
}

/// An opened, validated model: one file, or the shards of a checkpoint seen as one.
#[derive(Debug)]
pub struct Model {
    /// The path or URL as given.
    pub location: String,
    /// Every tensor; byte ranges are within each tensor's own file.
    pub index: TensorIndex,
    pub files: Vec<ModelFile>,
    /// For a sharded model: which of `files` holds each tensor, by name.
    shard_of: Option<std::collections::HashMap<String, usize>>,
}

impl Model {
    /// A model of one file.
    pub fn single(location: &str, index: TensorIndex, bytes: FileBytes) -> Model {
        let file = ModelFile {
            location: location.to_owned(),
            name: String::new(),
            bytes,
            header_len: index.header_len,
            file_len: index.file_len,
        };
        Model {
            location: location.to_owned(),
            index,
            files: vec![file],
            shard_of: None,
        }
    }

    /// A model of several files; `shard_of` maps every tensor name to its file.
    pub fn sharded(
        location: &str,
        index: TensorIndex,
        files: Vec<ModelFile>,
        shard_of: std::collections::HashMap<String, usize>,
    ) -> Model {
        Model {
            location: location.to_owned(),
            index,
            files,
            shard_of: Some(shard_of),
        }
    }

    pub fn is_sharded(&self) -> bool {
        self.shard_of.is_some()
    }

    /// The file holding tensor `t`.
    pub fn file_of(&self, t: &TensorInfo) -> &ModelFile {
        match &self.shard_of {
            None => &self.files[0],
            Some(m) => &self.files[m[&t.name]],
        }
    }

    /// Stored bytes of `range` in the file of tensor `t` (zero-copy from a memory map;
    /// fetched for a remote file). For tensors that are not [`Model::is_plain`], stored bytes
    /// are not the values: use [`Model::part_bytes`].
    pub fn read(&self, t: &TensorInfo, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        let f = self.file_of(t);
        f.bytes
            .read(range)
            .map_err(|e: Error| e.at_tensor(&t.name).in_file(Path::new(&f.location)))
    }

    /// The bytes before the tensor data of file `i` (for safetensors: the length and the
    /// JSON header).
    pub fn header_bytes(&self, i: usize) -> Result<Cow<'_, [u8]>> {
        let f = &self.files[i];
        f.bytes
            .read(0..f.header_len)
            .map_err(|e: Error| e.in_file(Path::new(&f.location)))
    }

    /// One part stored raw and little-endian in this file: its stored bytes are its values,
    /// and any sub-range can be read on its own.
    pub fn is_plain(&self, t: &TensorInfo) -> bool {
        t.parts.len() == 1 && t.parts[0].is_zero_copy()
    }

    /// Part `i` of tensor `t`, decoded (decompressed, little-endian); zero-copy when stored raw.
    pub fn part_bytes(&self, t: &TensorInfo, i: usize) -> Result<Cow<'_, [u8]>> {
        let p = &t.parts[i];
        if p.is_zero_copy() {
            return self.read(t, p.range.clone());
        }
        let f = self.file_of(t);
        let at = |e: Error| e.at_tensor(&t.name).in_file(Path::new(&f.location));
        match &f.bytes {
            FileBytes::Local(s) => crate::ztensor::decode_part(s, p, false).map_err(at),
            FileBytes::Remote(_) => Err(at(Error::new(crate::ErrorKind::Unsupported(
                "decoding compressed parts of remote files".into(),
            )))),
        }
    }

    /// A dense tensor's values (decoded).
    pub fn tensor_bytes(&self, t: &TensorInfo) -> Result<Cow<'_, [u8]>> {
        if t.layout != crate::index::Layout::Dense
            && !matches!(t.layout, crate::index::Layout::Ggml(_))
        {
            return Err(Error::new(crate::ErrorKind::Unsupported(format!(
                "{:?} tensors have no single run of values (read their parts)",
                t.layout
            )))
            .at_tensor(&t.name)
            .in_file(Path::new(&self.file_of(t).location)));
        }
        self.part_bytes(t, 0)
    }
}

/// The formats [`open`] tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    Safetensors,
    Gguf,
    Ztensor,
}

/// Decides the format from the first bytes: GGUF by its magic, safetensors otherwise (its
/// reader then gives the precise error if it is not safetensors either).
pub fn sniff(first: &[u8]) -> Sniffed {
    if first.starts_with(b"GGUF") {
        Sniffed::Gguf
    } else if crate::ztensor::detect(first).is_some() {
        Sniffed::Ztensor
    } else {
        Sniffed::Safetensors
    }
}

/// First bytes fetched from a remote file: enough for most headers of either format.
const REMOTE_FIRST_READ: u64 = 256 << 10;

/// Opens and validates a local file, a folder or index of shards, or an `http(s)://` URL (of
/// a file or of a shard index).
pub fn open(target: &str, opts: &OpenOptions) -> Result<Model> {
    if crate::ops::sharded::is_index(target) {
        return crate::ops::sharded::open_index(target, &opts.safetensors);
    }
    if !is_url(target) && Path::new(target).is_dir() {
        return crate::ops::sharded::open_dir(Path::new(target), &opts.safetensors);
    }
    if is_url(target) {
        let (remote, first) = RemoteFile::open(target, REMOTE_FIRST_READ)?;
        let index = match sniff(&first) {
            Sniffed::Gguf => gguf::header_from_remote(&remote, first, &opts.gguf)?.to_index(),
            Sniffed::Safetensors => {
                safetensors::read::index_from_remote(&remote, &first, &opts.safetensors)?
            }
            Sniffed::Ztensor => {
                return Err(Error::new(crate::ErrorKind::Unsupported(
                    "zTensor files over HTTP (download them first)".into(),
                ))
                .in_file(Path::new(target)))
            }
        };
        return Ok(Model::single(target, index, FileBytes::Remote(remote)));
    }
    let path = Path::new(target);
    let mut first = [0u8; 8];
    let n;
    {
        let probe = Source::open(path, Backend::Pread)?;
        n = probe.len().min(8) as usize;
        probe
            .read_exact_at(0, &mut first[..n])
            .map_err(|e| e.in_file(path))?;
    }
    match sniff(&first[..n]) {
        Sniffed::Ztensor => {
            let zopts = crate::ztensor::OpenOptions {
                max_manifest_len: match opts.ztensor_max_manifest_len {
                    0 => crate::ztensor::DEFAULT_MAX_MANIFEST_LEN,
                    n => n,
                },
                backend: opts.safetensors.backend,
            };
            let (index, source) = crate::ztensor::open(path, &zopts)?.into_parts();
            Ok(Model::single(target, index, FileBytes::Local(source)))
        }
        Sniffed::Gguf => {
            let f = gguf::GgufFile::open_with(path, &opts.gguf)?;
            let index = f.header().to_index();
            Ok(Model::single(
                target,
                index,
                FileBytes::Local(f.into_source()),
            ))
        }
        Sniffed::Safetensors => {
            let f = safetensors::SafetensorsFile::open_with(path, &opts.safetensors)?;
            let (index, source) = f.into_parts();
            Ok(Model::single(target, index, FileBytes::Local(source)))
        }
    }
}
