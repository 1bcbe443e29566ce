//! Opening a safetensors file: the framing checks and every validation rule of the reference
//! (FORMAT-NOTES §1.2), in its order, plus the ones it misses (duplicate keys, checked
//! arithmetic). Nothing is handed out before the whole header has been validated.

use super::header_parse;
use crate::bytes::{LocalFile, ReadAt};
use crate::error::{Error, ErrorKind, Result};
use crate::format::OpenOptions;
use crate::index::{Format, MetaValue, TensorIndex, TensorInfo};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Length of the little-endian header size that starts every file.
pub const N_LEN: u64 = 8;

/// Reads the header length from the first 8 bytes and checks it against the limit and the
/// file size. Returns the JSON length `N`.
pub fn header_len(first8: &[u8], file_len: u64, opts: &OpenOptions) -> Result<u64> {
    if file_len < N_LEN || first8.len() < N_LEN as usize {
        return Err(ErrorKind::FileTooSmall { len: file_len }.into());
    }
    let n = u64::from_le_bytes(first8[..8].try_into().expect("8 bytes"));
    if n >> 32 != 0 && n > opts.max_header_len() {
        // No safetensors header is 4 GiB long: this is another kind of file (an image, text,
        // a ZIP or pickle from PyTorch); say what it looks like instead of a length.
        return Err(ErrorKind::NotATensorFile {
            first: crate::bytes::describe_start(&first8[..8]),
        }
        .into());
    }
    if n > opts.max_header_len() {
        return Err(ErrorKind::HeaderTooLarge {
            len: n,
            limit: opts.max_header_len(),
        }
        .into());
    }
    match n.checked_add(N_LEN) {
        Some(end) if end <= file_len => Ok(n),
        _ => Err(ErrorKind::HeaderPastEnd {
            header_len: n,
            file_len,
        }
        .into()),
    }
}

/// Validates a header (the `N` JSON bytes after the length) for a file of `file_len` bytes
/// and builds its index.
pub fn parse_header(json: &[u8], file_len: u64, opts: &OpenOptions) -> Result<TensorIndex> {
    let raw = header_parse::parse(json, opts.packed_ints())?;
    let data_start = N_LEN + json.len() as u64;
    let mut tensors = raw.tensors;

    if let Some(dup) = find_duplicate(&tensors) {
        return Err(Error::new(ErrorKind::DuplicateKey).at_tensor(dup));
    }

    // The reference sorts by offsets, then walks: each tensor must start where the previous
    // one ended. Writers lay data out in header order, so this is usually sorted already; the
    // sort is stable, so equal offsets keep header order.
    let key = |t: &TensorInfo| (t.parts[0].range.start, t.parts[0].range.end);
    if !tensors.windows(2).all(|w| key(&w[0]) <= key(&w[1])) {
        tensors.sort_by_key(key);
    }
    let available = file_len - data_start;
    let mut expected = 0u64;
    for t in &mut tensors {
        check_tensor(t, expected).map_err(|e| e.at_tensor(&t.name))?;
        let r = &mut t.parts[0].range;
        expected = r.end;
        // Offsets become absolute; checked so a truncated file cannot overflow them.
        match (
            data_start.checked_add(r.start),
            data_start.checked_add(r.end),
        ) {
            (Some(b), Some(e)) if r.end <= available => *r = b..e,
            _ => {
                return Err(ErrorKind::Truncated {
                    needed: r.end,
                    available,
                }
                .into())
            }
        }
    }
    if expected < available {
        return Err(ErrorKind::TrailingBytes {
            extra: available - expected,
        }
        .into());
    }
    let metadata: BTreeMap<String, MetaValue> = raw
        .metadata
        .into_iter()
        .map(|(k, v)| (k.into_owned(), MetaValue::Str(v.into_owned())))
        .collect();
    Ok(TensorIndex {
        format: Format::Safetensors,
        header_len: data_start,
        file_len,
        metadata,
        tensors,
    })
}

