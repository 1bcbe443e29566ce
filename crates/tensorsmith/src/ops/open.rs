//! Opening any model file or URL by what its first bytes say: safetensors or GGUF, local
//! (memory-mapped or pread) or remote (HTTP range requests). Operations that work on the
//! neutral index (inspect, hash, diff) start here.

use crate::error::{Error, Result};
use crate::gguf::{self, GgufOptions};
use crate::index::TensorIndex;
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
}

impl OpenOptions {
    /// Options with one backend for every format.
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.safetensors.backend = backend;
        self.gguf.backend = backend;
        self
    }
}

/// Where a model's bytes are.
#[derive(Debug)]
pub enum ModelBytes {
    Local(Source),
    Remote(RemoteFile),
}

/// An opened, validated model: its index and access to its bytes.
#[derive(Debug)]
pub struct Model {
    /// The path or URL as given.
    pub location: String,
    pub index: TensorIndex,
    pub bytes: ModelBytes,
}

impl Model {
    /// Bytes of `range` (zero-copy from a memory map; fetched for a remote file).
    pub fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        let at = |e: Error| e.in_file(Path::new(&self.location));
        match &self.bytes {
            ModelBytes::Local(s) => s.bytes(range).map_err(at),
            ModelBytes::Remote(r) => r.read(range).map(Cow::Owned).map_err(at),
        }
    }
}

/// The formats [`open`] tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    Safetensors,
    Gguf,
}

/// Decides the format from the first bytes: GGUF by its magic, safetensors otherwise (its
/// reader then gives the precise error if it is not safetensors either).
pub fn sniff(first: &[u8]) -> Sniffed {
    if first.starts_with(b"GGUF") {
        Sniffed::Gguf
    } else {
        Sniffed::Safetensors
    }
}

/// First bytes fetched from a remote file: enough for most headers of either format.
const REMOTE_FIRST_READ: u64 = 256 << 10;

/// Opens and validates a local file or an `http(s)://` URL.
pub fn open(target: &str, opts: &OpenOptions) -> Result<Model> {
    if is_url(target) {
        let (remote, first) = RemoteFile::open(target, REMOTE_FIRST_READ)?;
        let index = match sniff(&first) {
            Sniffed::Gguf => gguf::header_from_remote(&remote, first, &opts.gguf)?.to_index(),
            Sniffed::Safetensors => {
                safetensors::read::index_from_remote(&remote, &first, &opts.safetensors)?
            }
        };
        return Ok(Model {
            location: target.to_owned(),
            index,
            bytes: ModelBytes::Remote(remote),
        });
    }
    let path = Path::new(target);
    let mut first = [0u8; 4];
    {
        let probe = Source::open(path, Backend::Pread)?;
        let n = probe.len().min(4) as usize;
        probe
            .read_exact_at(0, &mut first[..n])
            .map_err(|e| e.in_file(path))?;
    }
    match sniff(&first) {
        Sniffed::Gguf => {
            let f = gguf::GgufFile::open_with(path, &opts.gguf)?;
            let index = f.header().to_index();
            Ok(Model {
                location: target.to_owned(),
                index,
                bytes: ModelBytes::Local(f.into_source()),
            })
        }
        Sniffed::Safetensors => {
            let f = safetensors::SafetensorsFile::open_with(path, &opts.safetensors)?;
            let (index, source) = f.into_parts();
            Ok(Model {
                location: target.to_owned(),
                index,
                bytes: ModelBytes::Local(source),
            })
        }
    }
}
