//! A range of any [`ReadAt`] handed to a callback in pieces of one size, through the
//! source's own streaming copy ([`ReadAt::copy_to`]): for a remote file that is parallel
//! ranged GETs written in order, so consumers that work piece by piece (casts, digests,
//! converters) read a remote tensor at the speed of a download, in bounded memory.

use crate::bytes::ReadAt;
use crate::error::{Error, Result};
use std::io::Write;
use std::ops::Range;

/// Calls `each` on the bytes of `range` of `src`, `chunk` bytes at a time (the last piece
/// may be shorter), copied once more through one buffer of `chunk` bytes.
pub fn for_each_chunk(
    src: &dyn ReadAt,
    range: Range<u64>,
    chunk: u64,
    each: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let chunk = chunk.clamp(1, 1 << 30) as usize;
    let mut cut = Cut {
        buf: Vec::with_capacity(chunk.min((range.end - range.start) as usize)),
        chunk,
        each,
        failed: None,
    };
    let copied = src.copy_to(range, &mut cut);
    if let Some(e) = cut.failed.take() {
        return Err(e);
    }
    copied?;
    if !cut.buf.is_empty() {
        (cut.each)(&cut.buf)?;
    }
    Ok(())
}

/// A writer that hands on whole chunks; the callback's error is kept to be returned as it is.
struct Cut<'a> {
    buf: Vec<u8>,
    chunk: usize,
    each: &'a mut dyn FnMut(&[u8]) -> Result<()>,
    failed: Option<Error>,
}

impl Write for Cut<'_> {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            if self.buf.is_empty() && data.len() >= self.chunk {
                // Whole chunks straight from the source's buffer.
                let (whole, rest) = data.split_at(self.chunk);
                self.hand_on(whole)?;
                data = rest;
                continue;
            }
            let take = (self.chunk - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == self.chunk {
                let full = std::mem::take(&mut self.buf);
                self.hand_on(&full)?;
                self.buf = full;
                self.buf.clear();
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Cut<'_> {
    fn hand_on(&mut self, piece: &[u8]) -> std::io::Result<()> {
        (self.each)(piece).map_err(|e| {
            self.failed = Some(e);
            std::io::Error::other("stopped by the consumer")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_whole_chunks_then_the_rest() {
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        for_each_chunk(&data, 7..9_000, 1000, &mut |b| {
            sizes.push(b.len());
            got.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, &data[7..9_000]);
        assert!(sizes[..sizes.len() - 1].iter().all(|&s| s == 1000));
        assert_eq!(*sizes.last().unwrap(), 8_993 % 1000);
        let e = for_each_chunk(&data, 0..5000, 100, &mut |_| {
            Err(crate::error::ErrorKind::Http("consumer said no".into()).into())
        })
        .unwrap_err();
        assert!(e.to_string().contains("consumer said no"), "{e}");
    }
}
