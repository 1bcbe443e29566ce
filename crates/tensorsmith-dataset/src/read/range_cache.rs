//! The ranges of a remote object read so far, kept on disk: an unlinked temporary file of the
//! object's length (sparse: only the ranges read take space), memory-mapped. A read fetches
//! the pieces of its range not held yet (through the source's `copy_to`: parallel ranged
//! GETs of the pinned version, streamed to the file, memory bounded by the transfer's parts)
//! and is then a view of the map, as a local shard's is; a range read again moves nothing.
//! The bytes held are the pinned version's only: a fetch that fails (the object replaced:
//! `ChangedDuringRead`) records nothing.

use crate::error::{DatasetError, Result};
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;
use tensorsmith::bytes::{Backend, LocalFile, ReadAt};

#[derive(Debug)]
pub(crate) struct RangeCache {
    /// The temporary file, mapped (its length the object's).
    file: LocalFile,
    /// Ranges held, sorted, disjoint and not touching.
    held: Mutex<Vec<Range<u64>>>,
}

impl RangeCache {
    /// An empty cache for an object of `len` bytes (more than zero).
    pub(crate) fn new(len: u64) -> Result<RangeCache> {
        let temp = std::env::temp_dir().join(format!(
            ".tensorsmith-shard-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let io = |e| DatasetError::io(&temp, e);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(io)?;
        let _ = std::fs::remove_file(&temp);
        file.set_len(len).map_err(io)?;
        let file = LocalFile::from_file(file, Backend::Mmap)?;
        Ok(RangeCache {
            file,
            held: Mutex::new(Vec::new()),
        })
    }

    /// The bytes of `range` of `source` (the object this cache is of), fetched first where
    /// they are not held, as a view of the map.
    pub(crate) fn read(
        &self,
        source: &dyn ReadAt,
        range: Range<u64>,
    ) -> tensorsmith::Result<&[u8]> {
        let map = self.file.as_slice().unwrap_or(&[]);
        if range.start > range.end || range.end > map.len() as u64 {
            return Err(tensorsmith::ErrorKind::Truncated {
                needed: range.end,
                available: map.len() as u64,
            }
            .into());
        }
        let missing = missing(&self.lock(), &range);
        for piece in missing {
            let mut out = WriteAt {
                file: self.file.file(),
                at: piece.start,
            };
            source.copy_to(piece.clone(), &mut out)?;
            insert(&mut self.lock(), piece);
        }
        Ok(&map[range.start as usize..range.end as usize])
    }

    /// Bytes held so far.
    pub(crate) fn held(&self) -> u64 {
        self.lock().iter().map(|r| r.end - r.start).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Range<u64>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pieces of `range` that `held` (sorted, disjoint) does not cover, in order.
fn missing(held: &[Range<u64>], range: &Range<u64>) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut at = range.start;
    for h in held {
        if h.end <= at {
            continue;
        }
        if h.start >= range.end {
            break;
        }
        if h.start > at {
            out.push(at..h.start);
        }
        at = at.max(h.end);
    }
    if at < range.end {
        out.push(at..range.end);
    }
    out
}

/// `r` added to `held`, which stays sorted, disjoint and not touching.
fn insert(held: &mut Vec<Range<u64>>, r: Range<u64>) {
    if r.start >= r.end {
        return;
    }
    held.push(r);
    held.sort_by_key(|h| h.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(held.len());
    for h in held.drain(..) {
        match merged.last_mut() {
            Some(last) if h.start <= last.end => last.end = last.end.max(h.end),
            _ => merged.push(h),
        }
    }
    *held = merged;
}

/// A writer at a moving offset of a file (positioned writes: the map sees them).
struct WriteAt<'a> {
    file: &'a File,
    at: u64,
}

impl Write for WriteAt<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pieces_not_held_are_fetched() {
        let mut held = Vec::new();
        insert(&mut held, 10..20);
        insert(&mut held, 30..40);
        assert_eq!(missing(&held, &(0..50)), vec![0..10, 20..30, 40..50]);
        assert_eq!(missing(&held, &(12..18)), vec![]);
        assert_eq!(missing(&held, &(15..35)), vec![20..30]);
        insert(&mut held, 20..30);
        assert_eq!(held, vec![10..40]);
        insert(&mut held, 0..5);
        insert(&mut held, 38..45);
        assert_eq!(held, vec![0..5, 10..45]);
    }

    #[test]
    fn a_read_is_a_view_and_a_second_read_moves_nothing() {
        #[derive(Debug)]
        struct Counted(Vec<u8>, std::sync::atomic::AtomicU64);
        impl ReadAt for Counted {
            fn len(&self) -> u64 {
                self.0.len() as u64
            }
            fn read(&self, r: Range<u64>) -> tensorsmith::Result<std::borrow::Cow<'_, [u8]>> {
                self.1
                    .fetch_add(r.end - r.start, std::sync::atomic::Ordering::Relaxed);
                Ok(std::borrow::Cow::Borrowed(
                    &self.0[r.start as usize..r.end as usize],
                ))
            }
        }
        let src = Counted(
            (0..=255u8).cycle().take(10_000).collect(),
            Default::default(),
        );
        let c = RangeCache::new(src.len()).unwrap();
        assert_eq!(c.read(&src, 100..300).unwrap(), &src.0[100..300]);
        assert_eq!(c.read(&src, 200..250).unwrap(), &src.0[200..250]);
        assert_eq!(src.1.load(std::sync::atomic::Ordering::Relaxed), 200);
        assert_eq!(c.read(&src, 0..10_000).unwrap(), &src.0[..]);
        assert_eq!(src.1.load(std::sync::atomic::Ordering::Relaxed), 10_000);
        assert_eq!(c.held(), 10_000);
        assert!(c.read(&src, 0..10_001).is_err());
    }
}
