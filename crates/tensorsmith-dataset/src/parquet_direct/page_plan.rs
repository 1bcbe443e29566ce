//! The plan of a task's range straight from Parquet pages: for every written column, the
//! column chunks (row groups of each input file) holding those rows and, through their page
//! headers and levels (chunk.rs), where their values lie and how they are stored. A column
//! whose pages are all PLAIN, stored as is and of the target dtype is copied file to file;
//! any other column the plan takes is decoded into the shard (page_cursor.rs). `Ok(None)`
//! whenever a column can be neither, before anything is written; `Err` for a corrupt page.

use super::chunk::{self, ChunkLayout, Stored};
use super::page_crc::page_error;
use super::value_cast::ValueCast;
use crate::column::Kind;
use crate::error::Result;
use crate::input::files::InputKind;
use crate::input::source::InputSource;
use crate::write::task_context::Ctx;
use parquet::basic::Type as Physical;
use std::ops::Range;
use std::path::PathBuf;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Piece;

/// Where the rows of a task's range lie in the input files, column by column.
pub(crate) struct DirectPlan {
    pub(super) files: Vec<(PathBuf, InputSource)>,
    pub(super) columns: Vec<DirectColumn>,
}

pub(super) struct DirectColumn {
    pub(super) name: String,
    pub(super) cast: ValueCast,
    pub(super) sample_shape: Vec<u64>,
    /// Values of one sample.
    pub(super) row_len: u64,
    /// Bytes of one sample in the target dtype.
    pub(super) row_bytes: u64,
    /// Copied file to file (every page PLAIN, stored as is, no cast); else decoded.
    pub(super) copy: bool,
    /// Chunks in row order.
    pub(super) chunks: Vec<PlannedChunk>,
}

pub(super) struct PlannedChunk {
    /// Input row of the chunk's first row.
    pub row0: u64,
    /// Index into `DirectPlan::files`.
    pub file: usize,
    /// Input row of the file's first row (errors count rows within the file).
    pub file_row0: u64,
    /// Row group in its file (for errors).
    pub group: usize,
    pub layout: ChunkLayout,
}

/// Whether Parquet's PLAIN bytes of `physical` are the little-endian bytes of `leaf`: 32- and
/// 64-bit integers and floats, and float16 (2-byte fixed-length byte arrays). Narrower
/// integers are stored widened to 32 bits and go through the reader.
fn stored_as(leaf: DType, physical: Physical, type_len: i32) -> bool {
    match (leaf, physical) {
        (DType::I32 | DType::U32, Physical::INT32)
        | (DType::F32, Physical::FLOAT)
        | (DType::I64 | DType::U64, Physical::INT64)
        | (DType::F64, Physical::DOUBLE) => true,
        (DType::F16, Physical::FIXED_LEN_BYTE_ARRAY) => type_len == 2,
        _ => false,
    }
}

