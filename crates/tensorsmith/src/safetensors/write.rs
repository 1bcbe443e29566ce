//! Writing safetensors files byte-identical to the reference writer (FORMAT-NOTES §1.3):
//! tensors sorted by dtype (descending) then name, data back to back, compact JSON header
//! padded with spaces to a multiple of 8. Streaming: the header needs only names, dtypes and
//! shapes, so tensor bytes are pulled one tensor at a time, straight into the output.

use super::digest_record::{self, DIGEST_KEY};
use crate::bytes::{copy_chunked, ReadAt};
use crate::digest::{DigestKind, Hasher};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::sink::write_atomically;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Range;
use std::path::Path;

/// Supplies one tensor's bytes to a writer, when the writer reaches it.
pub trait TensorData {
    /// Number of bytes `write_to` will write.
    fn len(&self) -> u64;

    /// Whether the tensor has no bytes (`len()` is 0).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes exactly `len()` bytes to `out`.
    fn write_to(&mut self, out: &mut dyn Write) -> Result<()>;

    /// Copies the bytes into `out` at its current position file to file, without passing
    /// them through this process where the OS can (`Writer::write_to_file`); returns the
    /// bytes copied. `None`: not a file-to-file source, `write_to` is used.
    fn copy_into_file(&mut self, _out: &mut File) -> Option<Result<u64>> {
        None
    }
}

impl TensorData for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        Ok(out.write_all(self)?)
    }
}

impl TensorData for Vec<u8> {
    fn len(&self) -> u64 {
        Vec::len(self) as u64
    }
    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        Ok(out.write_all(self)?)
    }
}

impl TensorData for Cow<'_, [u8]> {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        Ok(out.write_all(self)?)
    }
}

/// A byte range of an opened file (local, remote or in memory), copied through a bounded buffer: writing from another
/// file keeps memory flat whatever the size.
pub struct SourceRange<'a> {
    /// The opened file to copy from.
    pub source: &'a dyn ReadAt,
    /// The bytes of `source` to copy: the tensor's data range there.
    pub range: Range<u64>,
}

impl TensorData for SourceRange<'_> {
    fn len(&self) -> u64 {
        self.range.end - self.range.start
    }
    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        self.source.copy_to(self.range.clone(), out)
    }
}

/// Pieces of opened files and runs of zeros, in order: one tensor's bytes gathered from other
/// files (a Parquet page's values, say). Into a file (`Writer::write_to_file`) each range is
/// copied by the kernel (`copy_file_range` on Linux, through `std::io::copy`); into any other
/// writer, through a bounded buffer. A range moves its file's position (each user opens its
/// own handle). A piece of any other source ([`Piece::At`]: a remote file) goes through its
/// `copy_to`.
#[derive(Default)]
pub struct FilePieces<'a> {
    /// The pieces, in the order their bytes make up the tensor.
    pub pieces: Vec<Piece<'a>>,
}

/// One piece of a [`FilePieces`].
pub enum Piece<'a> {
    /// A byte range of a local file, copied by the kernel when the output is a file.
    Range(&'a File, Range<u64>),
    /// A range of any opened source (a remote file read through its cache).
    At(&'a dyn ReadAt, Range<u64>),
    /// This many zero bytes.
    Zeros(u64),
}

impl Piece<'_> {
    fn len(&self) -> u64 {
        match self {
            Piece::Range(_, r) | Piece::At(_, r) => r.end - r.start,
            Piece::Zeros(n) => *n,
        }
    }
}

/// `n` zero bytes into `out`.
fn write_zeros(n: u64, out: &mut (impl Write + ?Sized)) -> io::Result<u64> {
    io::copy(&mut io::repeat(0).take(n), out)
}

