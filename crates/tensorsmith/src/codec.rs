//! zstd for any format that stores parts compressed: plain frames (zTensor v0.1/v1.1 `zstd`)
//! and the seekable format (independent frames plus a seek table in a skippable frame;
//! zTensor v2 `zt.zstd-seekable/1`). Decoding always writes into a buffer of exactly the
//! declared size and fails if the stream holds more or less: nothing is zero-filled, nothing
//! inflates past the declaration.

use crate::error::{ErrorKind, Result};
use rayon::prelude::*;
use std::cell::RefCell;
use std::io::Write;

/// No zstd block turns fewer than 4 stored bytes into more than 128 KiB, so a stream can
/// never decode to more than 32768 times its size. Declared sizes beyond that are lies, and
/// are rejected before any buffer is allocated for them.
pub const MAX_ZSTD_RATIO: u64 = 32768;

/// Frames of the seekable format hold at most this much decoded data.
pub const SEEKABLE_MAX_FRAME: u64 = 16 << 20;

/// The frame size the v2 reference writer uses.
pub const SEEKABLE_WRITE_FRAME: usize = 1 << 20;

const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;

/// One zstd frame as the references write it: the streaming encoder, the frame checksum
/// only when asked. The streaming encoder writes no content size, except for empty input,
/// where the single end-of-stream call tells zstd the size (0): the references' empty frame
/// is `28 b5 2f fd 20 00 01 00 00`, and so is this one.
///
/// Each thread keeps one compression context and reuses it: creating a context sizes (and
/// clears) its tables for the level, megabytes at level 19, which for many small tensors cost
/// far more than compressing them. A reset context with the same parameters writes the same
/// frame as a fresh one (tested below).
pub fn compress_frame(data: &[u8], level: i32, checksum: bool) -> Result<Vec<u8>> {
    thread_local! {
        static CONTEXT: RefCell<Option<zstd::zstd_safe::CCtx<'static>>> = const { RefCell::new(None) };
    }
    let out = Vec::with_capacity(data.len() / 2 + 64);
    CONTEXT.with(|cell| {
        // Never re-entered (nothing in here calls back into compress_frame); if it were, the
        // nested call would fall back to a context of its own.
        let Ok(mut slot) = cell.try_borrow_mut() else {
            let mut enc = frame_encoder(out, level, checksum)?;
            enc.write_all(data)?;
            return Ok(enc.finish()?);
        };
        let ctx = slot.get_or_insert_with(zstd::zstd_safe::CCtx::create);
        let mut enc = zstd::stream::write::Encoder::with_context(out, ctx);
        enc.set_parameter(zstd::stream::raw::CParameter::CompressionLevel(level))?;
        enc.include_checksum(checksum)?;
        enc.write_all(data)?;
        Ok(enc.finish()?)
    })
}

/// The encoder [`compress_frame`] uses, for input that arrives in pieces: zstd's streaming
/// output does not depend on how the input is cut, so feeding the same bytes in any pieces
/// and calling `finish` gives the same frame (tested below).
pub fn frame_encoder<W: Write>(
    out: W,
    level: i32,
    checksum: bool,
) -> Result<zstd::stream::Encoder<'static, W>> {
    let mut enc = zstd::stream::Encoder::new(out, level)?;
    enc.include_checksum(checksum)?;
    Ok(enc)
}

fn too_long(expected: u64) -> crate::Error {
    ErrorKind::ZtDecodedLength {
        expected,
        actual: format!("more than {expected}"),
    }
    .into()
}

/// zstd reports a stream that decodes to more than the buffer holds as a buffer "too small":
/// that is the stream being longer than declared.
fn decode_error(e: &std::io::Error, expected: u64) -> crate::Error {
    let msg = e.to_string();
    if msg.contains("too small") {
        too_long(expected)
    } else {
        ErrorKind::ZtCompression(msg).into()
    }
}

fn check_ratio(stored: u64, expected: u64) -> Result<()> {
    if expected > stored.saturating_mul(MAX_ZSTD_RATIO) {
        return Err(ErrorKind::ZtDecodedLength {
            expected,
            actual: format!(
                "at most {} (the zstd limit for {stored} stored bytes)",
                stored.saturating_mul(MAX_ZSTD_RATIO)
            ),
        }
        .into());
    }
    Ok(())
}

/// Decodes `src` (one or more zstd frames) into `dst`, which must come out exactly full.
fn decode_into(src: &[u8], dst: &mut [u8]) -> Result<()> {
    let expected = dst.len() as u64;
    let mut d = zstd::bulk::Decompressor::new()?;
    match d.decompress_to_buffer(src, dst) {
        Ok(n) if n == dst.len() => Ok(()),
        Ok(n) => Err(ErrorKind::ZtDecodedLength {
            expected,
            actual: n.to_string(),
        }
        .into()),
        Err(e) => Err(decode_error(&e, expected)),
    }
}

