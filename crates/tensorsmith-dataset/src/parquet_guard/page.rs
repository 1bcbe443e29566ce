//! A page header, walked as arrow-rs reads it (the walk of walk.rs), with the fields a reader
//! of the page needs: its kind, sizes, value count, encodings and level lengths.

use super::shapes::{DATA_PAGE_HEADER, DATA_PAGE_HEADER_V2, DICTIONARY_PAGE_HEADER, PAGE_HEADER};
use super::walk::{Stop, Walker};
use parquet::file::reader::ChunkReader;

/// First read of a page header; doubled while the header runs past it.
const FIRST_HEADER_WINDOW: u64 = 256;

/// PageType (parquet.thrift).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageKind {
    Data,
    Index,
    Dictionary,
    DataV2,
    Other(i32),
}

/// What a page header says; absent fields are `None` (`is_compressed`: its default, true).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageHeader {
    /// File offset of the header.
    pub pos: u64,
    /// Bytes of the header itself; the page body follows it.
    pub header_len: u64,
    /// The body's size in the file (field 3, checked to lie within the column chunk).
    pub compressed: u64,
    pub uncompressed: Option<i32>,
    pub kind: Option<PageKind>,
    /// DataPageHeader / DataPageHeaderV2 / DictionaryPageHeader field 1.
    pub num_values: Option<i32>,
    /// The values' encoding (field 2 of v1 and dictionary pages, 4 of v2).
    pub encoding: Option<i32>,
    /// v1: the level encodings.
    pub def_encoding: Option<i32>,
    pub rep_encoding: Option<i32>,
    /// v2: nulls, rows and the byte lengths of the (never compressed) levels.
    pub num_nulls: Option<i32>,
    pub num_rows: Option<i32>,
    pub def_len: Option<i32>,
    pub rep_len: Option<i32>,
    pub is_compressed: bool,
    /// CRC-32 of the page body as stored (field 4), when the writer wrote one.
    pub crc: Option<i32>,
}

impl PageHeader {
    /// The body's first byte.
    pub fn body(&self) -> u64 {
        self.pos + self.header_len
    }

    /// The byte after the page (the next page's header).
    pub fn end(&self) -> u64 {
        self.body() + self.compressed
    }
}

/// Reads the page header at `pos` of a column chunk ending at `end`.
pub(crate) fn page_header<R: ChunkReader>(
    file: &R,
    pos: u64,
    end: u64,
) -> Result<PageHeader, String> {
    let mut window = FIRST_HEADER_WINDOW.min(end - pos);
    loop {
        let bytes = file
            .get_bytes(pos, window as usize)
            .map_err(|e| e.to_string())?;
        let mut w = Walker {
            buf: &bytes,
            pos: 0,
        };
        let mut h = PageHeader {
            pos,
            header_len: 0,
            compressed: 0,
            uncompressed: None,
            kind: None,
            num_values: None,
            encoding: None,
            def_encoding: None,
            rep_encoding: None,
            num_nulls: None,
            num_rows: None,
            def_len: None,
            rep_len: None,
            is_compressed: true,
            crc: None,
        };
        let mut compressed = None;
        // i32 fields are read as arrow-rs reads them: a zigzag varint truncated to 32 bits.
        let walked = w.structure(0, Some(&PAGE_HEADER), &mut |w, id, _| {
            match id {
                1 => {
                    h.kind = Some(match w.zigzag()? as i32 {
                        0 => PageKind::Data,
                        1 => PageKind::Index,
                        2 => PageKind::Dictionary,
                        3 => PageKind::DataV2,
                        k => PageKind::Other(k),
                    })
                }
                2 => h.uncompressed = Some(w.zigzag()? as i32),
                3 => compressed = Some(w.zigzag()? as i32),
                4 => h.crc = Some(w.zigzag()? as i32),
                5 => w.structure(1, Some(&DATA_PAGE_HEADER), &mut |w, id, _| {
                    let slot = match id {
                        1 => &mut h.num_values,
                        2 => &mut h.encoding,
                        3 => &mut h.def_encoding,
                        4 => &mut h.rep_encoding,
                        _ => return Ok(false),
                    };
                    *slot = Some(w.zigzag()? as i32);
                    Ok(true)
                })?,
                // A dictionary page: its value count and encoding in the same slots.
                7 => w.structure(1, Some(&DICTIONARY_PAGE_HEADER), &mut |w, id, _| {
                    let slot = match id {
                        1 => &mut h.num_values,
                        2 => &mut h.encoding,
                        _ => return Ok(false),
                    };
                    *slot = Some(w.zigzag()? as i32);
                    Ok(true)
                })?,
                8 => w.structure(1, Some(&DATA_PAGE_HEADER_V2), &mut |w, id, t| {
                    let slot = match id {
                        1 => &mut h.num_values,
                        2 => &mut h.num_nulls,
                        3 => &mut h.num_rows,
                        4 => &mut h.encoding,
                        5 => &mut h.def_len,
                        6 => &mut h.rep_len,
                        7 => {
                            // A bool's value is its header's type (1 true, 2 false).
                            h.is_compressed = t == 1;
                            return Ok(true);
                        }
                        _ => return Ok(false),
                    };
                    *slot = Some(w.zigzag()? as i32);
                    Ok(true)
                })?,
                _ => return Ok(false),
            }
            Ok(true)
        });
        match walked {
            Ok(()) => {
                let size = compressed.ok_or("a page header without its compressed size")?;
                let size = u64::try_from(size)
                    .map_err(|_| format!("a negative compressed page size ({size})"))?;
                let header = w.pos as u64;
                if size > end - pos - header {
                    return Err(format!(
                        "a page of {size} bytes runs past the end of its column chunk"
                    ));
                }
                h.header_len = header;
                h.compressed = size;
                return Ok(h);
            }
            Err(Stop::Eof) if window < end - pos => window = (window * 2).min(end - pos),
            Err(Stop::Eof) => return Err("the page header runs past its column chunk".into()),
            Err(stop) => return Err(stop.reason()),
        }
    }
}