impl TensorData for FilePieces<'_> {
    fn len(&self) -> u64 {
        self.pieces.iter().map(Piece::len).sum()
    }

    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        use std::os::unix::fs::FileExt;
        for p in &self.pieces {
            match p {
                Piece::Range(f, r) => {
                    copy_chunked(r.clone(), out, |off, buf| Ok(f.read_exact_at(buf, off)?))?
                }
                Piece::At(src, r) => src.copy_to(r.clone(), out)?,
                Piece::Zeros(n) => drop(write_zeros(*n, out)?),
            }
        }
        Ok(())
    }

    fn copy_into_file(&mut self, out: &mut File) -> Option<Result<u64>> {
        use std::io::{Seek, SeekFrom};
        let copy = |out: &mut File| -> Result<u64> {
            let mut n = 0;
            for p in &self.pieces {
                n += match p {
                    Piece::Range(f, r) => {
                        let mut f: &File = f;
                        f.seek(SeekFrom::Start(r.start))?;
                        io::copy(&mut f.take(r.end - r.start), out)?
                    }
                    Piece::At(src, r) => {
                        src.copy_to(r.clone(), out)?;
                        r.end - r.start
                    }
                    Piece::Zeros(z) => write_zeros(*z, out)?,
                };
            }
            Ok(n)
        };
        Some(copy(out))
    }
}

struct Pending<'a> {
    name: String,
    dtype: DType,
    shape: Vec<u64>,
    len: u64,
    data: Box<dyn TensorData + 'a>,
}

impl Pending<'_> {
    /// `n`, the bytes its data wrote, when that is the length it promised.
    fn check_len(&self, n: u64) -> Result<u64> {
        if n != self.len {
            return Err(Error::new(ErrorKind::WrongDataLength {
                expected: self.len,
                actual: n,
            })
            .at_tensor(&self.name));
        }
        Ok(n)
    }
}

/// Collects tensors (descriptions now, bytes later) and writes them as one file.
#[derive(Default)]
pub struct Writer<'a> {
    tensors: Vec<Pending<'a>>,
    names: HashSet<String>,
    metadata: Option<BTreeMap<String, String>>,
    allow_packed_ints: bool,
    digests: Option<DigestKind>,
    max_header_len: Option<u64>,
}

impl<'a> Writer<'a> {
    /// An empty writer: no tensors, no `__metadata__`, no digest record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the `__metadata__` map (written with keys sorted). An empty map is written as
    /// `"__metadata__":{}`, as the reference does when given one.
    pub fn metadata(&mut self, metadata: BTreeMap<String, String>) -> &mut Self {
        self.metadata = Some(metadata);
        self
    }

    /// Records each tensor's digest of this kind in `__metadata__` under
    /// `tensorsmith.digest` (see `digest_record`); `verify` checks them. Tensor sources are
    /// then read twice (digests first: the header precedes the data). `None`: no record (any
    /// record in the given metadata is dropped either way: it would describe other bytes).
    pub fn record_digests(&mut self, kind: Option<DigestKind>) -> &mut Self {
        self.digests = kind;
        self
    }

    /// The longest JSON header this writer writes (default
    /// [`DEFAULT_MAX_HEADER_LEN`](crate::format::DEFAULT_MAX_HEADER_LEN), the reference's
    /// limit, which it also refuses to write past): a longer one would make a file that no
    /// reader opens with its default limit.
    pub fn max_header_len(&mut self, bytes: u64) -> &mut Self {
        self.max_header_len = Some(bytes);
        self
    }

    /// Allows the packed `I4`/`I2` dtypes, which the reference cannot read.
    pub fn allow_packed_ints(&mut self, yes: bool) -> &mut Self {
        self.allow_packed_ints = yes;
        self
    }

