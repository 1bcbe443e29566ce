//! One column chunk of a single-level list column, read as far as its page headers and
//! levels (and its dictionary): where each page's values lie, how they are stored, and proof
//! that every row holds the same number of values, none null.
//!
//! `Ok(None)` for anything this does not decode (other encodings or codecs, nulls, rows of
//! other lengths, a page the reader may read otherwise): the chunk is left to the Parquet
//! reader, which converts what this does not and names the row that is wrong. `Err` for a
//! page that is corrupt whoever reads it: a CRC that does not match, a page that does not
//! decompress to its declared size, fewer value bytes than its levels give values.

use super::levels::{bit_width, runs, Rows};
use super::page_codec::{decompress, decompress_prefix, Codec};
use super::page_crc::{crc_ok, mismatch};
use super::value_cast::ValueCast;
use crate::input::source::InputSource;
use crate::parquet_guard::{page_header, PageHeader, PageKind};
use bytes::Bytes;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::{ChunkReader, Length};
use std::sync::Arc;

/// Encoding codes (parquet.thrift).
const PLAIN: i32 = 0;
const PLAIN_DICTIONARY: i32 = 2;
const RLE: i32 = 3;
const RLE_DICTIONARY: i32 = 8;

/// How a data page holds its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stored {
    /// PLAIN and stored as is: the values at this file offset.
    Raw(u64),
    /// PLAIN, compressed: decompressed when written.
    Plain(PageHeader),
    /// Dictionary indices (possibly compressed).
    Dict(PageHeader),
}

/// A data page: `count` values, the chunk's values `first..first + count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PageSpan {
    pub first: u64,
    pub count: u64,
    pub stored: Stored,
}

/// A chunk's rows of `row_len` values each, in `pages`; the dictionary's entries already in
/// the target dtype.
#[derive(Debug, Clone)]
pub(super) struct ChunkLayout {
    pub rows: u64,
    pub row_len: u64,
    pub codec: Codec,
    pub pages: Vec<PageSpan>,
    pub dict: Option<Arc<Vec<u8>>>,
}

impl ChunkLayout {
    /// Every page PLAIN and stored as is: the values can be copied file to file.
    pub fn all_raw(&self) -> bool {
        self.pages
            .iter()
            .all(|p| matches!(p.stored, Stored::Raw(_)))
    }
}

/// A page's body as stored, its CRC checked.
pub(super) fn body(file: &InputSource, page: &PageHeader) -> Result<Bytes, String> {
    let b = file
        .get_bytes(page.body(), page.compressed as usize)
        .map_err(|e| format!("page at byte {}: {e}", page.pos))?;
    if !crc_ok(page, &b) {
        return Err(mismatch(page));
    }
    Ok(b)
}

/// Decompressed bytes of a compressed v1 page first read for its levels.
const LEVELS_FIRST_READ: usize = 4096;

/// Compressed bytes of a v1 page without a CRC read for its levels: a zstd block (at most
/// 128 KiB) and then some, a small part of a usual 1 MiB page.
const COMPRESSED_FIRST_READ: usize = 160 << 10;

/// Where a v1 page's levels end in its decompressed body, as far as `b` (its first bytes)
/// tells: the end of what the length prefixes seen so far cover (`None`: not even the first).
fn levels_end(b: &[u8]) -> Option<usize> {
    let len = |at: usize| -> Option<usize> {
        let x = b.get(at..at + 4)?;
        Some(u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize)
    };
    let rep = len(0)?;
    let def_at = 4usize.checked_add(rep)?;
    match len(def_at) {
        Some(def) => def_at.checked_add(4)?.checked_add(def),
        None => def_at.checked_add(4),
    }
}

/// A v1 page's level lengths: (rep, def) from the 4-byte prefixes in `b`, the page's
/// decompressed body, when they lie inside it.
pub(super) fn v1_level_lengths(b: &[u8]) -> Option<(usize, usize)> {
    let len = |at: usize| -> Option<usize> {
        let x = b.get(at..at + 4)?;
        Some(u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize)
    };
    let rep = len(0)?;
    let def = len(4usize.checked_add(rep)?)?;
    (8usize.checked_add(rep)?.checked_add(def)? <= b.len()).then_some((rep, def))
}

