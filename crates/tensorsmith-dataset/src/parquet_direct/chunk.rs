//! One column chunk of a single-level list column, read as far as its page headers and
//! levels: where each page's values lie in the file, and proof that every row holds the same
//! number of values, none null. Anything else (compression, dictionaries, other encodings,
//! nulls, rows of other lengths, a malformed page) gives `None`: the chunk is left to the
//! Parquet reader, which converts what this does not and names the row that is wrong.

use super::levels::{bit_width, runs, Rows};
use crate::parquet_guard::{page_header, PageHeader, PageKind};
use parquet::basic::Compression;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::{ChunkReader, Length};
use std::fs::File;

/// Encoding codes (parquet.thrift).
const PLAIN: i32 = 0;
const RLE: i32 = 3;

/// Values `len` bytes long at `file` in the file, at `stream` in the chunk's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Extent {
    pub stream: u64,
    pub file: u64,
    pub len: u64,
}

/// Where a chunk's values are: rows of `row_len` values each, back to back in `extents`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChunkLayout {
    pub rows: u64,
    pub row_len: u64,
    pub extents: Vec<Extent>,
}

/// Reads the layout of `col`, a chunk of `rows` rows of values `width` bytes each (PLAIN),
/// with levels up to `max_def` and repetition level 1.
pub(super) fn scan(
    file: &File,
    col: &ColumnChunkMetaData,
    width: u64,
    rows: u64,
) -> Option<ChunkLayout> {
    let descr = col.column_descr();
    if col.compression() != Compression::UNCOMPRESSED
        || col.dictionary_page_offset().is_some()
        || descr.max_rep_level() != 1
        || !(1..=255).contains(&descr.max_def_level())
    {
        return None;
    }
    let max_def = descr.max_def_level();
    let (start, size) = col.byte_range();
    let end = start.checked_add(size)?;
    if end > file.len() {
        return None;
    }
    let mut shape = Rows::default();
    let mut extents = Vec::new();
    let mut stream = 0u64;
    let mut pos = start;
    while pos < end {
        let page = page_header(file, pos, end).ok()?;
        let (levels, n) = page_levels(file, &page, max_def, &mut shape)?;
        let values = page.compressed - levels;
        if values != n.checked_mul(width)? {
            return None;
        }
        if values > 0 {
            extents.push(Extent {
                stream,
                file: page.body() + levels,
                len: values,
            });
        }
        stream += values;
        pos = page.end();
    }
    let (got, row_len) = shape.finish()?;
    (got == rows).then_some(ChunkLayout {
        rows,
        row_len,
        extents,
    })
}

/// Checks a data page's header and levels (feeding the repetition levels to `shape`, holding
/// every definition level at `max_def`); returns the bytes the levels take at the start of
/// its body and its number of values.
fn page_levels(
    file: &File,
    page: &PageHeader,
    max_def: i16,
    shape: &mut Rows,
) -> Option<(u64, u64)> {
    if page.uncompressed != i32::try_from(page.compressed).ok() || page.encoding != Some(PLAIN) {
        return None;
    }
    let n = u64::try_from(page.num_values?).ok()?;
    let body = page.body();
    let bytes = |off: u64, len: u64| -> Option<bytes::Bytes> {
        (off.checked_add(len)? <= page.end())
            .then(|| file.get_bytes(off, len as usize).ok())
            .flatten()
    };
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
            let rep_len = len(body)?;
            let rep = bytes(body + 4, rep_len)?;
            let def_len = len(body + 4 + rep_len)?;
            let def = bytes(body + 8 + rep_len, def_len)?;
            (rep, def, 8 + rep_len + def_len)
        }
        PageKind::DataV2 => {
            if page.num_nulls != Some(0) {
                return None;
            }
            let rep_len = u64::try_from(page.rep_len?).ok()?;
            let def_len = u64::try_from(page.def_len?).ok()?;
            let rep = bytes(body, rep_len)?;
            let def = bytes(body + rep_len, def_len)?;
            (rep, def, rep_len + def_len)
        }
        _ => return None,
    };
    runs(&rep, 1, n, &mut |level, count| shape.feed(level, count))?;
    let max = u32::try_from(max_def).ok()?;
    runs(&def, bit_width(max_def), n, &mut |level, _| level == max)?;
    Some((levels, n))
}
