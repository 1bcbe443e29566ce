//! The page-copy plan of a task's row range: for every written column, the column chunks
//! (row groups of each input file) holding those rows and, through their page headers and
//! levels (chunk.rs), the file ranges of their values; `None` whenever a column cannot be
//! copied, before anything is written.

use super::chunk::{self, ChunkLayout};
use crate::column::Kind;
use crate::input::InputKind;
use crate::task_context::Ctx;
use parquet::basic::Type as Physical;
use std::fs::File;
use std::ops::Range;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Piece;

/// Where the rows of a task's range lie in the input files, column by column.
pub(crate) struct DirectPlan {
    files: Vec<File>,
    pub(super) columns: Vec<DirectColumn>,
}

pub(super) struct DirectColumn {
    pub(super) dtype: DType,
    pub(super) sample_shape: Vec<u64>,
    /// Bytes of one sample.
    pub(super) row_bytes: u64,
    /// Chunks in row order: (input row of the chunk's first row, file, layout).
    chunks: Vec<(u64, usize, ChunkLayout)>,
}

/// The bytes a dtype takes in Parquet's PLAIN encoding, when they are the safetensors bytes
/// of the same values: 32- and 64-bit integers and floats, and float16 (2-byte fixed-length
/// byte arrays). Narrower integers are stored widened to 32 bits and go through the reader.
fn plain_width(dtype: DType, physical: Physical, type_len: i32) -> Option<u64> {
    match (dtype, physical) {
        (DType::I32 | DType::U32, Physical::INT32) | (DType::F32, Physical::FLOAT) => Some(4),
        (DType::I64 | DType::U64, Physical::INT64) | (DType::F64, Physical::DOUBLE) => Some(8),
        (DType::F16, Physical::FIXED_LEN_BYTE_ARRAY) if type_len == 2 => Some(2),
        _ => None,
    }
}

/// The plan for rows `rows` of the input, when every column can be copied from its pages.
pub(crate) fn plan(ctx: &Ctx, rows: Range<u64>) -> Option<DirectPlan> {
    let files = ctx.input.files();
    if !ctx.direct || files.is_empty() {
        return None;
    }
    let schema = ctx.input.schema();
    // Per column: dtype, sample shape, the fixed size of a fixed_size_list.
    let mut wanted = Vec::new();
    for p in &ctx.plan.plans {
        let Kind::Numeric { leaf, inner } = &p.kind else {
            return None;
        };
        if !inner.is_empty() || p.dtype != Some(*leaf) {
            return None;
        }
        let fixed = match schema.field_with_name(&p.name).ok()?.data_type() {
            arrow_schema::DataType::FixedSizeList(_, n) => Some(u64::try_from(*n).ok()?),
            _ => None,
        };
        wanted.push((*leaf, p.shape.clone(), fixed));
    }
    let mut opened = Vec::new();
    let mut columns: Vec<DirectColumn> = Vec::new();
    let mut base = 0u64;
    for f in files {
        let n = f.rows?;
        if f.kind != InputKind::Parquet {
            return None;
        }
        let (lo, hi) = (rows.start.max(base), rows.end.min(base + n));
        if lo < hi {
            let fh = File::open(&f.path).ok()?;
            let meta = f.parquet.as_ref()?.metadata();
            let leaves = meta.file_metadata().schema_descr();
            // Each written column is one leaf of the Parquet schema.
            let leaf_of = |name: &str| {
                let mut it = (0..leaves.num_columns()).filter(|&i| {
                    leaves.column(i).path().parts().first().map(String::as_str) == Some(name)
                });
                let i = it.next()?;
                it.next().is_none().then_some(i)
            };
            let idx: Vec<usize> = ctx
                .plan
                .plans
                .iter()
                .map(|p| leaf_of(&p.name))
                .collect::<Option<_>>()?;
            let fi = opened.len();
            let mut at = base;
            for g in meta.row_groups() {
                let g_rows = u64::try_from(g.num_rows()).ok()?;
                if at < hi && at + g_rows > lo {
                    for (ci, (&leaf, (dtype, _, _))) in idx.iter().zip(&wanted).enumerate() {
                        let col = g.column(leaf);
                        let d = col.column_descr();
                        let width = plain_width(*dtype, d.physical_type(), d.type_length())?;
                        let layout = chunk::scan(&fh, col, width, g_rows)?;
                        if columns.len() <= ci {
                            columns.push(DirectColumn {
                                dtype: *dtype,
                                sample_shape: Vec::new(),
                                row_bytes: layout.row_len * width,
                                chunks: Vec::new(),
                            });
                        }
                        let c = &mut columns[ci];
                        if layout.row_len * width != c.row_bytes {
                            return None;
                        }
                        c.chunks.push((at, fi, layout));
                    }
                }
                at += g_rows;
            }
            if at != base + n {
                return None;
            }
            opened.push(fh);
        }
        base += n;
    }
    if columns.len() != wanted.len() {
        return None;
    }
    for (c, (_, shape, fixed)) in columns.iter_mut().zip(wanted) {
        let len = c.chunks[0].2.row_len;
        if fixed.is_some_and(|n| n != len) {
            return None;
        }
        c.sample_shape = match shape {
            Some(s) if s.iter().product::<u64>() == len => s,
            Some(_) => return None,
            None => vec![len],
        };
    }
    Some(DirectPlan {
        files: opened,
        columns,
    })
}

impl DirectPlan {
    /// The file ranges holding rows `rows` of column `ci`, in order.
    pub(super) fn pieces(&self, ci: usize, rows: Range<u64>) -> Vec<Piece<'_>> {
        let c = &self.columns[ci];
        let mut out = Vec::new();
        for (r0, fi, layout) in &c.chunks {
            let (lo, hi) = (rows.start.max(*r0), rows.end.min(r0 + layout.rows));
            if lo >= hi {
                continue;
            }
            let (s, e) = ((lo - r0) * c.row_bytes, (hi - r0) * c.row_bytes);
            let first = layout.extents.partition_point(|x| x.stream + x.len <= s);
            for x in &layout.extents[first..] {
                if x.stream >= e {
                    break;
                }
                let a = s.max(x.stream) - x.stream;
                let b = e.min(x.stream + x.len) - x.stream;
                out.push(Piece::Range(&self.files[*fi], x.file + a..x.file + b));
            }
        }
        out
    }
}
