//! A Parquet page body decompressed with its column chunk's codec: snappy, gzip, zstd, LZ4
//! (Hadoop framing, falling back to the LZ4 frame format and then a raw block, as arrow-rs
//! reads it) and LZ4_RAW. Every codec must give exactly the uncompressed size the page header
//! declares; anything else is a corrupt page.

use parquet::basic::Compression;
use std::io::Read;

/// The codecs this module decodes (`None`: pages stored as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Codec {
    None,
    Snappy,
    Gzip,
    Zstd,
    Lz4Hadoop,
    Lz4Raw,
}

impl Codec {
    /// The codec of a column chunk, when this module decodes it (brotli and LZO: no).
    pub(super) fn of(c: Compression) -> Option<Codec> {
        Some(match c {
            Compression::UNCOMPRESSED => Codec::None,
            Compression::SNAPPY => Codec::Snappy,
            Compression::GZIP(_) => Codec::Gzip,
            Compression::ZSTD(_) => Codec::Zstd,
            Compression::LZ4 => Codec::Lz4Hadoop,
            Compression::LZ4_RAW => Codec::Lz4Raw,
            _ => return None,
        })
    }
}

thread_local! {
    /// A zstd context per thread, reused page after page (one per page costs an allocation
    /// and its page faults each time).
    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    /// A streaming zstd context per thread, for the levels at the start of v1 pages.
    static ZSTD_STREAM: std::cell::RefCell<Option<zstd::stream::raw::Decoder<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses `input` into `out` (cleared first), which must come to exactly `size` bytes.
pub(super) fn decompress(
    codec: Codec,
    input: &[u8],
    size: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.clear();
    let got = match codec {
        Codec::None => {
            out.extend_from_slice(input);
            Ok(input.len())
        }
        Codec::Snappy => {
            let n = snap::raw::decompress_len(input).map_err(|e| e.to_string())?;
            if n != size {
                return Err(format!(
                    "snappy declares {n} bytes where the page header declares {size}"
                ));
            }
            out.resize(size, 0);
            snap::raw::Decoder::new()
                .decompress(input, out)
                .map_err(|e| e.to_string())
        }
        Codec::Gzip => read_exact_size(flate2::read::MultiGzDecoder::new(input), size, out),
        // One shot into a buffer of the declared size (the streaming decoder copies every
        // byte once more through its window); a frame larger than `size` fails.
        Codec::Zstd => {
            out.resize(size, 0);
            ZSTD.with(|d| match &mut *d.borrow_mut() {
                Some(d) => d.decompress_to_buffer(input, &mut out[..]),
                slot => {
                    let mut d = zstd::bulk::Decompressor::new()?;
                    let n = d.decompress_to_buffer(input, &mut out[..]);
                    *slot = Some(d);
                    n
                }
            })
            .map_err(|e| e.to_string())
        }
        Codec::Lz4Raw => {
            out.resize(size, 0);
            lz4_flex::block::decompress_into(input, out).map_err(|e| e.to_string())
        }
        Codec::Lz4Hadoop => {
            out.resize(size, 0);
            lz4_hadoop(input, out).or_else(|_| {
                out.clear();
                read_exact_size(lz4_flex::frame::FrameDecoder::new(input), size, out).or_else(
                    |_| {
                        out.resize(size, 0);
                        lz4_flex::block::decompress_into(input, out).map_err(|e| e.to_string())
                    },
                )
            })
        }
    }?;
    if got != size {
        return Err(format!(
            "decompressed to {got} bytes where the page header declares {size}"
        ));
    }
    out.truncate(size);
    Ok(())
}

/// Decompresses at least the first `want` bytes of `input` (all of them when the page is
/// shorter) into `out`, cleared first: how a v1 page's levels, at the start of its compressed
/// body, are read without decompressing its values. Snappy, gzip and zstd stop early; LZ4
/// pages are decompressed whole.
pub(super) fn decompress_prefix(
    codec: Codec,
    input: &[u8],
    size: usize,
    want: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let want = want.min(size);
    out.clear();
    match codec {
        Codec::None => {
            out.extend_from_slice(&input[..want.min(input.len())]);
            Ok(())
        }
        Codec::Snappy => snappy_prefix(input, size, want, out),
        Codec::Gzip => read_prefix(flate2::read::MultiGzDecoder::new(input), want, out),
        Codec::Zstd => zstd_prefix(input, want, out).map_err(|e| e.to_string()),
        Codec::Lz4Raw | Codec::Lz4Hadoop => decompress(codec, input, size, out),
    }
}

/// The first `want` bytes of a zstd frame, through a streaming context kept per thread (its
/// window allocated once, not per page).
fn zstd_prefix(input: &[u8], want: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
    use zstd::stream::raw::{Decoder, Operation};
    ZSTD_STREAM.with(|cell| {
        let mut slot = cell.borrow_mut();
        let d = match &mut *slot {
            Some(d) => d,
            none => none.insert(Decoder::new()?),
        };
        d.reinit()?;
        out.resize(want, 0);
        let (mut read, mut got) = (0, 0);
        while got < want {
            let st = d.run_on_buffers(&input[read..], &mut out[got..want])?;
            read += st.bytes_read;
            got += st.bytes_written;
            if st.bytes_read == 0 && st.bytes_written == 0 {
                break;
            }
        }
        out.truncate(got);
        if got < want {
            return Err(std::io::Error::other(format!(
                "decompressed to {got} bytes, fewer than the page header declares"
            )));
        }
        Ok(())
    })
}

fn read_prefix(r: impl Read, want: usize, out: &mut Vec<u8>) -> Result<(), String> {
    r.take(want as u64)
        .read_to_end(out)
        .map_err(|e| e.to_string())?;
    if out.len() < want {
        return Err(format!(
            "decompressed to {} bytes, fewer than the page header declares",
            out.len()
        ));
    }
    Ok(())
}

/// Snappy's raw format decoded until `want` bytes are out (literals and back references,
/// as the format describes them); stops at the element that passes `want`.
fn snappy_prefix(input: &[u8], size: usize, want: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let n = snap::raw::decompress_len(input).map_err(|e| e.to_string())?;
    if n != size {
        return Err(format!(
            "snappy declares {n} bytes where the page header declares {size}"
        ));
    }
    let bad = || "a corrupt snappy stream".to_string();
    // Skip the length varint.
    let mut pos = input.iter().position(|b| b & 0x80 == 0).ok_or_else(bad)? + 1;
    let le = |b: &[u8]| {
        b.iter()
            .rev()
            .fold(0usize, |a, &x| (a << 8) | usize::from(x))
    };
    while out.len() < want {
        let tag = *input.get(pos).ok_or_else(bad)?;
        pos += 1;
        let (len, offset) = match tag & 3 {
            0 => {
                let mut len = usize::from(tag >> 2);
                if len >= 60 {
                    let k = len - 59;
                    len = le(input.get(pos..pos + k).ok_or_else(bad)?);
                    pos += k;
                }
                let lit = input.get(pos..pos + len + 1).ok_or_else(bad)?;
                out.extend_from_slice(lit);
                pos += len + 1;
                continue;
            }
            1 => {
                let b = *input.get(pos).ok_or_else(bad)?;
                pos += 1;
                (
                    usize::from((tag >> 2) & 7) + 4,
                    (usize::from(tag >> 5) << 8) | usize::from(b),
                )
            }
            k => {
                let w = if k == 2 { 2 } else { 4 };
                let off = le(input.get(pos..pos + w).ok_or_else(bad)?);
                pos += w;
                (usize::from(tag >> 2) + 1, off)
            }
        };
        if offset == 0 || offset > out.len() || out.len() + len > size {
            return Err(bad());
        }
        let from = out.len() - offset;
        for i in 0..len {
            let b = out[from + i];
            out.push(b);
        }
    }
    Ok(())
}

/// Reads `r` to its end into `out`, refusing more than `size` bytes.
fn read_exact_size(r: impl Read, size: usize, out: &mut Vec<u8>) -> Result<usize, String> {
    out.reserve(size);
    let n = r
        .take(size as u64 + 1)
        .read_to_end(out)
        .map_err(|e| e.to_string())?;
    Ok(n)
}

/// Hadoop's LZ4 framing: blocks of (decompressed size, compressed size) big-endian u32s and
/// a raw LZ4 block, until the input ends.
fn lz4_hadoop(mut input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    let mut at = 0usize;
    while !input.is_empty() {
        let field = |i: usize| -> Result<usize, String> {
            let b = input.get(i..i + 4).ok_or("a Hadoop LZ4 frame cut short")?;
            Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let (dsize, csize) = (field(0)?, field(4)?);
        let block = input
            .get(8..8 + csize)
            .ok_or("a Hadoop LZ4 frame cut short")?;
        let dst = out
            .get_mut(at..at + dsize)
            .ok_or("a Hadoop LZ4 frame larger than the page")?;
        let n = lz4_flex::block::decompress_into(block, dst).map_err(|e| e.to_string())?;
        if n != dsize {
            return Err("a Hadoop LZ4 frame of another size than it declares".into());
        }
        at += dsize;
        input = &input[8 + csize..];
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_a_wrong_size_is_refused() {
        let data: Vec<u8> = (0..5000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        let snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let zstd = zstd::bulk::compress(&data, 3).unwrap();
        let block = lz4_flex::block::compress(&data);
        let mut hadoop = (data.len() as u32).to_be_bytes().to_vec();
        hadoop.extend((block.len() as u32).to_be_bytes());
        hadoop.extend(&block);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &data).unwrap();
        let gz = gz.finish().unwrap();
        let mut out = Vec::new();
        for (codec, bytes) in [
            (Codec::None, &data),
            (Codec::Snappy, &snappy),
            (Codec::Zstd, &zstd),
            (Codec::Lz4Raw, &block),
            (Codec::Lz4Hadoop, &hadoop),
            (Codec::Lz4Hadoop, &block),
            (Codec::Gzip, &gz),
        ] {
            decompress(codec, bytes, data.len(), &mut out).unwrap();
            assert!(out == data, "{codec:?}");
            assert!(
                decompress(codec, bytes, data.len() + 1, &mut out).is_err(),
                "{codec:?}"
            );
            let mut cut = bytes.clone();
            cut.truncate(bytes.len() / 2);
            assert!(
                decompress(codec, &cut, data.len(), &mut out).is_err(),
                "{codec:?}"
            );
            // Prefixes: the stream's first bytes, whatever the element boundaries.
            for want in [0, 1, 5, 100, 4096, 19_999, 20_000, 30_000] {
                decompress_prefix(codec, bytes, data.len(), want, &mut out).unwrap();
                let k = want.min(data.len());
                assert!(out.len() >= k && out[..k] == data[..k], "{codec:?} {want}");
            }
        }
    }

    #[test]
    fn snappy_prefixes_of_literals_and_long_copies_match_the_whole() {
        // Mixed: random bytes (literals), runs (overlapping copies), repeats (far copies).
        let mut x = 12345u32;
        let mut data: Vec<u8> = Vec::new();
        for i in 0..200_000usize {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let b = match (i / 5000) % 3 {
                0 => (x >> 16) as u8,
                1 => 7,
                _ => data[i - 4000],
            };
            data.push(b);
        }
        let c = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let mut out = Vec::new();
        for want in [1, 3, 61, 4096, 65_537, 150_001, 200_000] {
            decompress_prefix(Codec::Snappy, &c, data.len(), want, &mut out).unwrap();
            assert!(out.len() >= want && out[..want] == data[..want], "{want}");
        }
        let cut = &c[..c.len() / 2];
        assert!(decompress_prefix(Codec::Snappy, cut, data.len(), 200_000, &mut out).is_err());
    }
}
