//! `stats`: value statistics of every tensor of a [`Model`], read once, streaming, with all
//! cores. Each tensor is cut into chunks of a few MiB ([`CHUNK_BYTES`], whole elements or
//! whole ggml blocks) that rayon measures in parallel, so one huge tensor uses every core
//! too; chunk partials combine in order (Chan's formula for the moments). Plain tensors are
//! read chunk by chunk from the file (borrowed from the map: no copy, no anonymous memory);
//! tensors whose stored bytes are not their values (compressed zTensor parts, ONNX typed
//! fields, big-endian parts) are decoded whole first, as [`Model::tensor_bytes`] does.
//! GGUF block-quantized tensors are measured on their dequantized F32 values, a few
//! thousand at a time. Integer tensors are read twice: extremes first, then the histogram.

use super::dequantize;
use super::name_glob::{any_matches, Glob};
use super::stats_decode::{decode_f32, decode_int, int_width, kind, per_byte, FloatSrc, Kind};
use super::stats_float::{add_f64, F32Run, FloatAcc, BLOCK};
use super::stats_int::{add_to_histogram, IntAcc, BINS};
use crate::dtype::DType;
use crate::error::Result;
use crate::ggml_quant;
use crate::ggml_type::GgmlType;
use crate::index::{Layout, TensorInfo};
use crate::model::Model;
use rayon::prelude::*;
use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;

/// Bytes of stored data per parallel chunk.
pub const CHUNK_BYTES: u64 = 4 << 20;
/// Dequantized values per batch inside a chunk of a block-quantized tensor.
const GGML_BATCH: usize = 16 * 1024;

/// The statistics of one tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorStats {
    pub name: String,
    /// The stored type as people know it: the dtype, or the ggml block type (`q4_k`).
    pub type_name: &'static str,
    pub shape: Vec<u64>,
    pub elements: u64,
    pub values: Values,
}

/// What was measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Float values; `dtype` is the type they were measured in (F32 for dequantized blocks),
    /// whose subnormals are counted.
    Float { dtype: DType, acc: FloatAcc },
    /// Integers: first-pass figures and the 64-bin histogram (`None` when empty).
    Int {
        acc: IntAcc,
        histogram: Option<Box<[u64; BINS]>>,
    },
    /// Not measured, and why.
    NotMeasured(String),
}

/// Every selected tensor's statistics, in the model's order.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsReport {
    pub tensors: Vec<TensorStats>,
}

/// Which tensors to measure: those matching any pattern, or all when there are none.
#[derive(Debug, Clone, Default)]
pub struct StatsOptions {
    pub tensors: Vec<Glob>,
}

/// The statistics of every tensor of `model` that `opts` selects. Errors (an unreadable
/// range, a corrupt compressed part) name the file and the tensor.
pub fn stats(model: &Model, opts: &StatsOptions) -> Result<StatsReport> {
    let chosen: Vec<&TensorInfo> = model
        .index
        .tensors
        .iter()
        .filter(|t| opts.tensors.is_empty() || any_matches(&opts.tensors, &t.name))
        .collect();
    crate::progress::expect(chosen.iter().map(|t| t.byte_len()).sum());
    let tensors = chosen
        .par_iter()
        .map(|t| measure(model, t))
        .collect::<Result<Vec<_>>>()?;
    Ok(StatsReport { tensors })
}

/// How one tensor is measured.
enum Plan {
    Float(FloatSrc),
    F64,
    Int(DType),
    Ggml(GgmlType),
}

fn plan(model: &Model, t: &TensorInfo) -> std::result::Result<Plan, String> {
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

fn measure(model: &Model, t: &TensorInfo) -> Result<TensorStats> {
    let values = match plan(model, t) {
        Err(why) => {
            crate::progress::advance(t.byte_len());
            Values::NotMeasured(why)
        }
        Ok(p) => {
            let src = Source::open(model, t)?;
            match p {
                Plan::Float(s) => float(&src, t, s)?,
                Plan::F64 => f64s(&src, t)?,
                Plan::Int(d) => ints(&src, t, d)?,
                Plan::Ggml(g) => ggml(&src, t, g)?,
            }
        }
    };
    Ok(TensorStats {
        name: t.name.clone(),
        type_name: t.type_name(),
        shape: t.shape.to_vec(),
        elements: t.elements(),
        values,
    })
}

/// A tensor's value bytes, piece by piece: read from the file when plain, else decoded once.
struct Source<'m> {
    model: &'m Model,
    t: &'m TensorInfo,
    /// Where the values start in the file (plain), or the decoded values.
    whole: Option<Cow<'m, [u8]>>,
    len: u64,
}

