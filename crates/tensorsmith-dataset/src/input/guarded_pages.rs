//! The Parquet reader's input for a remote file. A local file's page headers are all walked
//! at open (parquet_guard) and its page CRCs checked before a task reads (page_crc.rs); for a
//! remote file that would fetch the whole object up front, and again for every task. So here
//! each page header is walked by parquet_guard's rules when the reader reaches it, before
//! arrow-rs parses it, and each page body that carries a CRC is checked when it is read: the
//! same checks, on the bytes read, in the order read.

use crate::input::source::{InputSource, SourceRead};
use crate::parquet_guard::page_header;
use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::{ChunkReader, Length};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// A source whose pages are checked as they are read.
pub(crate) struct GuardedPages {
    source: InputSource,
    /// Column chunks as (start, end, row group, column), sorted by start.
    chunks: Vec<(u64, u64, usize, usize)>,
    walk: Mutex<Walk>,
}

/// Where the walk of each chunk's pages stands.
#[derive(Default)]
struct Walk {
    /// Where page headers lie: the chunks' starts and the ends of the pages walked.
    headers: HashSet<u64>,
    /// Where the bodies of pages walked start: the reader asks for a reader there too (after
    /// peeking at a header), and reads no header there.
    bodies: HashSet<u64>,
    /// Page bodies whose headers carry a CRC, by start: (length, CRC, the page's position).
    crcs: HashMap<u64, (usize, u32, u64)>,
}

impl GuardedPages {
    pub(crate) fn new(source: InputSource, meta: &ParquetMetaData) -> GuardedPages {
        let mut chunks = Vec::new();
        for (g, rg) in meta.row_groups().iter().enumerate() {
            for (c, col) in rg.columns().iter().enumerate() {
                let (start, size) = col.byte_range();
                chunks.push((start, start.saturating_add(size), g, c));
            }
        }
        chunks.sort_unstable();
        let walk = Walk {
            headers: chunks.iter().map(|c| c.0).collect(),
            ..Walk::default()
        };
        GuardedPages {
            source,
            chunks,
            walk: Mutex::new(walk),
        }
    }
}

fn malformed(msg: String) -> ParquetError {
    ParquetError::General(format!("malformed Parquet: {msg}"))
}

impl Length for GuardedPages {
    fn len(&self) -> u64 {
        self.source.len()
    }
}

impl ChunkReader for GuardedPages {
    type T = SourceRead;

    /// The reader asks for a reader at each page header: the header is walked first, from
    /// the chunk's start, page by page, as arrow-rs walks it.
    fn get_read(&self, start: u64) -> parquet::errors::Result<SourceRead> {
        let mut walk = self.walk.lock().unwrap_or_else(|e| e.into_inner());
        if walk.bodies.remove(&start) {
            return self.source.get_read(start);
        }
        if !walk.headers.remove(&start) {
            return Err(malformed(format!(
                "a page header at byte {start}, not where the pages walked from its column \
                 chunk's start put one"
            )));
        }
        let i = self.chunks.partition_point(|c| c.0 <= start);
        let chunk = i.checked_sub(1).map(|i| self.chunks[i]);
        let Some((_, end, g, c)) = chunk.filter(|c| start < c.1) else {
            return Err(malformed(format!(
                "a page header at byte {start}, outside every column chunk"
            )));
        };
        if end > self.source.len() {
            return Err(malformed(format!(
                "row group {g}, column {c}: the column chunk lies past the end of the file"
            )));
        }
        let page = page_header(&self.source, start, end).map_err(|why| {
            malformed(format!(
                "row group {g}, column {c}, page at byte {start}: {why}"
            ))
        })?;
        if let Some(crc) = page.crc {
            let body = (page.compressed as usize, crc as u32, page.pos);
            walk.crcs.insert(page.body(), body);
        }
        walk.bodies.insert(page.body());
        if page.end() < end {
            walk.headers.insert(page.end());
        }
        drop(walk);
        self.source.get_read(start)
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let b = self.source.get_bytes(start, length)?;
        let want = {
            let mut walk = self.walk.lock().unwrap_or_else(|e| e.into_inner());
            walk.crcs.remove(&start)
        };
        if let Some((n, crc, pos)) = want.filter(|w| w.0 == length) {
            if crc32fast::hash(&b[..n]) != crc {
                return Err(ParquetError::General(format!(
                    "page at byte {pos}: its CRC does not match its bytes (a corrupt page)"
                )));
            }
        }
        Ok(b)
    }
}
