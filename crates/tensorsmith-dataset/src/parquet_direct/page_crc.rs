//! Page checksums: the CRC-32 (IEEE, as zlib computes it) a writer may store in a page header
//! over the page body as stored. Checked wherever a page carries one: by the page copy and the
//! decoding while planning, and for the reader path by `check_range` before it reads.

use crate::error::{DatasetError, Result};
use crate::input::source::InputSource;
use crate::parquet_guard::{page_header, PageHeader};
use crate::write::task_context::Ctx;
use parquet::file::reader::{ChunkReader, Length};
use std::ops::Range;
use std::path::Path;

/// Whether `body` (the page's stored bytes) matches the page's CRC (true without one).
pub(super) fn crc_ok(page: &PageHeader, body: &[u8]) -> bool {
    let Some(want) = page.crc else {
        return true;
    };
    crc32fast::hash(body) == want as u32
}

/// The error for a page whose bytes do not match its CRC.
pub(super) fn mismatch(page: &PageHeader) -> String {
    format!(
        "page at byte {}: its CRC does not match its bytes (a corrupt page)",
        page.pos
    )
}

/// An error naming the file, the column, the row group and the page (`why` starts with it).
pub(super) fn page_error(path: &Path, column: &str, group: usize, why: String) -> DatasetError {
    DatasetError::Corrupt {
        path: path.to_path_buf(),
        msg: format!("column '{column}', row group {group}, {why}"),
    }
}

/// The reader path's check: the CRCs of every page of the columns read, in the row groups
/// holding rows `rows` of the input's Parquet files.
pub(crate) fn check_range(ctx: &Ctx, rows: Range<u64>) -> Result<()> {
    let mut base = 0u64;
    for f in ctx.input.files() {
        let Some(n) = f.rows else {
            return Ok(());
        };
        let (lo, hi) = (rows.start.max(base), rows.end.min(base + n));
        // A remote file's CRCs are checked as its pages are read (guarded_pages.rs).
        if let (true, Some(pq), true) = (lo < hi, f.parquet.as_ref(), f.origin.is_local()) {
            let fh = f
                .origin
                .source()
                .map_err(|e| DatasetError::io(&f.path, e))?;
            let meta = pq.metadata();
            let mut at = base;
            for (g, rg) in meta.row_groups().iter().enumerate() {
                let g_rows = u64::try_from(rg.num_rows()).unwrap_or(0);
                if at < hi && at + g_rows > lo {
                    for col in rg.columns() {
                        let name = col.column_descr().path().parts().first().cloned();
                        let Some(name) = name.filter(|n| ctx.plan.read_cols.contains(n)) else {
                            continue;
                        };
                        check_chunk(&fh, col.byte_range())
                            .map_err(|why| page_error(&f.path, &name, g, why))?;
                    }
                }
                at += g_rows;
            }
        }
        base += n;
    }
    Ok(())
}

/// Checks the CRC of every page of the column chunk at `range` that carries one. Headers the
/// reader would refuse are left to it.
fn check_chunk(file: &InputSource, (start, size): (u64, u64)) -> Result<(), String> {
    let end = start.saturating_add(size).min(file.len());
    let mut pos = start;
    while pos < end {
        let Ok(page) = page_header(file, pos, end) else {
            return Ok(());
        };
        if page.crc.is_some() {
            let body = file
                .get_bytes(page.body(), page.compressed as usize)
                .map_err(|e| e.to_string())?;
            if !crc_ok(&page, &body) {
                return Err(mismatch(&page));
            }
        }
        pos = page.end();
    }
    Ok(())
}
