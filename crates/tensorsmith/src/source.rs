//! Where a reader's bytes come from: a memory map (the default, zero-copy) or positioned
//! reads (`pread`) for filesystems where mapping is unsafe or slow (network mounts, files
//! that others may truncate). Both give the same answers; only the cost model differs.

use crate::error::{Error, ErrorKind, Result};
use memmap2::Mmap;
use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// How to get at a file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// Memory-map the file: views borrow from the map.
    #[default]
    Mmap,
    /// Read with positioned reads: every view is a copy.
    Pread,
}

/// An opened file's bytes.
#[derive(Debug)]
pub enum Source {
    Mmap { map: Mmap, file: File },
    Pread { file: File, len: u64 },
}

/// Chunk size for streaming copies out of a pread source: bounded memory whatever the size.
const COPY_CHUNK: usize = 8 << 20;

/// From this size on, owned reads of a mapped file use `pread` rather than copying from the
/// map (below it, a copy from the map saves the system call).
const PREAD_THRESHOLD: usize = 1 << 20;

impl Source {
    /// Opens `path` with the given backend. Empty files are not mapped (mmap of 0 bytes fails).
    pub fn open(path: &Path, backend: Backend) -> Result<Source> {
        let file = File::open(path).map_err(|e| Error::from(e).in_file(path))?;
        let len = file
            .metadata()
            .map_err(|e| Error::from(e).in_file(path))?
            .len();
        match backend {
            Backend::Mmap if len > 0 => {
                // SAFETY: the map is read-only. Another process truncating the file while it
                // is mapped could fault; our own writers replace files by rename, which keeps
                // the mapped inode intact. Use `Backend::Pread` where that cannot be promised.
                let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::from(e).in_file(path))?;
                Ok(Source::Mmap { map, file })
            }
            _ => Ok(Source::Pread { file, len }),
        }
    }

    pub fn len(&self) -> u64 {
        match self {
            Source::Mmap { map, .. } => map.len() as u64,
            Source::Pread { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check(&self, range: &Range<u64>) -> Result<()> {
        if range.start > range.end || range.end > self.len() {
            return Err(ErrorKind::Truncated {
                needed: range.end,
                available: self.len(),
            }
            .into());
        }
        Ok(())
    }

    /// The bytes of `range`: borrowed from the map, or read into a new buffer.
    pub fn bytes(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        self.check(&range)?;
        match self {
            Source::Mmap { map, .. } => Ok(Cow::Borrowed(
                &map[range.start as usize..range.end as usize],
            )),
            Source::Pread { .. } => {
                let mut buf = vec![0u8; (range.end - range.start) as usize];
                self.read_exact_at(range.start, &mut buf)?;
                Ok(Cow::Owned(buf))
            }
        }
    }

    /// Fills `buf` from `offset`: a single copy either way. Large reads use `pread` even when
    /// the file is mapped: the kernel copies straight from the page cache into `buf`, with no
    /// page faults on the map and no source pages left resident in this process.
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or_else(|| ErrorKind::Truncated {
                needed: u64::MAX,
                available: self.len(),
            })?;
        self.check(&(offset..end))?;
        match self {
            Source::Mmap { map, .. } if buf.len() < PREAD_THRESHOLD => {
                buf.copy_from_slice(&map[offset as usize..end as usize]);
                Ok(())
            }
            Source::Mmap { file, .. } | Source::Pread { file, .. } => {
                Ok(file.read_exact_at(buf, offset)?)
            }
        }
    }

    /// Writes the bytes of `range` to `out` through a bounded buffer. Reads go through the
    /// file even when it is mapped: copying out of the map would leave every page of the
    /// source resident in this process until the end.
    pub fn copy_to(&self, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
        self.check(&range)?;
        let file = match self {
            Source::Mmap { file, .. } | Source::Pread { file, .. } => file,
        };
        copy_chunked(range, out, |off, buf| Ok(file.read_exact_at(buf, off)?))
    }
}

/// Writes the bytes of `range`, read by `read(offset, buf)`, to `out` through one buffer of
/// at most `COPY_CHUNK` bytes.
pub(crate) fn copy_chunked(
    range: Range<u64>,
    out: &mut dyn Write,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let total = range.end - range.start;
    let mut buf = vec![0u8; (total as usize).min(COPY_CHUNK)];
    let mut off = range.start;
    while off < range.end {
        let n = ((range.end - off) as usize).min(buf.len());
        read(off, &mut buf[..n])?;
        out.write_all(&buf[..n])?;
        off += n as u64;
    }
    Ok(())
}
