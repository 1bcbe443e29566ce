//! A local file's bytes: a memory map (the default, zero-copy) or positioned reads (`pread`)
//! for filesystems where mapping is unsafe or slow (network mounts, files that others may
//! truncate). Both give the same answers; only the cost model differs.

use crate::bytes::{check_range, checked_end, copy_chunked, ReadAt};
use crate::error::{Error, Result};
use memmap2::Mmap;
use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// How to get at a local file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// Memory-map the file: views borrow from the map.
    #[default]
    Mmap,
    /// Read with positioned reads: every view is a copy.
    Pread,
}

/// An opened local file.
#[derive(Debug)]
pub enum LocalFile {
    /// Read through a memory map ([`Backend::Mmap`]).
    Mmap {
        /// The read-only map of the whole file.
        map: Mmap,
        /// The open file, kept for kernel-side copies.
        file: File,
    },
    /// Read with positioned reads ([`Backend::Pread`]), and every empty file.
    Pread {
        /// The open file.
        file: File,
        /// The file's length when it was opened.
        len: u64,
    },
}

/// From this size on, owned reads of a mapped file use `pread` rather than copying from the
/// map (below it, a copy from the map saves the system call).
const PREAD_THRESHOLD: usize = 1 << 20;

impl LocalFile {
    /// Opens `path` with the given backend. Empty files are not mapped (mmap of 0 bytes fails).
    pub fn open(path: &Path, backend: Backend) -> Result<LocalFile> {
        let file = File::open(path).map_err(|e| Error::from(e).in_file(path))?;
        LocalFile::from_file(file, backend).map_err(|e| e.in_file(path))
    }

    /// An already open file (a descriptor handed over by a caller, e.g. Python's
    /// `fileno()`), with the given backend. Its current position does not matter: reads are
    /// positioned.
    pub fn from_file(file: File, backend: Backend) -> Result<LocalFile> {
        let len = file.metadata()?.len();
        match backend {
            Backend::Mmap if len > 0 => {
                // SAFETY: the map is read-only. Another process truncating the file while it
                // is mapped could fault; our own writers replace files by rename, which keeps
                // the mapped inode intact. Use `Backend::Pread` where that cannot be promised.
                let map = unsafe { Mmap::map(&file) }?;
                Ok(LocalFile::Mmap { map, file })
            }
            _ => Ok(LocalFile::Pread { file, len }),
        }
    }

    /// The open file, for kernel-side copies (`copy_file_range`).
    pub fn file(&self) -> &File {
        match self {
            LocalFile::Mmap { file, .. } | LocalFile::Pread { file, .. } => file,
        }
    }

    /// The bytes of `range`: borrowed from the map, or read into a new buffer.
    pub fn bytes(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        self.read(range)
    }
}

impl ReadAt for LocalFile {
    fn local_file(&self) -> Option<&File> {
        Some(self.file())
    }

    fn len(&self) -> u64 {
        match self {
            LocalFile::Mmap { map, .. } => map.len() as u64,
            LocalFile::Pread { len, .. } => *len,
        }
    }

    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        check_range(&range, self.len())?;
        match self {
            LocalFile::Mmap { map, .. } => Ok(Cow::Borrowed(
                &map[range.start as usize..range.end as usize],
            )),
            LocalFile::Pread { .. } => {
                let mut buf = vec![0u8; (range.end - range.start) as usize];
                self.read_exact_at(range.start, &mut buf)?;
                Ok(Cow::Owned(buf))
            }
        }
    }

    fn as_slice(&self) -> Option<&[u8]> {
        match self {
            LocalFile::Mmap { map, .. } => Some(map),
            LocalFile::Pread { .. } => None,
        }
    }

    /// A single copy either way. Large reads use `pread` even when the file is mapped: the
    /// kernel copies straight from the page cache into `buf`, with no page faults on the map
    /// and no source pages left resident in this process.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = checked_end(offset, buf.len(), self.len())?;
        match self {
            LocalFile::Mmap { map, .. } if buf.len() < PREAD_THRESHOLD => {
                buf.copy_from_slice(&map[offset as usize..end as usize]);
                Ok(())
            }
            _ => Ok(self.file().read_exact_at(buf, offset)?),
        }
    }

    /// Reads go through the file even when it is mapped: copying out of the map would leave
    /// every page of the source resident in this process until the end.
    fn copy_to(&self, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
        check_range(&range, self.len())?;
        let file = self.file();
        copy_chunked(range, out, |off, buf| Ok(file.read_exact_at(buf, off)?))
    }
}
