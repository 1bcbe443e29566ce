//! A decoded column's values written into shards: a cursor over the column's pages that a
//! task's shards consume in order. Compressed pages are decompressed one at a time into a
//! buffer reused page after page, dictionary indices are gathered straight into the shard's
//! bytes, casts applied on the way; a page shared by two shards is decoded once.

use super::chunk::{page_values, Stored};
use super::dict_indices::DictIndices;
use super::page_crc::page_error;
use super::page_plan::DirectPlan;
use crate::error::DatasetError;
use crate::finite_range::value_text;
use std::io::Write;
use std::ops::Range;
use tensorsmith::safetensors::TensorData;

/// Where a column's decoding stands.
pub(super) struct ColumnCursor<'p> {
    plan: &'p DirectPlan,
    ci: usize,
    /// The page in `buf`, its values from `values` on.
    loaded: Option<Loaded>,
    buf: Vec<u8>,
    values: usize,
    scratch: Vec<u8>,
    /// The decoding error behind a failed shard write.
    pub err: Option<DatasetError>,
}

/// The page in a cursor's buffer: (chunk, page), and for dictionary pages the indices'
/// position and the page's next value.
type Loaded = (usize, usize, Option<(DictIndices, u64)>);

/// Why values could not be written: the output failed, or a page is corrupt.
enum Fail {
    Out(std::io::Error),
    Page(DatasetError),
}

impl<'p> ColumnCursor<'p> {
    pub fn new(plan: &'p DirectPlan, ci: usize) -> Self {
        ColumnCursor {
            plan,
            ci,
            loaded: None,
            buf: Vec::new(),
            values: 0,
            scratch: Vec::new(),
            err: None,
        }
    }