/// A data page decompressed into `out`; returns where its values start there (v1: after its
/// levels; v2: its levels are not in `out`). `Err` for a page that does not decompress to
/// the size its header declares.
pub(super) fn page_values(
    file: &InputSource,
    page: &PageHeader,
    codec: Codec,
    out: &mut Vec<u8>,
) -> Result<usize, String> {
    let at = |why: String| format!("page at byte {}: {why}", page.pos);
    let b = file
        .get_bytes(page.body(), page.compressed as usize)
        .map_err(|e| at(e.to_string()))?;
    let size = page.uncompressed.and_then(|u| usize::try_from(u).ok());
    let size = size.ok_or_else(|| at("no uncompressed size".into()))?;
    match page.kind {
        Some(PageKind::DataV2) => {
            let levels = (page.rep_len.unwrap_or(0) + page.def_len.unwrap_or(0)) as usize;
            let values = b
                .get(levels..)
                .ok_or_else(|| at("levels past the page".into()))?;
            let codec = if page.is_compressed {
                codec
            } else {
                Codec::None
            };
            let size = size
                .checked_sub(levels)
                .ok_or_else(|| at("levels larger than the page".into()))?;
            decompress(codec, values, size, out).map_err(at)?;
            Ok(0)
        }
        _ => {
            decompress(codec, &b, size, out).map_err(at)?;
            let (rep, def) =
                v1_level_lengths(out).ok_or_else(|| at("levels past the page".into()))?;
            Ok(8 + rep + def)
        }
    }
}

/// Reads the layout of `col`, a chunk of `rows` rows, its values cast by `cast`, with levels
/// up to `max_def` and repetition level 1.
pub(super) fn scan(
    file: &InputSource,
    col: &ColumnChunkMetaData,
    cast: ValueCast,
    rows: u64,
) -> Result<Option<ChunkLayout>, String> {
    let descr = col.column_descr();
    let Some(codec) = Codec::of(col.compression()) else {
        return Ok(None);
    };
    if descr.max_rep_level() != 1 || !(1..=255).contains(&descr.max_def_level()) {
        return Ok(None);
    }
    let width = cast.stored_width() as u64;
    let max_def = descr.max_def_level();
    let (start, size) = col.byte_range();
    let Some(end) = start.checked_add(size).filter(|&e| e <= file.len()) else {
        return Ok(None);
    };
    let mut shape = Rows::default();
    let mut pages = Vec::new();
    let mut dict: Option<Arc<Vec<u8>>> = None;
    let mut stream = 0u64;
    let mut pos = start;
    let mut buf = Vec::new();
    while pos < end {
        let Ok(page) = page_header(file, pos, end) else {
            return Ok(None);
        };
        pos = page.end();
        let at = |why: &str| format!("page at byte {}: {why}", page.pos);
        if page.kind == Some(PageKind::Dictionary) {
            // One dictionary, before the data pages.
            if dict.is_some() || !pages.is_empty() {
                return Ok(None);
            }
            if !matches!(page.encoding, Some(PLAIN | PLAIN_DICTIONARY)) {
                return Ok(None);
            }
            let (Some(n), Some(u)) = (page.num_values, page.uncompressed) else {
                return Ok(None);
            };
            let (Ok(n), Ok(u)) = (u64::try_from(n), usize::try_from(u)) else {
                return Ok(None);
            };
            let b = body(file, &page)?;
            decompress(codec, &b, u, &mut buf).map_err(|e| at(&e))?;
            let need = n.checked_mul(width).filter(|&x| x <= buf.len() as u64);
            let Some(need) = need else {
                return Err(at(&format!(
                    "a dictionary of {n} values in {} bytes",
                    buf.len()
                )));
            };
            let mut entries =
                Vec::with_capacity(need as usize / cast.stored_width() * cast.target_width());
            // A value beyond the target's range: the reader reports its row.
            if cast.append(&buf[..need as usize], &mut entries).is_err() {
                return Ok(None);
            }
            dict = Some(Arc::new(entries));
            continue;
        }
        if !matches!(page.kind, Some(PageKind::Data | PageKind::DataV2)) {
            return Ok(None);
        }
        let dict_page = match page.encoding {
            Some(PLAIN) => false,
            Some(PLAIN_DICTIONARY | RLE_DICTIONARY) if dict.is_some() => true,
            _ => return Ok(None),
        };
        let Some(n) = page.num_values.and_then(|n| u64::try_from(n).ok()) else {
            return Ok(None);
        };
        let Some(uncompressed) = page.uncompressed.and_then(|u| u64::try_from(u).ok()) else {
            return Ok(None);
        };
        // The page's bytes: read whole when it carries a CRC or its v1 levels are compressed,
        // else only its levels (a page copied file to file never enters this process).
        let stored_as_is =
            codec == Codec::None || (page.kind == Some(PageKind::DataV2) && !page.is_compressed);
        if stored_as_is && uncompressed != page.compressed {
            return Ok(None);
        }
        let whole = if page.crc.is_some() {
            Some(body(file, &page)?)
        } else {
            None
        };
        // A compressed v1 page holds its levels at the start of its compressed body: only as
        // much is decompressed as they take (the values are decompressed when written).
        let v1_compressed = page.kind == Some(PageKind::Data) && codec != Codec::None;
        let decompressed = if v1_compressed {
            // Without a CRC to check, only the start of the compressed body is read: the
            // levels lie in its first few KiB decompressed (the whole page is read when that
            // start does not hold them).
            let mut b = match &whole {
                Some(b) => b.clone(),
                // LZ4 pages decompress whole or not at all.
                None if matches!(codec, Codec::Lz4Raw | Codec::Lz4Hadoop) => body(file, &page)?,
                None => {
                    let n = (page.compressed as usize).min(COMPRESSED_FIRST_READ);
                    file.get_bytes(page.body(), n)
                        .map_err(|e| at(&e.to_string()))?
                }
            };
            let size = uncompressed as usize;
            let mut want = LEVELS_FIRST_READ;
            loop {
                let got = decompress_prefix(codec, &b, size, want, &mut buf);
                if got.is_err() && b.len() < page.compressed as usize {
                    b = body(file, &page)?;
                    continue;
                }
                got.map_err(|e| at(&e))?;
                match levels_end(&buf) {
                    Some(end) if end > buf.len() && end <= size && end > want => want = end,
                    _ => break,
                }
            }
            Some(Bytes::from(std::mem::take(&mut buf)))
        } else {
            None
        };
        // Bytes `off..off + len` of the page body (decompressed for v1 compressed pages).
        let bytes = |off: u64, len: u64| -> Option<Bytes> {
            let src_len = decompressed
                .as_ref()
                .map_or(page.compressed, |d| d.len() as u64);
            if off.checked_add(len)? > src_len {
                return None;
            }
            let r = off as usize..(off + len) as usize;
            match (&decompressed, &whole) {
                (Some(d), _) | (None, Some(d)) => Some(d.slice(r)),
                (None, None) => file.get_bytes(page.body() + off, len as usize).ok(),
            }
        };
        let Some((levels, n)) = page_levels(&page, n, max_def, &mut shape, &bytes) else {
            return Ok(None);
        };
        let value_bytes = uncompressed.checked_sub(levels);
        let Some(value_bytes) = value_bytes else {
            return Ok(None);
        };
        let stored = if dict_page {
            Stored::Dict(page.clone())
        } else {
            // PLAIN: the bytes must hold the values the levels give.
            let need = n.checked_mul(width);
            if need.is_none_or(|need| value_bytes < need) {
                return Err(at(&format!(
                    "{value_bytes} bytes of values where its levels give {n} values of {width} bytes"
                )));
            }
            if need != Some(value_bytes) {
                return Ok(None);
            }
            if stored_as_is {
                Stored::Raw(page.body() + levels)
            } else {
                Stored::Plain(page.clone())
            }
        };
        if n > 0 {
            pages.push(PageSpan {
                first: stream,
                count: n,
                stored,
            });
        }
        stream += n;
        if let Some(d) = decompressed {
            buf = Vec::from(d);
        }
    }
    let Some((got, row_len)) = shape.finish() else {
        return Ok(None);
    };
    Ok((got == rows).then_some(ChunkLayout {
        rows,
        row_len,
        codec,
        pages,
        dict,
    }))
}

