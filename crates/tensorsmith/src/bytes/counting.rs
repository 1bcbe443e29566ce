//! [`Counted`]: any [`ReadAt`] with the bytes and reads asked of it counted in a
//! [`ReadCounter`] (per-rank read tests; the Python package's read counter). Every read goes
//! through the inner source's own reads: `as_slice` and `local_file` are withheld, so no
//! caller reads around the count.

use crate::bytes::ReadAt;
use crate::error::Result;
use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes and reads counted, shareable between threads.
#[derive(Debug, Default)]
pub struct ReadCounter {
    bytes: AtomicU64,
    reads: AtomicU64,
}

impl ReadCounter {
    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Reads (calls) so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Back to zero.
    pub fn reset(&self) {
        self.bytes.store(0, Ordering::Relaxed);
        self.reads.store(0, Ordering::Relaxed);
    }

    /// One read of `n` bytes made around the counted source (a direct read of the file).
    pub fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
        self.reads.fetch_add(1, Ordering::Relaxed);
    }
}

/// `inner`, its reads counted in `counter`.
#[derive(Debug)]
pub struct Counted<'a, R: ReadAt + ?Sized> {
    inner: &'a R,
    counter: &'a ReadCounter,
}

impl<'a, R: ReadAt + ?Sized> Counted<'a, R> {
    /// `inner`, each of its reads (and the bytes read) added to `counter`.
    pub fn new(inner: &'a R, counter: &'a ReadCounter) -> Self {
        Counted { inner, counter }
    }
}

impl<R: ReadAt + ?Sized> ReadAt for Counted<'_, R> {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        self.counter.add(range.end.saturating_sub(range.start));
        self.inner.read(range)
    }

    fn parallel_reads(&self) -> Option<usize> {
        self.inner.parallel_reads()
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.counter.add(buf.len() as u64);
        self.inner.read_exact_at(offset, buf)
    }

    fn copy_to(&self, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
        self.counter.add(range.end.saturating_sub(range.start));
        self.inner.copy_to(range, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_kind_of_read_and_withholds_the_slice() {
        let data: Vec<u8> = (0..100).collect();
        let c = ReadCounter::default();
        let r = Counted::new(&data, &c);
        assert_eq!(r.len(), 100);
        assert!(r.as_slice().is_none());
        assert_eq!(&r.read(10..20).unwrap()[..], &data[10..20]);
        let mut buf = [0u8; 5];
        r.read_exact_at(95, &mut buf).unwrap();
        assert_eq!(buf, [95, 96, 97, 98, 99]);
        let mut out = Vec::new();
        r.copy_to(0..30, &mut out).unwrap();
        assert_eq!(out, &data[..30]);
        assert_eq!((c.bytes(), c.reads()), (45, 3));
        c.reset();
        assert_eq!((c.bytes(), c.reads()), (0, 0));
    }
}
