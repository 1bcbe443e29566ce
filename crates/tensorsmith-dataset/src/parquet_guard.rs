//! A pre-check of a Parquet file's Thrift structures (the footer and every page header)
//! before the Parquet reader sees them.
//!
//! arrow-rs (60.1) skips Thrift fields it does not know by walking them, and counts a bool
//! element of a list or map as zero bytes, although the compact protocol writes one byte for
//! each. A 2 KiB file that declares lists of 2^31 bools keeps it busy for seconds per list.
//! The walk here reads every structure once, refuses a list, set or map that declares more
//! elements than the bytes left could hold, and so costs time in proportion to the bytes.

use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::ChunkReader;

/// Deepest nesting accepted, as the Parquet reader's own skip limit.
const MAX_DEPTH: u32 = 64;
/// First read of a page header; doubled while the header runs past it.
const FIRST_HEADER_WINDOW: u64 = 256;

/// Why a walk stopped.
#[derive(Debug, PartialEq)]
enum Stop {
    /// The bytes ended inside a structure (a longer read may help).
    Eof,
    /// The bytes cannot be Thrift compact (the reason).
    Bad(&'static str),
}

struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Walker<'_> {
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Result<u8, Stop> {
        let b = *self.buf.get(self.pos).ok_or(Stop::Eof)?;
        self.pos += 1;
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), Stop> {
        if n > self.left() {
            return Err(Stop::Eof);
        }
        self.pos += n;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, Stop> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Stop::Bad("a varint longer than 10 bytes"))
    }

    fn zigzag(&mut self) -> Result<i64, Stop> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A list or set header: element type and count, the count checked against the bytes
    /// left (every element takes at least one byte).
    fn list_header(&mut self) -> Result<(u8, u64), Stop> {
        let h = self.byte()?;
        let n = match h >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        if n > self.left() as u64 {
            return Err(Stop::Bad("a list longer than the bytes that follow it"));
        }
        Ok((h & 0x0f, n))
    }

    /// Walks one value of compact type `t`; `in_list` says a bool takes a byte of its own.
    fn value(&mut self, t: u8, in_list: bool, depth: u32) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Bad("Thrift structures nested deeper than 64"));
        }
        match t {
            1 | 2 if in_list => self.skip(1),
            1 | 2 => Ok(()),
            3 => self.skip(1),
            4..=6 => self.varint().map(drop),
            7 => self.skip(8),
            8 => {
                let n = self.varint()?;
                self.skip(usize::try_from(n).map_err(|_| Stop::Eof)?)
            }
            9 | 10 => {
                let (elem, n) = self.list_header()?;
                for _ in 0..n {
                    self.value(elem, true, depth + 1)?;
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                if n.saturating_mul(2) > self.left() as u64 {
                    return Err(Stop::Bad("a map longer than the bytes that follow it"));
                }
                for _ in 0..n {
                    self.value(kv >> 4, true, depth + 1)?;
                    self.value(kv & 0x0f, true, depth + 1)?;
                }
                Ok(())
            }
            12 => self.structure(depth + 1, |_, _, _| Ok(false)).map(drop),
            13 => self.skip(16),
            _ => Err(Stop::Bad("an unknown Thrift type")),
        }
    }

    /// Walks a struct. `field` sees each field's id and type first and returns true when it
    /// consumed the value itself.
    fn structure(
        &mut self,
        depth: u32,
        mut field: impl FnMut(&mut Self, i64, u8) -> Result<bool, Stop>,
    ) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Bad("Thrift structures nested deeper than 64"));
        }
        // Field ids as arrow-rs computes them: i16, a long-form id truncated to i16, a delta
        // that overflows refused.
        let mut id = 0i16;
        loop {
            let h = self.byte()?;
            if h == 0 {
                return Ok(());
            }
            let t = h & 0x0f;
            id = match h >> 4 {
                0 => self.zigzag()? as i16,
                d => id
                    .checked_add(i16::from(d))
                    .ok_or(Stop::Bad("a field id delta overflows"))?,
            };
            if !field(self, i64::from(id), t)? {
                self.value(t, false, depth)?;
            }
        }
    }
}