/// The first name that appears twice, if any. Hashes names once into a set of 64-bit hashes
/// (cheap to insert); only when two hashes meet are the names themselves compared.
fn find_duplicate(tensors: &[TensorInfo]) -> Option<&str> {
    use std::hash::BuildHasher;
    let state = foldhash::fast::RandomState::default();
    let mut hashes: HashSet<u64, PassThrough> =
        HashSet::with_capacity_and_hasher(tensors.len(), PassThrough);
    let collided = tensors
        .iter()
        .any(|t| !hashes.insert(state.hash_one(t.name.as_bytes())));
    if !collided {
        return None;
    }
    let mut names: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(tensors.len(), Default::default());
    tensors
        .iter()
        .find(|t| !names.insert(t.name.as_str()))
        .map(|t| t.name.as_str())
}

/// A hasher for keys that are already hashes.
#[derive(Default, Clone, Copy)]
struct PassThrough;

impl std::hash::BuildHasher for PassThrough {
    type Hasher = PassThroughHasher;
    fn build_hasher(&self) -> PassThroughHasher {
        PassThroughHasher(0)
    }
}

struct PassThroughHasher(u64);

impl std::hash::Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

fn check_tensor(t: &TensorInfo, expected_begin: u64) -> Result<()> {
    let (begin, end) = (t.parts[0].range.start, t.parts[0].range.end);
    if begin > expected_begin {
        return Err(ErrorKind::Hole {
            begin,
            expected: expected_begin,
        }
        .into());
    }
    if begin < expected_begin {
        return Err(ErrorKind::Overlap {
            begin,
            expected: expected_begin,
        }
        .into());
    }
    if end < begin {
        return Err(ErrorKind::OffsetsReversed { begin, end }.into());
    }
    let Some(elements) = t.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) else {
        return Err(ErrorKind::ShapeOverflow.into());
    };
    let Some(bits) = elements.checked_mul(u64::from(t.dtype.bits())) else {
        return Err(ErrorKind::ShapeOverflow.into());
    };
    if bits % 8 != 0 {
        return Err(ErrorKind::PartialByte {
            elements,
            dtype: t.dtype.to_string(),
        }
        .into());
    }
    if bits / 8 != end - begin {
        return Err(ErrorKind::SizeMismatch {
            expected: bits / 8,
            actual: end - begin,
        }
        .into());
    }
    Ok(())
}

/// Validates a whole file held in memory and returns its index.
pub fn parse_bytes(bytes: &[u8], opts: &OpenOptions) -> Result<TensorIndex> {
    let len = bytes.len() as u64;
    let n = header_len(bytes, len, opts)?;
    parse_header(&bytes[N_LEN as usize..(N_LEN + n) as usize], len, opts)
}

/// An opened, validated safetensors file.
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    source: LocalFile,
    index: TensorIndex,
    by_name: OnceLock<HashMap<String, usize>>,
}

impl SafetensorsFile {
    /// Opens and validates `path` with default options (memory-mapped).
    ///
    /// # Errors
    ///
    /// As [`SafetensorsFile::open_with`].
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsFile> {
        Self::open_with(path, &OpenOptions::new())
    }

    /// Opens `path` with the backend and limits of `opts` and validates the whole header and
    /// the data layout before returning. Errors name the file (and the tensor, where one is
    /// at fault).
    ///
    /// # Errors
    ///
    /// - [`ErrorKind::Io`] when the file cannot be opened or read.
    /// - Framing: [`ErrorKind::FileTooSmall`] (under 8 bytes), [`ErrorKind::NotATensorFile`]
    ///   (a header length no safetensors file has), [`ErrorKind::HeaderTooLarge`] (over the
    ///   options' header limit), [`ErrorKind::HeaderPastEnd`].
    /// - Header: [`ErrorKind::HeaderNotUtf8`], [`ErrorKind::HeaderNulPadding`],
    ///   [`ErrorKind::HeaderJson`], [`ErrorKind::HeaderNotObject`], [`ErrorKind::DuplicateKey`],
    ///   [`ErrorKind::BadMetadata`], [`ErrorKind::TensorNotObject`],
    ///   [`ErrorKind::MissingField`], [`ErrorKind::DuplicateField`], [`ErrorKind::BadField`],
    ///   [`ErrorKind::UnknownDtype`].
    /// - Tensor data: [`ErrorKind::ShapeOverflow`], [`ErrorKind::PartialByte`],
    ///   [`ErrorKind::OffsetsReversed`], [`ErrorKind::SizeMismatch`], [`ErrorKind::Hole`],
    ///   [`ErrorKind::Overlap`], [`ErrorKind::Truncated`], [`ErrorKind::TrailingBytes`].
    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<SafetensorsFile> {
        let path = path.as_ref();
        Self::open_inner(path, opts).map_err(|e| e.in_file(path))
    }