    /// Adds a tensor. Its bytes are not read until the file is written.
    pub fn add(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[u64],
        data: impl TensorData + 'a,
    ) -> Result<&mut Self> {
        let err = |k: ErrorKind| Error::new(k).at_tensor(name);
        if name == "__metadata__" {
            return Err(err(ErrorKind::BadName("__metadata__ is reserved")));
        }
        if !dtype.is_safetensors_dtype()
            || (!dtype.is_safetensors_reference() && !self.allow_packed_ints)
        {
            return Err(err(ErrorKind::UnsupportedDtype(format!(
                "{dtype} to safetensors (not in its dtype list)"
            ))));
        }
        let elements = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| err(ErrorKind::ShapeOverflow))?;
        let len = dtype.packed_bytes(elements).ok_or_else(|| {
            err(ErrorKind::PartialByte {
                elements,
                dtype: dtype.to_string(),
            })
        })?;
        if data.len() != len {
            return Err(err(ErrorKind::WrongDataLength {
                expected: len,
                actual: data.len(),
            }));
        }
        if !self.names.insert(name.to_string()) {
            return Err(err(ErrorKind::DuplicateKey));
        }
        self.tensors.push(Pending {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
            len,
            data: Box::new(data),
        });
        Ok(self)
    }

    fn sort(&mut self) {
        self.tensors.sort_by(|a, b| {
            b.dtype
                .cmp(&a.dtype)
                .then_with(|| a.name.as_bytes().cmp(b.name.as_bytes()))
        });
    }

    /// The first `8 + N` bytes of the file (length prefix and padded JSON), for the tensors
    /// in their final order. Call after sorting.
    fn header(&self) -> Vec<u8> {
        let mut json = Vec::with_capacity(64 + self.tensors.len() * 96);
        json.push(b'{');
        let mut first = true;
        if let Some(meta) = &self.metadata {
            json.extend_from_slice(b"\"__metadata__\":{");
            for (i, (k, v)) in meta.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                push_json_string(&mut json, k);
                json.push(b':');
                push_json_string(&mut json, v);
            }
            json.push(b'}');
            first = false;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            if !first {
                json.push(b',');
            }
            first = false;
            push_json_string(&mut json, &t.name);
            json.extend_from_slice(b":{\"dtype\":\"");
            json.extend_from_slice(t.dtype.safetensors_name().as_bytes());
            json.extend_from_slice(b"\",\"shape\":[");
            for (i, d) in t.shape.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                json.extend_from_slice(d.to_string().as_bytes());
            }
            let end = offset + t.len;
            json.extend_from_slice(format!("],\"data_offsets\":[{offset},{end}]}}").as_bytes());
            offset = end;
        }
        json.push(b'}');
        let padded = json.len().next_multiple_of(8);
        json.resize(padded, b' ');
        let mut out = Vec::with_capacity(8 + padded);
        out.extend_from_slice(&(padded as u64).to_le_bytes());
        out.extend_from_slice(&json);
        out
    }

    /// [`Writer::header`], refused when its JSON is over the writer's limit.
    fn checked_header(&self) -> Result<Vec<u8>> {
        let header = self.header();
        let len = header.len() as u64 - 8;
        let limit = self
            .max_header_len
            .unwrap_or(crate::format::DEFAULT_MAX_HEADER_LEN);
        if len > limit {
            return Err(ErrorKind::HeaderTooLarge { len, limit }.into());
        }
        Ok(header)
    }

    /// Sorts the tensors and settles the metadata: a stale digest record dropped, a new one
    /// computed from the sources when asked for.
    fn prepare(&mut self) -> Result<()> {
        self.sort();
        if let Some(m) = &mut self.metadata {
            m.remove(DIGEST_KEY);
        }
        let Some(kind) = self.digests else {
            return Ok(());
        };
        let mut digests = Vec::with_capacity(self.tensors.len());
        for t in &mut self.tensors {
            let mut h = Hasher::new(kind);
            t.data.write_to(&mut h).map_err(|e| e.at_tensor(&t.name))?;
            digests.push(h.finish());
        }
        let value =
            digest_record::encode(self.tensors.iter().map(|t| t.name.as_str()).zip(digests));
        self.metadata
            .get_or_insert_with(BTreeMap::new)
            .insert(DIGEST_KEY.to_string(), value);
        Ok(())
    }

    /// The header `write_to` will write (length prefix and padded JSON), when it is known
    /// before any source is read: without a digest record.
    pub fn planned_header(&mut self) -> Result<Option<Vec<u8>>> {
        if self.digests.is_some() {
            return Ok(None);
        }
        self.prepare()?;
        Ok(Some(self.checked_header()?))
    }

    /// Total size of the file that will be written (without a digest record: its length is
    /// known only once the sources are read).
    pub fn file_len(&mut self) -> u64 {
        self.sort();
        self.header().len() as u64 + self.tensors.iter().map(|t| t.len).sum::<u64>()
    }

    /// Writes the whole file to `out`, pulling each tensor's bytes in turn. Returns the
    /// number of bytes written.
    pub fn write_to(mut self, out: &mut dyn Write) -> Result<u64> {
        self.prepare()?;
        crate::progress::expect(self.tensors.iter().map(|t| t.len).sum());
        let header = self.checked_header()?;
        out.write_all(&header)?;
        let mut total = header.len() as u64;
        for t in &mut self.tensors {
            crate::interrupt::check()?;
            let mut counted = Counting { inner: out, n: 0 };
            t.data
                .write_to(&mut counted)
                .map_err(|e| e.at_tensor(&t.name))?;
            total += t.check_len(counted.n)?;
        }
        Ok(total)
    }

    /// `write_to` into a file at its current position: tensors whose bytes come from other
    /// files are copied file to file (`TensorData::copy_into_file`), the rest written through
    /// a buffer.
    pub fn write_to_file(mut self, out: &mut File) -> Result<u64> {
        self.prepare()?;
        crate::progress::expect(self.tensors.iter().map(|t| t.len).sum());
        let header = self.checked_header()?;
        out.write_all(&header)?;
        let mut total = header.len() as u64;
        for t in &mut self.tensors {
            crate::interrupt::check()?;
            let n = match t.data.copy_into_file(out) {
                Some(Ok(n)) => {
                    crate::progress::advance(n);
                    Ok(n)
                }
                Some(Err(e)) => Err(e),
                None => {
                    let mut buf = io::BufWriter::with_capacity(1 << 16, &mut *out);
                    let mut counted = Counting {
                        inner: &mut buf,
                        n: 0,
                    };
                    t.data
                        .write_to(&mut counted)
                        .and_then(|()| Ok(counted.flush().map(|()| counted.n)?))
                }
            }
            .map_err(|e| e.at_tensor(&t.name))?;
            total += t.check_len(n)?;
        }
        Ok(total)
    }

    /// Serializes to memory.
    pub fn to_bytes(self) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.write_to(&mut v)?;
        Ok(v)
    }

    /// Writes atomically to `path`: a temporary file in the same folder, fsynced and renamed
    /// over `path` only when complete. On any error `path` is left as it was. Returns the
    /// number of bytes written.
    ///
    /// # Errors
    ///
    /// - [`ErrorKind::Io`] when the file cannot be created, written, synced or renamed, a
    ///   tensor's source cannot be read, or the write is interrupted
    ///   ([`crate::interrupt`]).
    /// - [`ErrorKind::WrongDataLength`] when a tensor's [`TensorData`] writes another number
    ///   of bytes than its `len()` promised.
    /// - The source's own error kinds when a tensor's bytes are read from another opened file
    ///   (a remote read, a digest check).
    ///
    /// Problems with names, dtypes and shapes are reported earlier, by [`Writer::add`].
    pub fn write_file(self, path: impl AsRef<Path>) -> Result<u64> {
        write_atomically(path.as_ref(), |f| self.write_to(f))
    }

    /// As [`Writer::write_file`], to a local path or an `s3://` URL (streamed up as a
    /// multipart upload, visible only once complete) with the store settings `storage`.
    pub fn write_file_with(
        self,
        path: impl AsRef<Path>,
        storage: &crate::bytes::StorageOptions,
    ) -> Result<u64> {
        crate::sink::write_atomically_with(path.as_ref(), storage, |f| self.write_to(f))
    }
}

