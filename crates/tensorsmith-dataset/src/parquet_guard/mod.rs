//! A pre-check of a Parquet file's Thrift structures (the footer and every page header)
//! before the Parquet reader sees them.
//!
//! arrow-rs (60.1) trusts what the footer declares: a 2 KiB file declaring lists of 2^31 bools
//! kept it busy for seconds per list (it skips a bool element as zero bytes), and a schema
//! element claiming 2^31 children made it reserve gigabytes before reading the first child.
//! The walk here reads every structure once, in the way arrow-rs reads it (walk.rs), holding
//! each field it knows to the type the format gives it (shapes.rs), and refuses counts that the
//! bytes cannot back. So it costs time in proportion to the bytes, and what it checks is what
//! the reader will read.

mod page;
mod shapes;
mod walk;

pub(crate) use page::{page_header, PageHeader, PageKind};

use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::ChunkReader;
use shapes::{FILE_META_DATA, SCHEMA_ELEMENT};
use walk::{Stop, Walker};

/// Checks the footer metadata bytes (the Thrift `FileMetaData`, without length and magic).
/// Besides the walk, every schema element's `num_children` must be within the number of
/// schema elements: arrow-rs reserves that many children before reading them.
pub fn check_footer(meta: &[u8]) -> Result<(), String> {
    let mut w = Walker { buf: meta, pos: 0 };
    let walked = w.structure(0, Some(&FILE_META_DATA), &mut |w, id, _| {
        if id != 2 {
            return Ok(false);
        }
        // FileMetaData field 2: list<SchemaElement> (its type already checked).
        w.struct_list(&mut |w, n| {
            let mut children = None;
            w.structure(1, Some(&SCHEMA_ELEMENT), &mut |w, id, _| {
                // SchemaElement field 5, num_children: an i32, truncated as arrow-rs reads it.
                if id == 5 {
                    children = Some(i64::from(w.zigzag()? as i32));
                    return Ok(true);
                }
                Ok(false)
            })?;
            if children.is_some_and(|c| c < 0 || c as u64 > n) {
                return Err(Stop::Bad(
                    "a schema element claims more children than the schema has elements",
                ));
            }
            Ok(())
        })?;
        Ok(true)
    });
    match walked {
        Ok(()) => Ok(()),
        Err(Stop::Eof) => Err("the footer metadata ends inside a structure".into()),
        Err(stop) => Err(format!("footer metadata: {}", stop.reason())),
    }
}

/// Checks the footer of a whole file held in `file` (the last 8 bytes give its length).
pub fn check_file_footer<R: ChunkReader>(file: &R) -> Result<(), String> {
    let len = file.len();
    if len < 12 {
        return Err("shorter than a Parquet file can be".into());
    }
    let tail = file.get_bytes(len - 8, 8).map_err(|e| e.to_string())?;
    if &tail[4..] != b"PAR1" {
        return Err("no PAR1 magic at the end".into());
    }
    let meta_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if meta_len > len - 12 {
        return Err(format!(
            "the footer claims {meta_len} bytes, more than the file holds"
        ));
    }
    let meta = file
        .get_bytes(len - 8 - meta_len, meta_len as usize)
        .map_err(|e| e.to_string())?;
    check_footer(&meta)
}

/// Walks the page headers of every column chunk `meta` names, following each header's
/// compressed size to the next, over the chunk's byte range in `file`.
pub fn check_pages<R: ChunkReader>(file: &R, meta: &ParquetMetaData) -> Result<(), String> {
    let len = file.len();
    for (g, rg) in meta.row_groups().iter().enumerate() {
        for (c, col) in rg.columns().iter().enumerate() {
            let (start, size) = col.byte_range();
            let end = start
                .checked_add(size)
                .filter(|&e| e <= len)
                .ok_or_else(|| {
                    format!(
                        "row group {g}, column {c}: the column chunk lies past the end of the file"
                    )
                })?;
            let mut pos = start;
            while pos < end {
                let page = page_header(file, pos, end).map_err(|why| {
                    format!("row group {g}, column {c}, page at byte {pos}: {why}")
                })?;
                pos = page.end();
            }
        }
    }
    Ok(())
}

/// A page of a column chunk as the walk finds it: where its header and body lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSpot {
    /// The row group's index in the file's metadata, from 0.
    pub row_group: usize,
    /// The column chunk's index within the row group, from 0.
    pub column: usize,
    /// A dictionary page (else a data page, or another kind).
    pub dictionary: bool,
    /// The byte range of the page header (Thrift `PageHeader`), from the start of the file.
    pub header: std::ops::Range<u64>,
    /// The byte range of the page body as stored (compressed), from the start of the file.
    pub body: std::ops::Range<u64>,
}

