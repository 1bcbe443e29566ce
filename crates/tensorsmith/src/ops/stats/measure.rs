//! How `stats` measures one tensor: its plan (float widths, F64, integers, ggml blocks, or
//! why not), its bytes piece by piece ([`Source`]: read from the file when plain, decoded
//! once otherwise), one chunk of floats measured ([`measure_chunk`]: the F32 block kernel,
//! bit-pattern counts for 16- and 8-bit floats, F64, dequantized blocks), a decoded tensor's
//! chunks in parallel, and integer tensors in two passes. `stats.rs` schedules the work.

use crate::dtype::DType;
use crate::error::Result;
use crate::ggml_quant;
use crate::ggml_type::GgmlType;
use crate::index::{Layout, TensorInfo};
use crate::model::Model;
use crate::ops::convert::dequantize;
use crate::ops::stats::decode::{
    decode_f32, decode_int, int_width, kind, pattern, per_byte, FloatSrc, Kind,
};
use crate::ops::stats::float::{add_f64, F32Run, FloatAcc, BLOCK};
use crate::ops::stats::int::{add_to_histogram, IntAcc, BINS};
use crate::ops::stats::patterns::PatternCounts;
use rayon::prelude::*;
use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;

/// Bytes of stored data per parallel chunk.
pub const CHUNK_BYTES: u64 = 4 << 20;
/// Dequantized values per batch inside a chunk of a block-quantized tensor.
const GGML_BATCH: usize = 16 * 1024;

/// An integer tensor's figures and its 64-bin histogram (`None` when empty).
pub type IntStats = (IntAcc, Option<Box<[u64; BINS]>>);

/// The dtype a float plan measures values in.
pub fn float_dtype(s: FloatSrc) -> DType {
    match s {
        FloatSrc::F32 => DType::F32,
        FloatSrc::BF16 => DType::BF16,
        FloatSrc::F16 => DType::F16,
        FloatSrc::F8(d) => d,
    }
}

/// A decoded tensor's chunks measured in parallel and merged in order.
pub fn chunks_of(src: &Source<'_>, t: &TensorInfo, p: &Plan, unit: u64) -> Result<FloatAcc> {
    src.chunks(unit)
        .into_par_iter()
        .map_init(
            || PatternCounts::new(16),
            |scratch, r| {
                let bytes = src.piece(r.clone())?;
                let acc = measure_chunk(p, &bytes, t, src.file(), scratch)?;
                crate::progress::advance(r.end - r.start);
                Ok::<_, crate::Error>(acc)
            },
        )
        .collect::<Result<Vec<_>>>()
        .map(|parts| parts.into_iter().fold(FloatAcc::default(), FloatAcc::merge))
}

/// One chunk of float values (whole elements or blocks) measured.
pub fn measure_chunk(
    p: &Plan,
    bytes: &[u8],
    t: &TensorInfo,
    file: &Path,
    scratch: &mut PatternCounts,
) -> Result<FloatAcc> {
    Ok(match *p {
        Plan::Float(FloatSrc::F32) => {
            let mut run = F32Run::default();
            let mut buf = [0f32; BLOCK];
            for b in bytes.chunks(BLOCK * 4) {
                let out = &mut buf[..b.len() / 4];
                run.add_subnormals(decode_f32(FloatSrc::F32, b, out));
                run.add(out);
            }
            run.finish()
        }
        Plan::Float(s) => {
            // 16 bits or fewer: count bit patterns, measure each pattern once.
            let w = s.width();
            scratch.reset(8 * w as u32);
            if w == 2 {
                scratch.add_u16(&bytes[..bytes.len() / 2 * 2]);
            } else {
                scratch.add_u8(bytes);
            }
            scratch.finish(|q| pattern(s, q).0, |q| pattern(s, q).1)
        }
        Plan::F64 => {
            let mut acc = FloatAcc::default();
            let mut buf = vec![0f64; BLOCK];
            for b in bytes.chunks(BLOCK * 8) {
                let out = &mut buf[..b.len() / 8];
                for (o, c) in out.iter_mut().zip(b.chunks_exact(8)) {
                    *o = f64::from_le_bytes(c.try_into().expect("8 bytes"));
                }
                add_f64(&mut acc, out);
            }
            acc
        }
        Plan::Ggml(g) => {
            let (bb, be) = (g.block_bytes() as usize, g.block_elements() as usize);
            let per_batch = (GGML_BATCH / be).max(1);
            let mut run = F32Run::default();
            let mut buf = vec![0f32; per_batch * be];
            for b in bytes.chunks(per_batch * bb) {
                let out = &mut buf[..b.len() / bb * be];
                ggml_quant::dequantize_into(g, b, out)
                    .map_err(|e| e.at_tensor(&t.name).in_file(file))?;
                // Dequantized values are F32: their subnormals are F32's.
                let subnormal = out.iter().filter(|x| x.is_subnormal()).count();
                run.add_subnormals(subnormal as u64);
                run.add(out);
            }
            run.finish()
        }
        Plan::Int(_) => unreachable!("integers are measured whole"),
    })
}