/// Counts bytes on their way through, so a lying `TensorData` is caught.
struct Counting<'w> {
    inner: &'w mut dyn Write,
    n: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::interrupt::check_io()?;
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        crate::progress::advance(n as u64);
        Ok(n)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        crate::interrupt::check_io()?;
        self.inner.write_all(buf)?;
        self.n += buf.len() as u64;
        crate::progress::advance(buf.len() as u64);
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Appends `s` as a JSON string the way serde_json writes it: `"` `\` and control characters
/// escaped (short forms for \b \f \n \r \t, `\u00xx` otherwise), everything else raw.
pub(crate) fn push_json_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_serde_json() {
        let s = "a\"b\\c/\u{1}\u{7f}\u{e9}\n\t\u{8}\u{c}\r";
        let mut ours = Vec::new();
        push_json_string(&mut ours, s);
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            serde_json::to_string(s).unwrap()
        );
    }

    #[test]
    fn empty_file_is_braces_and_six_spaces() {
        let bytes = Writer::new().to_bytes().unwrap();
        assert_eq!(bytes, b"\x08\0\0\0\0\0\0\0{}      ");
    }

    #[test]
    fn a_header_over_the_limit_is_refused_before_anything_is_written() {
        let writer = |limit: u64| {
            let mut w = Writer::new();
            w.add("abc", DType::U8, &[1], vec![1u8]).unwrap();
            w.max_header_len(limit);
            w
        };
        // {"abc":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}: 56 bytes, padded to 56.
        let at = writer(56).to_bytes().unwrap();
        assert_eq!(u64::from_le_bytes(at[..8].try_into().unwrap()), 56);
        let e = writer(55).to_bytes().err().unwrap();
        assert!(
            matches!(e.kind(), ErrorKind::HeaderTooLarge { len: 56, limit: 55 }),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("m.safetensors");
        assert!(writer(55).write_file(&out).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // The default: the reference's 100 MB, which its reader and ours refuse past.
        let mut w = Writer::new();
        let long = "n".repeat(100_000_000);
        w.add(&long, DType::U8, &[0], Vec::new()).unwrap();
        let e = w.to_bytes().err().unwrap();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::HeaderTooLarge {
                    limit: 100_000_000,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn rejects_wrong_length_duplicates_and_reserved_names() {
        let mut w = Writer::new();
        assert!(w.add("a", DType::F32, &[2], vec![0u8; 4]).is_err());
        w.add("a", DType::F32, &[1], vec![0u8; 4]).unwrap();
        let e = w.add("a", DType::F32, &[1], vec![0u8; 4]).err().unwrap();
        assert!(matches!(e.kind(), ErrorKind::DuplicateKey));
        assert!(w.add("__metadata__", DType::U8, &[0], Vec::new()).is_err());
        assert!(w.add("p", DType::I4, &[2], vec![0u8; 1]).is_err());
        assert!(w.add("f4", DType::F4, &[3], vec![0u8; 2]).is_err());
    }

    #[test]
    fn file_pieces_write_the_same_bytes_into_a_file_and_anywhere_else() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::write(&src, (0..=255u8).cycle().take(5000).collect::<Vec<_>>()).unwrap();
        let f = File::open(&src).unwrap();
        let writer = || {
            let mut w = Writer::new();
            let pieces = vec![
                Piece::Range(&f, 3..1003),
                Piece::Zeros(12),
                Piece::Range(&f, 4000..4988),
            ];
            w.add("a", DType::F32, &[500], FilePieces { pieces })
                .unwrap()
                .add("b", DType::U8, &[3], vec![7u8, 8, 9])
                .unwrap();
            w
        };
        let in_memory = writer().to_bytes().unwrap();
        let out = dir.path().join("out");
        let mut o = File::create(&out).unwrap();
        let n = writer().write_to_file(&mut o).unwrap();
        assert_eq!(n, in_memory.len() as u64);
        assert_eq!(std::fs::read(&out).unwrap(), in_memory);
        let data = std::fs::read(&src).unwrap();
        let a = &in_memory[in_memory.len() - 3 - 2000..in_memory.len() - 3];
        assert_eq!(&a[..1000], &data[3..1003]);
        assert!(a[1000..1012].iter().all(|&b| b == 0));
        assert_eq!(&a[1012..], &data[4000..4988]);
    }
}