/// Every page of every column chunk, in file order (the walk of `check_pages`); for tools and
/// tests that look at pages.
pub fn pages<R: ChunkReader>(file: &R, meta: &ParquetMetaData) -> Result<Vec<PageSpot>, String> {
    check_pages(file, meta)?;
    let mut out = Vec::new();
    for (g, rg) in meta.row_groups().iter().enumerate() {
        for (c, col) in rg.columns().iter().enumerate() {
            let (start, size) = col.byte_range();
            let end = start + size;
            let mut pos = start;
            while pos < end {
                let page = page_header(file, pos, end)?;
                out.push(PageSpot {
                    row_group: g,
                    column: c,
                    dictionary: page.kind == Some(PageKind::Dictionary),
                    header: pos..page.body(),
                    body: page.body()..page.end(),
                });
                pos = page.end();
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The footers below hold their test data in FileMetaData field 15, which the format does
    // not define (header byte 0xf_: field delta 15), so they are walked as arrow-rs skips it.

    #[test]
    fn a_list_of_many_bools_in_few_bytes_is_refused() {
        // field 15: list<bool> of 2^31 elements, in 7 bytes.
        let meta = [0xf9, 0xf1, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        let err = check_footer(&meta).unwrap_err();
        assert!(err.contains("a list longer than the bytes"), "{err}");
    }

    #[test]
    fn a_map_of_many_bools_is_refused() {
        // field 15: map<bool,bool> of 2^31 entries.
        let meta = [0xfb, 0x80, 0x80, 0x80, 0x80, 0x08, 0x11, 0x00];
        let err = check_footer(&meta).unwrap_err();
        assert!(err.contains("a map longer than the bytes"), "{err}");
    }

    #[test]
    fn bools_in_skipped_lists_take_no_bytes_as_arrow_rs_skips_them() {
        // field 15: list<bool> of 2, then the struct's stop byte: arrow-rs takes no bytes for
        // the bools, so the first 0 ends the struct.
        assert_eq!(check_footer(&[0xf9, 0x21, 0x00, 0x00]), Ok(()));
        // As the protocol means them ([true, false], one byte each) arrow-rs reads the bool
        // bytes as field headers: field 1 declared as a bool, which the walk refuses too.
        let err = check_footer(&[0xf9, 0x21, 1, 2, 0x00]).unwrap_err();
        assert!(err.contains("field 1 of FileMetaData"), "{err}");
    }

    #[test]
    fn a_type_nibble_of_zero_ends_a_struct_whatever_the_delta() {
        // 0x30: delta 3, type 0. arrow-rs reads it as the struct's end, and so does the walk.
        assert_eq!(check_footer(&[0x30]), Ok(()));
    }

    #[test]
    fn known_fields_must_have_their_types() {
        // FileMetaData { 2: [SchemaElement { 5: declared as a set, 10 bytes } ] }: arrow-rs
        // would read num_children as a varint from the set's bytes.
        let meta = [0x29, 0x1c, 0x5a, 0x0a, 0x00, 0x00];
        let err = check_footer(&meta).unwrap_err();
        assert!(
            err.contains("field 5 of SchemaElement is declared as Thrift compact type 10"),
            "{err}"
        );
        // FileMetaData field 1 (version) declared as a string.
        let err = check_footer(&[0x18, 0x01, 0x41, 0x00]).unwrap_err();
        assert!(err.contains("field 1 of FileMetaData"), "{err}");
    }

    #[test]
    fn schema_children_beyond_the_schema_are_refused() {
        // FileMetaData { 2: [SchemaElement { 5: num_children = 2^30 }] }.
        let meta = [0x29, 0x1c, 0x55, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00, 0x00];
        let err = check_footer(&meta).unwrap_err();
        assert!(err.contains("more children"), "{err}");
        // Two elements, the root with one child: fine.
        let ok = [0x29, 0x2c, 0x55, 0x02, 0x00, 0x00, 0x00];
        assert_eq!(check_footer(&ok), Ok(()));
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused() {
        // field 15: a struct holding field 1: a struct, 69 more times.
        let mut meta = vec![0xfc];
        meta.extend([0x1c; 69]);
        meta.extend([0u8; 71]);
        let err = check_footer(&meta).unwrap_err();
        assert!(err.contains("nested deeper"), "{err}");
    }
}