impl<'m> Source<'m> {
    fn open(model: &'m Model, t: &'m TensorInfo) -> Result<Source<'m>> {
        if model.is_plain(t) {
            let r = t.data_range();
            return Ok(Source {
                model,
                t,
                whole: None,
                len: r.end - r.start,
            });
        }
        let whole = model.tensor_bytes(t)?;
        Ok(Source {
            model,
            t,
            len: whole.len() as u64,
            whole: Some(whole),
        })
    }

    fn piece(&self, r: Range<u64>) -> Result<Cow<'_, [u8]>> {
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
    fn chunks(&self, unit: u64) -> Vec<Range<u64>> {
        let unit = unit.max(1);
        let whole = self.len / unit * unit;
        let step = (CHUNK_BYTES / unit).max(1) * unit;
        (0..whole.div_ceil(step))
            .map(|i| i * step..((i + 1) * step).min(whole))
            .collect()
    }

    fn file(&self) -> &Path {
        Path::new(&self.model.file_of(self.t).location)
    }
}

fn float(src: &Source<'_>, t: &TensorInfo, s: FloatSrc) -> Result<Values> {
    let w = s.width();
    let acc = src
        .chunks(w as u64)
        .into_par_iter()
        .map(|r| {
            let bytes = src.piece(r.clone())?;
            let mut run = F32Run::default();
            let mut buf = [0f32; BLOCK];
            for b in bytes.chunks(BLOCK * w) {
                let out = &mut buf[..b.len() / w];
                run.add_subnormals(decode_f32(s, b, out));
                run.add(out);
            }
            crate::progress::advance(r.end - r.start);
            Ok::<_, crate::Error>(run.finish())
        })
        .try_reduce(FloatAcc::default, |a, b| Ok(a.merge(b)))?;
    let dtype = match s {
        FloatSrc::F32 => DType::F32,
        FloatSrc::BF16 => DType::BF16,
        FloatSrc::F16 => DType::F16,
        FloatSrc::F8(d) => d,
    };
    debug_assert!(acc.elements == t.elements() || src.len < t.elements() * w as u64);
    Ok(Values::Float { dtype, acc })
}

fn f64s(src: &Source<'_>, _t: &TensorInfo) -> Result<Values> {
    let acc = src
        .chunks(8)
        .into_par_iter()
        .map(|r| {
            let bytes = src.piece(r.clone())?;
            let mut acc = FloatAcc::default();
            let mut buf = vec![0f64; BLOCK];
            for b in bytes.chunks(BLOCK * 8) {
                let out = &mut buf[..b.len() / 8];
                for (o, c) in out.iter_mut().zip(b.chunks_exact(8)) {
                    *o = f64::from_le_bytes(c.try_into().expect("8 bytes"));
                }
                add_f64(&mut acc, out);
            }
            crate::progress::advance(r.end - r.start);
            Ok::<_, crate::Error>(acc)
        })
        .try_reduce(FloatAcc::default, |a, b| Ok(a.merge(b)))?;
    Ok(Values::Float {
        dtype: DType::F64,
        acc,
    })
}

fn ints(src: &Source<'_>, t: &TensorInfo, d: DType) -> Result<Values> {
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
        return Ok(Values::Int {
            acc,
            histogram: None,
        });
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
    Ok(Values::Int {
        acc,
        histogram: Some(Box::new(histogram)),
    })
}

fn ggml(src: &Source<'_>, t: &TensorInfo, g: GgmlType) -> Result<Values> {
    let (bb, be) = (g.block_bytes() as usize, g.block_elements() as usize);
    let per_batch = (GGML_BATCH / be).max(1);
    let acc = src
        .chunks(bb as u64)
        .into_par_iter()
        .map(|r| {
            let bytes = src.piece(r.clone())?;
            let mut run = F32Run::default();
            let mut buf = vec![0f32; per_batch * be];
            for b in bytes.chunks(per_batch * bb) {
                let out = &mut buf[..b.len() / bb * be];
                ggml_quant::dequantize_into(g, b, out)
                    .map_err(|e| e.at_tensor(&t.name).in_file(src.file()))?;
                // Dequantized values are F32: their subnormals are F32's.
                let subnormal = out.iter().filter(|x| x.is_subnormal()).count();
                run.add_subnormals(subnormal as u64);
                run.add(out);
            }
            crate::progress::advance(r.end - r.start);
            Ok::<_, crate::Error>(run.finish())
        })
        .try_reduce(FloatAcc::default, |a, b| Ok(a.merge(b)))?;
    Ok(Values::Float {
        dtype: DType::F32,
        acc,
    })
}
