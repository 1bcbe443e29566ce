//! GGUF (llama.cpp's format), read-only: little-endian versions 1 to 3, every metadata value
//! type including nested arrays, tensor infos with ggml block types, alignment, and bounds
//! checks as strict as the other readers. [`GgufFile::open`] validates a file; [`parse_bytes`]
//! does the same for bytes in memory; [`parse_prefix`] works from the first bytes only (for
//! pread and HTTP range reads).

pub mod ggml_types;
mod parse;
pub mod rules;
pub mod value;

pub use ggml_types::GgmlType;
pub use parse::{DEFAULT_ALIGNMENT, MAX_DIMS};
pub use rules::GgufRule;
pub use value::{Array, Value, ValueType};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::index::{Format, Layout, Part, Shape, TensorIndex, TensorInfo};
use crate::source::{Backend, Source};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Options for reading GGUF.
#[derive(Debug, Clone)]
pub struct GgufOptions {
    /// Deepest nesting of arrays inside arrays accepted (each level costs a stack frame).
    pub max_array_depth: usize,
    pub backend: Backend,
}

/// Default for [`GgufOptions::max_array_depth`].
pub const DEFAULT_MAX_ARRAY_DEPTH: usize = 64;

impl Default for GgufOptions {
    fn default() -> Self {
        GgufOptions {
            max_array_depth: DEFAULT_MAX_ARRAY_DEPTH,
            backend: Backend::Mmap,
        }
    }
}

/// One tensor info.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufTensor {
    pub name: String,
    /// Dimensions in ggml order: `ne[0]` (the contiguous one) first.
    pub ne: Shape,
    pub ggml_type: GgmlType,
    /// Offset from the start of the data section, as stored.
    pub offset: u64,
    /// Bytes taken, from the type's block geometry.
    pub byte_len: u64,
    /// Absolute byte range in the file.
    pub range: Range<u64>,
}

impl GgufTensor {
    /// Dimensions outermost first (row-major, as NumPy and safetensors show them): `ne`
    /// reversed.
    pub fn shape(&self) -> Shape {
        self.ne.iter().rev().copied().collect()
    }

    pub fn elements(&self) -> u64 {
        self.ne.iter().product()
    }
}

/// A validated GGUF header.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    /// Tensor infos in file order.
    pub tensors: Vec<GgufTensor>,
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_start: u64,
    pub file_len: u64,
}

impl GgufHeader {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The neutral index: shapes outermost first, plain ggml types as their dtypes, block
    /// types as [`Layout::Ggml`] over `U8` bytes; metadata widened to [`MetaValue`]s.
    pub fn to_index(&self) -> TensorIndex {
        let tensors = self
            .tensors
            .iter()
            .map(|t| {
                let (dtype, layout) = match t.ggml_type.dtype() {
                    Some(d) => (d, Layout::Dense),
                    None => (DType::U8, Layout::Ggml(t.ggml_type)),
                };
                TensorInfo {
                    name: t.name.clone(),
                    dtype,
                    shape: t.shape(),
                    layout,
                    parts: smallvec::smallvec![Part::raw("data", dtype, t.range.clone())],
                    attributes: Default::default(),
                }
            })
            .collect();
        TensorIndex {
            format: Format::Gguf {
                version: self.version,
            },
            header_len: self.data_start.min(self.file_len),
            file_len: self.file_len,
            metadata: self
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.to_meta()))
                .collect(),
            tensors,
        }
    }
}

/// Validates a whole GGUF file held in memory.
pub fn parse_bytes(bytes: &[u8], opts: &GgufOptions) -> Result<GgufHeader> {
    match parse::parse(bytes, bytes.len() as u64, opts) {
        Ok(h) => Ok(h),
        Err(parse::Stop::Err(e)) => Err(e),
        Err(parse::Stop::NeedMore(_)) => unreachable!("the whole file is in memory"),
    }
}

/// Parses from the first bytes of a file of `file_len` bytes. `Ok(Err(n))` asks to be called
/// again with at least `n` bytes.
pub fn parse_prefix(
    prefix: &[u8],
    file_len: u64,
    opts: &GgufOptions,
) -> Result<std::result::Result<GgufHeader, u64>> {
    match parse::parse(prefix, file_len, opts) {
        Ok(h) => Ok(Ok(h)),
        Err(parse::Stop::Err(e)) => Err(e),
        Err(parse::Stop::NeedMore(n)) => Ok(Err(n)),
    }
}

/// An opened, validated GGUF file.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    source: Source,
    header: GgufHeader,
}

/// First read of a pread-backed file; doubled until the header fits.
const FIRST_READ: u64 = 1 << 20;

impl GgufFile {
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        Self::open_with(path, &GgufOptions::default())
    }

    pub fn open_with(path: impl AsRef<Path>, opts: &GgufOptions) -> Result<GgufFile> {
        let path = path.as_ref();
        Self::open_inner(path, opts).map_err(|e| e.in_file(path))
    }

    fn open_inner(path: &Path, opts: &GgufOptions) -> Result<GgufFile> {
        let source = Source::open(path, opts.backend)?;
        let len = source.len();
        let header = match &source {
            Source::Mmap { map, .. } => parse_bytes(map, opts)?,
            Source::Pread { .. } => {
                let mut want = FIRST_READ.min(len);
                loop {
                    let prefix = source.bytes(0..want)?;
                    match parse_prefix(&prefix, len, opts)? {
                        Ok(h) => break h,
                        Err(n) => want = n.min(len),
                    }
                }
            }
        };
        Ok(GgufFile {
            path: path.to_path_buf(),
            source,
            header,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    pub fn into_source(self) -> Source {
        self.source
    }

    /// A tensor's stored bytes (zero-copy with the mmap backend).
    pub fn tensor_bytes(&self, t: &GgufTensor) -> Result<std::borrow::Cow<'_, [u8]>> {
        self.source
            .bytes(t.range.clone())
            .map_err(|e: Error| e.at_tensor(&t.name).in_file(&self.path))
    }
}

/// Validates the header of a remote GGUF file over HTTP range requests: the first MiB, then
/// more (doubling) only if the header is longer.
pub fn open_remote(
    url: &str,
    opts: &GgufOptions,
) -> Result<(GgufHeader, crate::remote::RemoteFile)> {
    let (remote, first) = crate::remote::RemoteFile::open(url, FIRST_READ)?;
    let header = header_from_remote(&remote, first, opts)?;
    Ok((header, remote))
}

/// Validates the header of a remote file whose first bytes are `prefix`, fetching more
/// (doubling) while the header runs past what is held.
pub fn header_from_remote(
    remote: &crate::remote::RemoteFile,
    mut prefix: Vec<u8>,
    opts: &GgufOptions,
) -> Result<GgufHeader> {
    let at = |e: Error| e.in_file(Path::new(remote.url()));
    let len = remote.len();
    loop {
        match parse_prefix(&prefix, len, opts).map_err(at)? {
            Ok(h) => return Ok(h),
            Err(n) => {
                let more = remote.read(prefix.len() as u64..n.min(len))?;
                prefix.extend_from_slice(&more);
            }
        }
    }
}