/// Decodes a zstd stream that must produce exactly `expected` bytes.
pub fn decompress_exact(src: &[u8], expected: u64) -> Result<Vec<u8>> {
    check_ratio(src.len() as u64, expected)?;
    let n = usize::try_from(expected).map_err(|_| too_long(expected))?;
    // One spare byte, so a stream with more data than declared is seen as such.
    let mut out = vec![0u8; n + 1];
    let mut d = zstd::bulk::Decompressor::new()?;
    match d.decompress_to_buffer(src, &mut out[..]) {
        Ok(got) if got == n => {
            out.truncate(n);
            Ok(out)
        }
        Ok(got) if got > n => Err(too_long(expected)),
        Ok(got) => Err(ErrorKind::ZtDecodedLength {
            expected,
            actual: got.to_string(),
        }
        .into()),
        Err(e) => Err(decode_error(&e, expected)),
    }
}

/// One frame of a seekable stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Bytes the frame takes in the stream.
    pub compressed: u64,
    /// Bytes it decompresses to.
    pub decompressed: u64,
}

fn table_err(msg: impl Into<String>) -> crate::Error {
    ErrorKind::ZtSeekTable(msg.into()).into()
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Reads and checks the seek table of a seekable stream that must decode to `decoded_len`.
pub fn seek_table(stored: &[u8], decoded_len: u64) -> Result<Vec<Frame>> {
    let n = stored.len();
    if n < 17 {
        return Err(table_err(format!(
            "stream of {n} bytes is too short for a seek table"
        )));
    }
    if le32(stored, n - 4) != SEEKABLE_MAGIC {
        return Err(table_err("missing seekable magic"));
    }
    let desc = stored[n - 5];
    if desc & 0x7f != 0 {
        return Err(table_err(format!(
            "reserved descriptor bits set ({desc:#04x})"
        )));
    }
    let esize: u64 = if desc & 0x80 != 0 { 12 } else { 8 };
    let frames = u64::from(le32(stored, n - 9));
    let content = frames
        .checked_mul(esize)
        .and_then(|x| x.checked_add(9))
        .filter(|&c| c.checked_add(8).is_some_and(|t| t <= n as u64))
        .ok_or_else(|| table_err(format!("{frames} frames do not fit in the stream")))?;
    let tstart = n - 8 - content as usize;
    if le32(stored, tstart) != SKIPPABLE_MAGIC || u64::from(le32(stored, tstart + 4)) != content {
        return Err(table_err("skippable frame header does not match the table"));
    }
    let mut out = Vec::with_capacity(frames as usize);
    let (mut csum, mut dsum) = (0u64, 0u64);
    for i in 0..frames as usize {
        let at = tstart + 8 + i * esize as usize;
        let f = Frame {
            compressed: u64::from(le32(stored, at)),
            decompressed: u64::from(le32(stored, at + 4)),
        };
        if f.decompressed > SEEKABLE_MAX_FRAME {
            return Err(table_err(format!(
                "frame {i} holds {} bytes, over 16 MiB",
                f.decompressed
            )));
        }
        check_ratio(f.compressed, f.decompressed)?;
        csum += f.compressed;
        dsum += f.decompressed;
        out.push(f);
    }
    if let Some((last, rest)) = out.split_last() {
        if rest.iter().any(|f| f.decompressed != out[0].decompressed)
            || (!rest.is_empty() && last.decompressed > out[0].decompressed)
        {
            return Err(table_err(
                "frames before the last must all have the same decoded size",
            ));
        }
    }
    if csum != tstart as u64 {
        return Err(table_err(format!(
            "frames take {csum} bytes but the table starts at {tstart}"
        )));
    }
    if dsum != decoded_len {
        return Err(ErrorKind::ZtDecodedLength {
            expected: decoded_len,
            actual: format!("{dsum} (per the seek table)"),
        }
        .into());
    }
    Ok(out)
}

/// Decodes a seekable stream to exactly `decoded_len` bytes, frames in parallel.
pub fn seekable_decode(stored: &[u8], decoded_len: u64) -> Result<Vec<u8>> {
    let frames = seek_table(stored, decoded_len)?;
    let mut out = vec![0u8; decoded_len as usize];
    let mut jobs: Vec<(&[u8], &mut [u8])> = Vec::with_capacity(frames.len());
    let (mut src, mut dst) = (stored, &mut out[..]);
    for f in &frames {
        let (s, srest) = src.split_at(f.compressed as usize);
        let (d, drest) = dst.split_at_mut(f.decompressed as usize);
        jobs.push((s, d));
        src = srest;
        dst = drest;
    }
    jobs.into_par_iter()
        .try_for_each(|(s, d)| decode_into(s, d))?;
    Ok(out)
}

/// Encodes as the v2 reference does: 1 MiB frames with checksums, then the seek table.
pub fn seekable_encode(data: &[u8], level: i32) -> Result<Vec<u8>> {
    let frames: Vec<Vec<u8>> = data
        .par_chunks(SEEKABLE_WRITE_FRAME)
        .map(|c| compress_frame(c, level, true))
        .collect::<Result<_>>()?;
    let total: usize = frames.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(total + 17 + 8 * frames.len());
    for f in &frames {
        out.extend_from_slice(f);
    }
    let sizes: Vec<(u32, u32)> = frames
        .iter()
        .zip(data.chunks(SEEKABLE_WRITE_FRAME))
        .map(|(f, c)| (f.len() as u32, c.len() as u32))
        .collect();
    out.extend_from_slice(&seek_table_bytes(&sizes));
    Ok(out)
}

/// The seek table that ends a seekable stream whose frames have these (compressed,
/// decompressed) sizes, in a skippable frame, without per-frame checksums.
pub fn seek_table_bytes(frames: &[(u32, u32)]) -> Vec<u8> {
    let content = 9 + 8 * frames.len() as u32;
    let mut out = Vec::with_capacity(17 + 8 * frames.len());
    out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    out.extend_from_slice(&content.to_le_bytes());
    for (c, d) in frames {
        out.extend_from_slice(&c.to_le_bytes());
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    out.push(0);
    out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_size_or_error() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 7) as u8).collect();
        let z = compress_frame(&data, 3, false).unwrap();
        assert_eq!(decompress_exact(&z, 10_000).unwrap(), data);
        assert!(matches!(
            decompress_exact(&z, 9_999).unwrap_err().kind(),
            ErrorKind::ZtDecodedLength { .. }
        ));
        assert!(matches!(
            decompress_exact(&z, 10_001).unwrap_err().kind(),
            ErrorKind::ZtDecodedLength { .. }
        ));
        // A claim no zstd stream of this size can meet is refused before allocating.
        assert!(decompress_exact(&z, u64::MAX).is_err());
    }

    #[test]
    fn a_reused_context_writes_the_frames_of_a_fresh_encoder() {
        let fresh = |d: &[u8], level, checksum| {
            let mut enc = frame_encoder(Vec::new(), level, checksum).unwrap();
            enc.write_all(d).unwrap();
            enc.finish().unwrap()
        };
        let data: Vec<u8> = (0..300_016u32).map(|i| (i * 31 % 251) as u8).collect();
        // Levels and checksum flags alternate on one thread's context, sizes from empty up.
        for (i, len) in [0usize, 1, 16, 1000, 131_072, 300_000, 0, 16]
            .iter()
            .enumerate()
        {
            for (level, checksum) in [(19, true), (3, false), (1, true), (19, false)] {
                let d = &data[i..i + len];
                assert_eq!(
                    compress_frame(d, level, checksum).unwrap(),
                    fresh(d, level, checksum),
                    "len {len} level {level} checksum {checksum}"
                );
            }
        }
        assert_eq!(
            compress_frame(&[], 3, false).unwrap(),
            [0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x01, 0x00, 0x00]
        );
    }

    #[test]
    fn a_frame_fed_in_pieces_is_the_frame_fed_whole() {
        // Compressible but not trivial, long enough for many 128 KiB blocks.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let data: Vec<u8> = (0..(3 << 20) + 777)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 {
                    (x & 0x0f) as u8
                } else {
                    (i % 251) as u8
                }
            })
            .collect();
        for level in [1, 3, 9] {
            let whole = compress_frame(&data, level, false).unwrap();
            for cut in [7usize, 4095, 65536, 1 << 20, 2 << 20] {
                let mut enc = frame_encoder(Vec::new(), level, false).unwrap();
                for c in data.chunks(cut) {
                    enc.write_all(c).unwrap();
                }
                assert!(
                    enc.finish().unwrap() == whole,
                    "level {level}, pieces of {cut}"
                );
            }
        }
    }

    #[test]
    fn empty_input_frames() {
        assert_eq!(
            compress_frame(b"", 3, false).unwrap(),
            [0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x01, 0x00, 0x00]
        );
        let s = seekable_encode(b"", 3).unwrap();
        assert_eq!(s.len(), 17);
        assert_eq!(seekable_decode(&s, 0).unwrap(), b"");
    }

    #[test]
    fn seekable_round_trip_over_several_frames() {
        let data: Vec<u8> = (0..(2 * SEEKABLE_WRITE_FRAME + 12345))
            .map(|i| (i % 251) as u8)
            .collect();
        let s = seekable_encode(&data, 3).unwrap();
        let t = seek_table(&s, data.len() as u64).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(seekable_decode(&s, data.len() as u64).unwrap(), data);
        assert!(seekable_decode(&s, data.len() as u64 - 1).is_err());
    }
}