/// The plan for rows `rows` of the input, when every column can be copied or decoded from
/// its pages.
pub(crate) fn plan(ctx: &Ctx, rows: Range<u64>) -> Result<Option<DirectPlan>> {
    let files = ctx.input.files();
    if !ctx.direct || files.is_empty() {
        return Ok(None);
    }
    let schema = ctx.input.schema();
    // Per column: the cast, sample shape, the fixed size of a fixed_size_list.
    let mut wanted = Vec::new();
    for p in &ctx.plan.plans {
        let Kind::Numeric { leaf, inner } = &p.kind else {
            return Ok(None);
        };
        let Some(to) = p.dtype else {
            return Ok(None);
        };
        let Some(cast) = ValueCast::new(*leaf, to, ctx.opts.f16_rounding) else {
            return Ok(None);
        };
        if !inner.is_empty() {
            return Ok(None);
        }
        let Ok(field) = schema.field_with_name(&p.name) else {
            return Ok(None);
        };
        let fixed = match field.data_type() {
            arrow_schema::DataType::FixedSizeList(_, n) => match u64::try_from(*n) {
                Ok(n) => Some(n),
                Err(_) => return Ok(None),
            },
            _ => None,
        };
        wanted.push((cast, p.shape.clone(), fixed));
    }
    let mut opened = Vec::new();
    let mut columns: Vec<DirectColumn> = Vec::new();
    let mut base = 0u64;
    for f in files {
        let (Some(n), Some(pq)) = (f.rows, f.parquet.as_ref()) else {
            return Ok(None);
        };
        if f.kind != InputKind::Parquet {
            return Ok(None);
        }
        // A remote file goes through the reader unless asked otherwise (Input::remote_pages).
        if !f.origin.is_local() && !ctx.input.remote_pages() {
            return Ok(None);
        }
        let (lo, hi) = (rows.start.max(base), rows.end.min(base + n));
        if lo < hi {
            let meta = pq.metadata();
            let leaves = meta.file_metadata().schema_descr();
            // Each written column is one leaf of the Parquet schema.
            let leaf_of = |name: &str| {
                let mut it = (0..leaves.num_columns()).filter(|&i| {
                    leaves.column(i).path().parts().first().map(String::as_str) == Some(name)
                });
                let i = it.next()?;
                it.next().is_none().then_some(i)
            };
            let idx: Option<Vec<usize>> = ctx.plan.plans.iter().map(|p| leaf_of(&p.name)).collect();
            let Some(idx) = idx else {
                return Ok(None);
            };
            // The chunks this task reads (a remote file reads ahead only inside them).
            let mut ranges = Vec::new();
            let mut at = base;
            for rg in meta.row_groups() {
                let g_rows = u64::try_from(rg.num_rows()).unwrap_or(0);
                if at < hi && at + g_rows > lo {
                    for &leaf in &idx {
                        let (start, size) = rg.column(leaf).byte_range();
                        ranges.push(start..start.saturating_add(size));
                    }
                }
                at += g_rows;
            }
            let Ok(fh) = f.origin.source_within(ranges) else {
                return Ok(None);
            };
            // A remote file's page headers and levels are scanned by small ranges (its pages
            // are then read once, through `fh`'s block cache, as the shards are written).
            let probe = match f.origin.is_local() {
                true => None,
                false => f.origin.probe().ok(),
            };
            let scan_src = probe.as_ref().unwrap_or(&fh);
            let fi = opened.len();
            let mut at = base;
            for (g, rg) in meta.row_groups().iter().enumerate() {
                let Ok(g_rows) = u64::try_from(rg.num_rows()) else {
                    return Ok(None);
                };
                if at < hi && at + g_rows > lo {
                    for (ci, (&leaf, (cast, _, _))) in idx.iter().zip(&wanted).enumerate() {
                        let col = rg.column(leaf);
                        let d = col.column_descr();
                        if !stored_as(cast.from, d.physical_type(), d.type_length()) {
                            return Ok(None);
                        }
                        let name = &ctx.plan.plans[ci].name;
                        let layout = chunk::scan(scan_src, col, *cast, g_rows)
                            .map_err(|why| page_error(&f.path, name, g, why))?;
                        let Some(layout) = layout else {
                            return Ok(None);
                        };
                        if columns.len() <= ci {
                            columns.push(DirectColumn {
                                name: name.clone(),
                                cast: *cast,
                                sample_shape: Vec::new(),
                                row_len: layout.row_len,
                                row_bytes: layout.row_len * cast.target_width() as u64,
                                copy: cast.is_copy(),
                                chunks: Vec::new(),
                            });
                        }
                        let c = &mut columns[ci];
                        if layout.row_len != c.row_len {
                            return Ok(None);
                        }
                        c.copy &= layout.all_raw();
                        c.chunks.push(PlannedChunk {
                            row0: at,
                            file: fi,
                            file_row0: base,
                            group: g,
                            layout,
                        });
                    }
                }
                at += g_rows;
            }
            if at != base + n {
                return Ok(None);
            }
            opened.push((f.path.clone(), fh));
        }
        base += n;
    }
    if columns.len() != wanted.len() {
        return Ok(None);
    }
    for (c, (_, shape, fixed)) in columns.iter_mut().zip(wanted) {
        let len = c.row_len;
        if fixed.is_some_and(|n| n != len) {
            return Ok(None);
        }
        c.sample_shape = match shape {
            Some(s) if s.iter().product::<u64>() == len => s,
            Some(_) => return Ok(None),
            None => vec![len],
        };
    }
    Ok(Some(DirectPlan {
        files: opened,
        columns,
    }))
}

impl DirectPlan {
    /// Frees what the readers of files holding no row at or after `row` keep (a remote
    /// file's cached blocks): a task over many files holds the blocks of one or two at once.
    pub(super) fn release_before(&self, row: u64) {
        for (fi, (_, source)) in self.files.iter().enumerate() {
            let last = self
                .columns
                .iter()
                .flat_map(|c| c.chunks.iter())
                .filter(|pc| pc.file == fi)
                .map(|pc| pc.row0 + pc.layout.rows)
                .max();
            if last.is_some_and(|end| end <= row) {
                source.release();
            }
        }
    }

    /// Every column copied file to file (no decoding).
    pub(super) fn all_copied(&self) -> bool {
        self.columns.iter().all(|c| c.copy)
    }

    /// The file ranges holding rows `rows` of column `ci` (a copied column), in order.
    pub(super) fn pieces(&self, ci: usize, rows: Range<u64>) -> Vec<Piece<'_>> {
        let c = &self.columns[ci];
        let w = c.cast.stored_width() as u64;
        let mut out = Vec::new();
        for pc in &c.chunks {
            let r0 = pc.row0;
            let (lo, hi) = (rows.start.max(r0), rows.end.min(r0 + pc.layout.rows));
            if lo >= hi {
                continue;
            }
            let (s, e) = ((lo - r0) * c.row_len, (hi - r0) * c.row_len);
            let pages = &pc.layout.pages;
            let first = pages.partition_point(|p| p.first + p.count <= s);
            for p in &pages[first..] {
                if p.first >= e {
                    break;
                }
                let Stored::Raw(file) = p.stored else {
                    unreachable!("a copied column has only raw pages")
                };
                let a = s.max(p.first) - p.first;
                let b = e.min(p.first + p.count) - p.first;
                out.push(self.files[pc.file].1.piece(file + a * w..file + b * w));
            }
        }
        out
    }
}
