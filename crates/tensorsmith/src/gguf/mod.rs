//! GGUF (llama.cpp's format): little-endian versions 1 to 3, every metadata value
//! type including nested arrays, tensor infos with ggml block types, alignment, and bounds
//! checks as strict as the other readers. [`GgufFile::open`] validates a file; [`parse_bytes`]
//! does the same for bytes in memory; [`parse_prefix`] works from the first bytes only (for
//! pread and HTTP range reads). [`Writer`] writes v3 files as gguf-py's `GGUFWriter` does.

mod format;
mod parse;
pub mod split;
mod value;
mod write;
mod write_meta;
mod write_split;

pub use crate::error::GgufRule;
pub use crate::ggml_type::GgmlType;
pub use format::Gguf;
pub use parse::{DEFAULT_ALIGNMENT, MAX_DIMS};
pub use split::SplitLimits;
pub use value::{Array, GgufValue, ValueType};
pub use write::Writer;
pub use write_meta::{parse_assignment, value_type_by_name};
pub use write_split::write_split;

use crate::bytes::{LocalFile, ReadAt};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::format::OpenOptions;
use crate::index::{Format, Layout, Part, Shape, TensorIndex, TensorInfo};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One tensor info.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufTensor {
    /// The tensor's name, unique in the file.
    pub name: String,
    /// Dimensions in ggml order: `ne[0]` (the contiguous one) first.
    pub ne: Shape,
    /// The stored type: a plain one (`f32`, `f16`, ...) or a block-quantized one (`q4_k`, ...).
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

    /// Number of elements: the product of `ne` (1 for a tensor with no dimensions).
    pub fn elements(&self) -> u64 {
        self.ne.iter().product()
    }
}

/// A validated GGUF header.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    /// The GGUF version in the header: 1, 2 or 3.
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, GgufValue)>,
    /// Tensor infos in file order.
    pub tensors: Vec<GgufTensor>,
    /// Alignment of tensor data: `general.alignment` when set, else [`DEFAULT_ALIGNMENT`].
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_start: u64,
    /// Length of the file in bytes.
    pub file_len: u64,
}

impl GgufHeader {
    /// The metadata value under `key` (`general.architecture`, ...), if present.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The neutral index: shapes outermost first, plain ggml types as their dtypes, block
    /// types as [`Layout::Ggml`] over `U8` bytes; metadata widened to [`MetaValue`](crate::index::MetaValue)s.
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
///
/// # Errors
///
/// [`ErrorKind::Gguf`] with the [`GgufRule`] the bytes break (a file cut short is
/// [`GgufRule::Truncated`]).
pub fn parse_bytes(bytes: &[u8], opts: &OpenOptions) -> Result<GgufHeader> {
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
    opts: &OpenOptions,
) -> Result<std::result::Result<GgufHeader, u64>> {
    match parse::parse(prefix, file_len, opts) {
        Ok(h) => Ok(Ok(h)),
        Err(parse::Stop::Err(e)) => Err(e),
        Err(parse::Stop::NeedMore(n)) => Ok(Err(n)),
    }
}

/// First read of a file that is not in memory (pread, HTTP); grown while the header runs past
/// what is held, so a remote header costs a request or a few.
const FIRST_READ: u64 = 256 << 10;

/// Validates the header of the file held by `r`: parsed in place when it is in memory, else
/// from a prefix that grows (reading only the bytes not held yet) until the header fits.
///
/// # Errors
///
/// [`ErrorKind::Gguf`] with the [`GgufRule`] broken; [`ErrorKind::HeaderTooLarge`] over the
/// options' header limit; [`ErrorKind::Truncated`] when the file ends inside the header; the
/// reader's own errors ([`ErrorKind::Io`], the remote kinds) when a read fails.
pub fn read_header(r: &dyn ReadAt, opts: &OpenOptions) -> Result<GgufHeader> {
    let limit = opts.max_gguf_header_len().unwrap_or(u64::MAX);
    let too_large = |len: u64| ErrorKind::HeaderTooLarge { len, limit }.into();
    if let Some(all) = r.as_slice() {
        let h = parse_bytes(all, opts)?;
        return match h.data_start > limit {
            true => Err(too_large(h.data_start)),
            false => Ok(h),
        };
    }
    let len = r.len();
    let mut prefix = r.read(0..FIRST_READ.min(len))?.into_owned();
    loop {
        match parse_prefix(&prefix, len, opts)? {
            Ok(h) if h.data_start > limit => return Err(too_large(h.data_start)),
            Ok(h) => return Ok(h),
            // Never read more header than the limit allows.
            Err(n) if n > limit => return Err(too_large(n)),
            Err(n) => {
                let held = prefix.len() as u64;
                if n.min(len) <= held {
                    // The parser asked for bytes the file does not have.
                    return Err(ErrorKind::Truncated {
                        needed: n,
                        available: len,
                    }
                    .into());
                }
                prefix.extend_from_slice(&r.read(held..n.min(len))?);
            }
        }
    }
}

/// An opened, validated GGUF file.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    source: LocalFile,
    header: GgufHeader,
}

impl GgufFile {
    /// Opens and validates the GGUF file at `path` with default options.
    ///
    /// # Errors
    ///
    /// As [`GgufFile::open_with`].
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        Self::open_with(path, &OpenOptions::new())
    }

    /// Opens the GGUF file at `path` and validates its whole header (metadata, tensor infos,
    /// alignment, bounds) under `opts`. Errors name the file.
    ///
    /// # Errors
    ///
    /// - [`ErrorKind::Io`] when the file cannot be opened or read.
    /// - [`ErrorKind::Gguf`] with the [`GgufRule`] broken: bad magic, big-endian or unsupported
    ///   version, truncated header, bad value type, unknown ggml type, misaligned or overlapping
    ///   tensor data, data past the end, ...
    /// - [`ErrorKind::HeaderTooLarge`] when the header exceeds the options' header limit.
    /// - [`ErrorKind::Truncated`] when the file ends inside the header.
    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<GgufFile> {
        let path = path.as_ref();
        let open = || -> Result<GgufFile> {
            let source = LocalFile::open(path, opts.backend())?;
            let header = read_header(&source, opts)?;
            Ok(GgufFile {
                path: path.to_path_buf(),
                source,
                header,
            })
        };
        open().map_err(|e| e.in_file(path))
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The validated header: metadata and tensor infos in file order.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// The open file, for reading tensor bytes at their ranges.
    pub fn source(&self) -> &LocalFile {
        &self.source
    }

    /// Gives up the header and keeps the open file.
    pub fn into_source(self) -> LocalFile {
        self.source
    }

    /// A tensor's stored bytes (zero-copy with the mmap backend).
    pub fn tensor_bytes(&self, t: &GgufTensor) -> Result<std::borrow::Cow<'_, [u8]>> {
        self.source
            .read(t.range.clone())
            .map_err(|e: Error| e.at_tensor(&t.name).in_file(&self.path))
    }
}