/// Checks a data page's header and levels (feeding the repetition levels to `shape`, holding
/// every definition level at `max_def`); returns the bytes the levels take at the start of
/// its (decompressed) body and its number of values.
fn page_levels(
    page: &PageHeader,
    n: u64,
    max_def: i16,
    shape: &mut Rows,
    bytes: &dyn Fn(u64, u64) -> Option<Bytes>,
) -> Option<(u64, u64)> {
    // v1: each level run prefixed by its length (u32); v2: lengths in the header.
    let (rep, def, levels) = match page.kind? {
        PageKind::Data => {
            if page.rep_encoding != Some(RLE) || page.def_encoding != Some(RLE) {
                return None;
            }
            let len = |off| {
                let b = bytes(off, 4)?;
                Some(u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            };
            let rep_len = len(0)?;
            let rep = bytes(4, rep_len)?;
            let def_len = len(4 + rep_len)?;
            let def = bytes(8 + rep_len, def_len)?;
            (rep, def, 8 + rep_len + def_len)
        }
        PageKind::DataV2 => {
            if page.num_nulls != Some(0) {
                return None;
            }
            let rep_len = u64::try_from(page.rep_len?).ok()?;
            let def_len = u64::try_from(page.def_len?).ok()?;
            let rep = bytes(0, rep_len)?;
            let def = bytes(rep_len, def_len)?;
            (rep, def, rep_len + def_len)
        }
        _ => return None,
    };
    runs(&rep, 1, n, &mut |level, count| shape.feed(level, count))?;
    let max = u32::try_from(max_def).ok()?;
    runs(&def, bit_width(max_def), n, &mut |level, _| level == max)?;
    Some((levels, n))
}
