//! Reads that bypass the page cache (`O_DIRECT`), for cold loads: a file read once into
//! pinned memory gains nothing from being cached, and the kernel's copy out of the cache
//! costs a pass over every byte. `O_DIRECT` wants the file offset, the length and the
//! buffer's address aligned to the device's block ([`ALIGN`] covers the usual 512 and 4096),
//! so a read covers the aligned span around the bytes asked for and says where they start.
//! [`resident_fraction`] tells a cold file from a warm one (`mincore` over a map of it), so
//! callers keep the page cache for warm files, where it is the faster path.
//!
//! By hand because neither memmap2 nor std exposes `O_DIRECT` reads or `mincore`; the system
//! calls themselves come from libc.

use crate::error::{Error, ErrorKind, Result};
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// The alignment of offsets, lengths and buffers for `O_DIRECT` reads.
pub const ALIGN: usize = 4096;

/// A file opened for reads that bypass the page cache.
#[derive(Debug)]
pub struct DirectFile {
    file: File,
    len: u64,
}

/// Bytes a buffer needs (past an [`ALIGN`]ed start) to read `n` bytes at `offset` directly.
pub fn span(offset: u64, n: usize) -> usize {
    let start = offset - offset % ALIGN as u64;
    let end = (offset + n as u64).div_ceil(ALIGN as u64) * ALIGN as u64;
    (end - start) as usize
}

impl DirectFile {
    /// `path` opened with `O_DIRECT`; `None` where its filesystem refuses that (tmpfs, some
    /// network and FUSE filesystems answer `EINVAL`).
    pub fn open(path: &Path) -> Result<Option<DirectFile>> {
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        match opened {
            Ok(file) => {
                let len = file
                    .metadata()
                    .map_err(|e| Error::from(e).in_file(path))?
                    .len();
                Ok(Some(DirectFile { file, len }))
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
            Err(e) => Err(Error::from(e).in_file(path)),
        }
    }

    /// Reads the `n` bytes at `offset` into `buf` (its address a multiple of [`ALIGN`], at
    /// least [`span`]`(offset, n)` long) by aligned reads that bypass the page cache, and
    /// returns where they start in `buf`. A file whose end is not aligned is read to its end
    /// (the kernel stops a direct read there).
    pub fn read(&self, offset: u64, n: usize, buf: &mut [u8]) -> Result<usize> {
        let end = offset.checked_add(n as u64).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(ErrorKind::Truncated {
                needed: offset.saturating_add(n as u64),
                available: self.len,
            }
            .into());
        }
        let need = span(offset, n);
        if buf.len() < need || buf.as_ptr() as usize % ALIGN != 0 {
            return Err(ErrorKind::Unsupported(format!(
                "a direct read of {n} bytes at {offset} into a buffer of {} bytes at an address \
                 {} a multiple of {ALIGN} (it takes {need})",
                buf.len(),
                if buf.as_ptr() as usize % ALIGN == 0 {
                    "that is"
                } else {
                    "not"
                }
            ))
            .into());
        }
        let start = offset - offset % ALIGN as u64;
        let shift = (offset - start) as usize;
        let mut done = 0usize;
        // Up to the last byte asked for; the aligned tail past the file's end comes back short.
        while done < shift + n {
            let got = self
                .file
                .read_at(&mut buf[done..need], start + done as u64)?;
            if got == 0 {
                return Err(ErrorKind::Truncated {
                    needed: offset + n as u64,
                    available: start + done as u64,
                }
                .into());
            }
            done += got;
        }
        Ok(shift)
    }
}

/// The fraction (0 to 1) of `file`'s pages in the page cache, from `mincore` over a map of
/// it (mapping faults nothing in). An empty file counts as resident.
pub fn resident_fraction(file: &File) -> Result<f64> {
    let len = file.metadata()?.len() as usize;
    if len == 0 {
        return Ok(1.0);
    }
    // SAFETY: a read-only map that is never read: mincore only asks the kernel about it.
    let map = unsafe { memmap2::Mmap::map(file) }?;
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: the map's address is page-aligned and `len` bytes long; `vec` has one byte per
    // page of it, as mincore writes.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, len, vec.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count();
    Ok(resident as f64 / pages as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A buffer of `n` bytes whose start is [`ALIGN`]ed, inside `store`.
    fn aligned(store: &mut Vec<u8>, n: usize) -> &mut [u8] {
        store.resize(n + ALIGN, 0);
        let pad = store.as_ptr().align_offset(ALIGN);
        &mut store[pad..pad + n]
    }

    #[test]
    fn direct_reads_give_the_bytes_at_any_offset_and_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..3 * ALIGN + 777)
            .map(|i| (i * 31 + i / 97) as u8)
            .collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let Some(f) = DirectFile::open(&path).unwrap() else {
            eprintln!("this filesystem refuses O_DIRECT: nothing to test");
            return;
        };
        let mut store = Vec::new();
        for (off, n) in [
            (0, 10),
            (1, ALIGN),
            (4095, 2),
            (ALIGN, ALIGN),
            (100, 3 * ALIGN + 677),
        ] {
            let buf = aligned(&mut store, span(off as u64, n));
            let at = f.read(off as u64, n, buf).unwrap();
            assert_eq!(&buf[at..at + n], &data[off..off + n], "{off} {n}");
        }
        // Past the end, a small buffer, an unaligned buffer: errors, not panics.
        let buf = aligned(&mut store, 4 * ALIGN);
        assert!(f.read(3 * ALIGN as u64, ALIGN, buf).is_err());
        assert!(f.read(0, ALIGN + 1, &mut buf[..ALIGN]).is_err());
        assert!(f.read(0, 10, &mut buf[1..]).is_err());
    }

    #[test]
    fn a_file_just_read_is_resident() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let _ = std::fs::read(&path).unwrap();
        let f = File::open(&path).unwrap();
        assert!(resident_fraction(&f).unwrap() > 0.99);
        let empty = dir.path().join("e");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(
            resident_fraction(&File::open(&empty).unwrap()).unwrap(),
            1.0
        );
    }
}