/// How one tensor is measured.
pub enum Plan {
    Float(FloatSrc),
    F64,
    Int(DType),
    Ggml(GgmlType),
}

pub fn plan(model: &Model, t: &TensorInfo) -> std::result::Result<Plan, String> {
    match &t.layout {
        Layout::Dense => {}
        Layout::Ggml(g) if g.is_quantized() => {
            return dequantize::check(model, t)
                .map(Plan::Ggml)
                .map_err(|e| format!("cannot dequantize {}: {}", g.name(), e.kind()));
        }
        Layout::Ggml(_) => {}
        other => {
            return Err(format!(
                "layout {} keeps no dense run of values",
                other.name(crate::index::LayoutNames::Message)
            ))
        }
    }
    Ok(match kind(t.dtype)? {
        Kind::F32(s) => Plan::Float(s),
        Kind::F64 => Plan::F64,
        Kind::Int(d) => Plan::Int(d),
    })
}

/// A tensor's value bytes, piece by piece: read from the file when plain, else decoded once.
pub struct Source<'m> {
    model: &'m Model,
    t: &'m TensorInfo,
    /// Where the values start in the file (plain), or the decoded values.
    whole: Option<Cow<'m, [u8]>>,
    len: u64,
}

impl<'m> Source<'m> {
    /// A plain tensor's bytes, read from its file.
    pub fn plain(model: &'m Model, t: &'m TensorInfo) -> Source<'m> {
        let r = t.data_range();
        Source {
            model,
            t,
            whole: None,
            len: r.end - r.start,
        }
    }

    pub fn open(model: &'m Model, t: &'m TensorInfo) -> Result<Source<'m>> {
        if model.is_plain(t) {
            return Ok(Source::plain(model, t));
        }
        let whole = model.tensor_bytes(t)?;
        Ok(Source {
            model,
            t,
            len: whole.len() as u64,
            whole: Some(whole),
        })
    }

    pub fn piece(&self, r: Range<u64>) -> Result<Cow<'_, [u8]>> {
        match &self.whole {
            Some(w) => Ok(Cow::Borrowed(&w[r.start as usize..r.end as usize])),
            None => {
                let s = self.t.data_range().start;
                self.model.read(self.t, s + r.start..s + r.end)
            }
        }
    }

    /// Chunks of about [`CHUNK_BYTES`], each a whole number of `unit` bytes (a trailing
    /// partial unit is left out).
    pub fn chunks(&self, unit: u64) -> Vec<Range<u64>> {
        let unit = unit.max(1);
        let whole = self.len / unit * unit;
        let step = (CHUNK_BYTES / unit).max(1) * unit;
        (0..whole.div_ceil(step))
            .map(|i| i * step..((i + 1) * step).min(whole))
            .collect()
    }

    pub fn file(&self) -> &Path {
        Path::new(&self.model.file_of(self.t).location)
    }
}

/// An integer tensor: first-pass figures, then the histogram (`None` when empty).
pub fn ints(src: &Source<'_>, t: &TensorInfo, d: DType) -> Result<IntStats> {
    let (w, per) = (int_width(d), per_byte(d) as u64);
    let chunks = src.chunks(w as u64);
    let total = t.elements();
    // Elements before each chunk (packed types hold several per byte).
    let first = |r: &Range<u64>| r.start / w as u64 * per;
    let each = |r: &Range<u64>, f: &mut dyn FnMut(&[i128])| -> Result<()> {
        let bytes = src.piece(r.clone())?;
        let mut buf = Vec::with_capacity(BLOCK);
        let mut at = first(r);
        for b in bytes.chunks(BLOCK / per as usize * w) {
            buf.clear();
            let limit = total
                .saturating_sub(at)
                .min(b.len() as u64 / w as u64 * per);
            decode_int(d, b, limit as usize, &mut buf);
            at += buf.len() as u64;
            f(&buf);
        }
        Ok(())
    };
    let acc = chunks
        .par_iter()
        .map(|r| {
            let mut acc = IntAcc::default();
            each(r, &mut |v| acc.add(v))?;
            crate::progress::advance(r.end - r.start);
            Ok::<_, crate::Error>(acc)
        })
        .try_reduce(IntAcc::default, |a, b| Ok(a.merge(b)))?;
    if acc.count == 0 {
        return Ok((acc, None));
    }
    let histogram = chunks
        .par_iter()
        .map(|r| {
            let mut h = [0u64; BINS];
            each(r, &mut |v| add_to_histogram(&mut h, v, acc.min, acc.max))?;
            Ok::<_, crate::Error>(h)
        })
        .try_reduce(
            || [0u64; BINS],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                Ok(a)
            },
        )?;
    Ok((acc, Some(Box::new(histogram))))
}