    /// Validates an already open file (a download of a remote shard, kept in an unlinked
    /// temporary file); `path` is how errors name it.
    pub fn from_file(
        path: impl AsRef<Path>,
        file: std::fs::File,
        opts: &OpenOptions,
    ) -> Result<SafetensorsFile> {
        let path = path.as_ref();
        let source = LocalFile::from_file(file, opts.backend()).map_err(|e| e.in_file(path))?;
        Self::with_source(path, source, opts).map_err(|e| e.in_file(path))
    }

    fn open_inner(path: &Path, opts: &OpenOptions) -> Result<SafetensorsFile> {
        let source = LocalFile::open(path, opts.backend())?;
        Self::with_source(path, source, opts)
    }

    fn with_source(path: &Path, source: LocalFile, opts: &OpenOptions) -> Result<SafetensorsFile> {
        let index = read_index(&source, opts)?;
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            source,
            index,
            by_name: OnceLock::new(),
        })
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The validated index: tensors in the order of their data, metadata, header length.
    pub fn index(&self) -> &TensorIndex {
        &self.index
    }

    /// The index and the bytes, for callers that keep them apart.
    pub fn into_parts(self) -> (TensorIndex, LocalFile) {
        (self.index, self.source)
    }

    /// The open file, for reading tensor bytes at their ranges.
    pub fn source(&self) -> &LocalFile {
        &self.source
    }

    /// Tensor names in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.index.tensors.iter().map(|t| t.name.as_str())
    }

    /// The `__metadata__` map (empty when the header has none); every value is a
    /// [`MetaValue::Str`].
    pub fn metadata(&self) -> &BTreeMap<String, MetaValue> {
        &self.index.metadata
    }

    /// Describes a tensor, or says there is none of that name.
    pub fn info(&self, name: &str) -> Result<&TensorInfo> {
        let map = self.by_name.get_or_init(|| self.index.by_name());
        map.get(name)
            .map(|&i| &self.index.tensors[i])
            .ok_or_else(|| self.err(ErrorKind::NoSuchTensor, name))
    }

    fn err(&self, kind: ErrorKind, name: &str) -> Error {
        Error::new(kind).at_tensor(name).in_file(&self.path)
    }

    /// A view of a tensor: zero-copy with the mmap backend.
    pub fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let info = self.info(name)?;
        let data = self
            .source
            .read(info.data_range())
            .map_err(|e| e.at_tensor(name).in_file(&self.path))?;
        Ok(TensorView { info, data })
    }

    /// Copies a tensor's bytes into `buf`, which must be exactly its byte length. With either
    /// backend this is a single copy (pread goes straight from the page cache into `buf`).
    pub fn read_into(&self, name: &str, buf: &mut [u8]) -> Result<()> {
        let info = self.info(name)?;
        let r = info.data_range();
        if buf.len() as u64 != r.end - r.start {
            return Err(self.err(
                ErrorKind::WrongDataLength {
                    expected: r.end - r.start,
                    actual: buf.len() as u64,
                },
                name,
            ));
        }
        self.source
            .read_exact_at(r.start, buf)
            .map_err(|e| e.at_tensor(name).in_file(&self.path))
    }

    /// A tensor's bytes as an owned buffer.
    pub fn read_vec(&self, name: &str) -> Result<Vec<u8>> {
        let info = self.info(name)?;
        let r = info.data_range();
        let mut v = vec![0u8; (r.end - r.start) as usize];
        self.read_into(name, &mut v)?;
        Ok(v)
    }
}