/// Checks the footer metadata bytes (the Thrift `FileMetaData`, without length and magic).
/// Besides the walk, every schema element's `num_children` must be within the number of
/// schema elements: arrow-rs reserves that many children before reading them.
pub fn check_footer(meta: &[u8]) -> Result<(), String> {
    let mut w = Walker { buf: meta, pos: 0 };
    let walked = w.structure(0, |w, id, _| {
        // FileMetaData field 2: list<SchemaElement>. arrow-rs reads it as a list whatever
        // type the field header declares, so it is walked that way here too.
        if id != 2 {
            return Ok(false);
        }
        let (elem, n) = w.list_header()?;
        if elem != 12 {
            return Err(Stop::Bad("the schema is not a list of structs"));
        }
        for _ in 0..n {
            let mut children = None;
            w.structure(1, |w, id, _| {
                // SchemaElement field 5: num_children, read as an i32 varint (truncated, as
                // arrow-rs reads it) whatever its declared type.
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
        }
        Ok(true)
    });
    match walked {
        Ok(()) => Ok(()),
        Err(Stop::Eof) => Err("the footer metadata ends inside a structure".into()),
        Err(Stop::Bad(why)) => Err(format!("footer metadata: {why}")),
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
                let (header, body) = page_header(file, pos, end).map_err(|why| {
                    format!("row group {g}, column {c}, page at byte {pos}: {why}")
                })?;
                pos += header + body;
            }
        }
    }
    Ok(())
}

/// Walks the page header at `pos`: its length and the page's compressed size.
fn page_header<R: ChunkReader>(file: &R, pos: u64, end: u64) -> Result<(u64, u64), String> {
    let mut window = FIRST_HEADER_WINDOW.min(end - pos);
    loop {
        let bytes = file
            .get_bytes(pos, window as usize)
            .map_err(|e| e.to_string())?;
        let mut w = Walker {
            buf: &bytes,
            pos: 0,
        };
        let mut compressed = None;
        let walked = w.structure(0, |w, id, t| {
            if id == 3 && t == 5 {
                compressed = Some(w.zigzag()?);
                return Ok(true);
            }
            Ok(false)
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
                return Ok((header, size));
            }
            Err(Stop::Eof) if window < end - pos => window = (window * 2).min(end - pos),
            Err(Stop::Eof) => return Err("the page header runs past its column chunk".into()),
            Err(Stop::Bad(why)) => return Err(why.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_many_bools_in_few_bytes_is_refused() {
        // struct { 1: list<bool> of 2^31 elements } in 7 bytes.
        let meta = [0x19, 0xf1, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        let err = check_footer(&meta).unwrap_err();
        assert!(err.contains("a list longer than the bytes"), "{err}");
    }

    #[test]
    fn a_map_of_many_bools_is_refused() {
        // struct { 1: map<bool,bool> of 2^31 entries }.
        let meta = [0x1b, 0x80, 0x80, 0x80, 0x80, 0x08, 0x11, 0x00];
        let err = check_footer(&meta).unwrap_err();
        assert!(err.contains("a map longer than the bytes"), "{err}");
    }

    #[test]
    fn bools_in_lists_take_a_byte_each() {
        // struct { 1: list<bool> [true, false, true] } then stop.
        assert_eq!(check_footer(&[0x19, 0x31, 1, 2, 1, 0x00]), Ok(()));
        // The same list one element short ends inside the structure.
        assert!(check_footer(&[0x19, 0x31, 1, 2]).is_err());
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
        let mut meta = vec![0x1c; 70]; // field 1: struct, 70 times
        meta.extend([0u8; 71]);
        let err = check_footer(&meta).unwrap_err();
        assert!(err.contains("nested deeper"), "{err}");
    }
}