    /// Writes the values of input rows `rows`, in the target dtype, to `out`.
    fn emit(&mut self, rows: Range<u64>, out: &mut dyn Write) -> Result<(), Fail> {
        let plan = self.plan;
        let c = &plan.columns[self.ci];
        let w = c.cast.stored_width();
        for (k, pc) in c.chunks.iter().enumerate() {
            let r0 = pc.row0;
            let (lo, hi) = (rows.start.max(r0), rows.end.min(r0 + pc.layout.rows));
            if lo >= hi {
                continue;
            }
            let (path, file) = &plan.files[pc.file];
            let bad = |why: String| Fail::Page(page_error(path, &c.name, pc.group, why));
            // Value `v` of the chunk that does not fit in the target dtype: its row and
            // element, as the reader path names them.
            let too_big = |v: u64, stored: &[u8], i: usize| {
                Fail::Page(
                    DatasetError::Input {
                        file: None,
                        column: Some(c.name.clone()),
                        row: Some(r0 + v / c.row_len),
                        msg: format!(
                            "element {} = {} does not fit in {}",
                            v % c.row_len,
                            value_text(c.cast.from, stored, i),
                            c.cast.to
                        ),
                    }
                    .in_file_from(path, pc.file_row0),
                )
            };
            let (s, e) = ((lo - r0) * c.row_len, (hi - r0) * c.row_len);
            let pages = &pc.layout.pages;
            let first = pages.partition_point(|p| p.first + p.count <= s);
            for (i, p) in pages.iter().enumerate().skip(first) {
                if p.first >= e {
                    break;
                }
                let a = s.max(p.first) - p.first;
                let b = e.min(p.first + p.count) - p.first;
                self.scratch.clear();
                match &p.stored {
                    Stored::Raw(at) => {
                        self.buf.resize(((b - a) as usize) * w, 0);
                        file.read_exact_at(&mut self.buf, at + a * w as u64)
                            .map_err(|e| bad(format!("page values at byte {at}: {e}")))?;
                        self.loaded = None;
                        write_cast(c.cast, &self.buf, &mut self.scratch, out)
                            .map_err(|e| e.at(|i| too_big(p.first + a + i as u64, &self.buf, i)))?;
                    }
                    Stored::Plain(h) => {
                        if !matches!(self.loaded, Some((kk, ii, _)) if kk == k && ii == i) {
                            self.values = page_values(file, h, pc.layout.codec, &mut self.buf)
                                .map_err(bad)?;
                            self.loaded = Some((k, i, None));
                        }
                        let v0 = self.values;
                        let vals = self.buf.get(v0 + a as usize * w..v0 + b as usize * w);
                        let vals = vals.ok_or_else(|| bad("page values cut short".into()))?;
                        write_cast(c.cast, vals, &mut self.scratch, out)
                            .map_err(|e| e.at(|i| too_big(p.first + a + i as u64, vals, i)))?;
                    }
                    Stored::Dict(h) => {
                        let fresh = match &self.loaded {
                            Some((kk, ii, Some((_, next)))) => {
                                !(*kk == k && *ii == i && *next <= a)
                            }
                            _ => true,
                        };
                        if fresh {
                            self.values = page_values(file, h, pc.layout.codec, &mut self.buf)
                                .map_err(bad)?;
                            let d = DictIndices::new(&self.buf[self.values..])
                                .map_err(|why| bad(format!("page at byte {}: {why}", h.pos)))?;
                            self.loaded = Some((k, i, Some((d, 0))));
                        }
                        let dict = pc.layout.dict.as_deref().expect("a dictionary page");
                        let tw = c.cast.target_width();
                        let Some((_, _, Some((d, next)))) = &mut self.loaded else {
                            unreachable!("loaded above")
                        };
                        let at = |why: String| bad(format!("page at byte {}: {why}", h.pos));
                        let idx = &self.buf[self.values..];
                        if *next < a {
                            d.gather(idx, a - *next, dict, tw, &mut self.scratch)
                                .map_err(at)?;
                            self.scratch.clear();
                        }
                        d.gather(idx, b - a, dict, tw, &mut self.scratch)
                            .map_err(at)?;
                        *next = b;
                        out.write_all(&self.scratch).map_err(Fail::Out)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Why stored values could not be written: the output failed, or value `i` does not fit in
/// the target dtype.
enum CastFail {
    Out(std::io::Error),
    Value(usize),
}

impl CastFail {
    /// As a [`Fail`], a value that does not fit named by `name(i)`.
    fn at(self, name: impl FnOnce(usize) -> Fail) -> Fail {
        match self {
            CastFail::Out(e) => Fail::Out(e),
            CastFail::Value(i) => name(i),
        }
    }
}

/// Writes stored values `vals` to `out` in the target dtype (through `scratch` when cast).
fn write_cast(
    cast: super::value_cast::ValueCast,
    vals: &[u8],
    scratch: &mut Vec<u8>,
    out: &mut dyn Write,
) -> Result<(), CastFail> {
    let bytes = if cast.is_copy() {
        vals
    } else {
        cast.append(vals, scratch).map_err(CastFail::Value)?;
        &scratch[..]
    };
    out.write_all(bytes).map_err(CastFail::Out)
}

/// A shard's tensor of a decoded column: rows `rows`, then `zeros` bytes of padding.
pub(super) struct Decoded<'c, 'p> {
    pub cursor: &'c mut ColumnCursor<'p>,
    pub rows: Range<u64>,
    pub zeros: u64,
}

impl TensorData for Decoded<'_, '_> {
    fn len(&self) -> u64 {
        let c = &self.cursor.plan.columns[self.cursor.ci];
        (self.rows.end - self.rows.start) * c.row_bytes + self.zeros
    }

    fn write_to(&mut self, out: &mut dyn Write) -> tensorsmith::Result<()> {
        match self.cursor.emit(self.rows.clone(), out) {
            Ok(()) => {}
            Err(Fail::Out(e)) => return Err(e.into()),
            Err(Fail::Page(e)) => {
                self.cursor.err = Some(e);
                return Err(std::io::Error::other("a page could not be decoded").into());
            }
        }
        let zeros = [0u8; 4096];
        let mut left = self.zeros;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            out.write_all(&zeros[..n])?;
            left -= n as u64;
        }
        Ok(())
    }
}