/// A tensor's description and bytes.
#[derive(Debug)]
pub struct TensorView<'a> {
    /// The tensor's name, dtype, shape and byte range.
    pub info: &'a TensorInfo,
    data: Cow<'a, [u8]>,
}

impl<'a> TensorView<'a> {
    /// The tensor's bytes, little-endian, as stored.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// True when the bytes borrow from a memory map.
    pub fn is_borrowed(&self) -> bool {
        matches!(self.data, Cow::Borrowed(_))
    }

    /// Selects `ranges[k]` along dimension `k` for the leading dimensions (later dimensions
    /// are kept whole). Returns the new shape and the bytes, borrowed when the selection is
    /// one contiguous run of the tensor, gathered into a new buffer otherwise.
    pub fn slice(&self, ranges: &[std::ops::Range<u64>]) -> Result<(Vec<u64>, Cow<'_, [u8]>)> {
        let shape = &self.info.shape;
        let bad = |msg: String| Error::new(ErrorKind::BadSlice(msg)).at_tensor(&self.info.name);
        crate::index::check_ranges(shape, ranges).map_err(bad)?;
        let new_shape: Vec<u64> = shape
            .iter()
            .enumerate()
            .map(|(k, &d)| ranges.get(k).map_or(d, |r| r.end - r.start))
            .collect();
        // Bytes per step of each dimension; sub-byte dtypes must land on whole bytes.
        let bits = u64::from(self.info.dtype.bits());
        let mut strides_bits = vec![0u64; shape.len()];
        let mut acc = bits;
        for k in (0..shape.len()).rev() {
            strides_bits[k] = acc;
            acc *= shape[k];
        }
        let inner_bits = if ranges.is_empty() {
            acc
        } else {
            let last = ranges.len() - 1;
            (ranges[last].end - ranges[last].start) * strides_bits[last]
        };
        let to_bytes = |b: u64| -> Result<u64> {
            if b % 8 == 0 {
                Ok(b / 8)
            } else {
                Err(bad(format!(
                    "slice does not fall on whole bytes for {}",
                    self.info.dtype
                )))
            }
        };
        if new_shape.contains(&0) {
            return Ok((new_shape, Cow::Borrowed(&[])));
        }
        if ranges.is_empty() {
            return Ok((new_shape, Cow::Borrowed(&self.data[..])));
        }
        // Gather: iterate the index space of all ranges but the last; each step copies one run.
        let last = ranges.len() - 1;
        let run = to_bytes(inner_bits)? as usize;
        let mut idx: Vec<u64> = ranges[..last].iter().map(|r| r.start).collect();
        let outer: u64 = ranges[..last].iter().map(|r| r.end - r.start).product();
        let mut out: Vec<u8> = Vec::new();
        for step in 0..outer {
            let mut off_bits = ranges[last].start * strides_bits[last];
            for (k, &i) in idx.iter().enumerate() {
                off_bits += i * strides_bits[k];
            }
            let off = to_bytes(off_bits)? as usize;
            if outer == 1 {
                return Ok((new_shape, Cow::Borrowed(&self.data[off..off + run])));
            }
            if step == 0 {
                out.reserve_exact(run * outer as usize);
            }
            out.extend_from_slice(&self.data[off..off + run]);
            for k in (0..last).rev() {
                idx[k] += 1;
                if idx[k] < ranges[k].end {
                    break;
                }
                idx[k] = ranges[k].start;
            }
        }
        Ok((new_shape, Cow::Owned(out)))
    }
}

/// Validates the file held by `r`, reading only its length and its header.
pub fn read_index(r: &dyn ReadAt, opts: &OpenOptions) -> Result<TensorIndex> {
    let len = r.len();
    let first8 = r.read(0..N_LEN.min(len))?;
    let n = header_len(&first8, len, opts)?;
    let json = r.read(N_LEN..N_LEN + n)?;
    parse_header(&json, len, opts)
}
