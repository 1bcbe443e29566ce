//! `stats`: value statistics of every tensor of a [`Model`], read once, streaming, with all
//! cores. Plain tensors (stored raw: safetensors, GGUF, uncompressed zTensor) are cut into
//! chunks of [`CHUNK_BYTES`] (whole elements or whole ggml blocks), listed in file order;
//! every worker thread takes the next chunk from that list, so the file is read nearly
//! sequentially whatever the number of threads, one huge tensor uses every core, and the
//! file's pages a few chunks ahead are requested from the kernel (`posix_fadvise` WILLNEED)
//! so a cold read overlaps the work. Chunk partials merge in chunk order (Chan's formula for
//! the moments) once a tensor's last chunk is done: the numbers do not depend on the thread
//! count's timing. Chunks are borrowed from the file's map (no copy, no anonymous memory).
//! Tensors whose stored bytes are not their values (compressed zTensor parts, ONNX typed
//! fields, big-endian parts) are decoded whole by one worker, as [`Model::tensor_bytes`]
//! does, then measured; integer tensors are read twice (extremes, then the histogram). GGUF
//! block-quantized tensors are measured on their dequantized F32 values, 16 Ki at a time.

use super::dequantize;
use super::name_glob::{any_matches, Glob};
use super::stats_decode::{
    decode_f32, decode_int, int_width, kind, pattern, per_byte, FloatSrc, Kind,
};
use super::stats_float::{add_f64, F32Run, FloatAcc, BLOCK};
use super::stats_int::{add_to_histogram, IntAcc, BINS};
use super::stats_patterns::PatternCounts;
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bytes of stored data per parallel chunk.
pub const CHUNK_BYTES: u64 = 4 << 20;
/// Bytes of plain tensors asked of the kernel ahead of the chunk being measured.
const PREFETCH_BYTES: u64 = 64 << 20;
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
    let tensors: Vec<Tensor<'_>> = chosen.iter().map(|t| Tensor::new(model, t)).collect();
    let mut work = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        match t.chunked() {
            Some(chunks) => {
                work.extend(
                    chunks
                        .into_iter()
                        .enumerate()
                        .map(|(k, range)| Work::Chunk {
                            tensor: i,
                            k,
                            range,
                        }),
                )
            }
            None => work.push(Work::Whole { tensor: i }),
        }
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error = Mutex::new(None);
    let threads = rayon::current_num_threads();
    // Chunks asked for ahead of the one taken: at least PREFETCH_BYTES (a cold read keeps
    // the disk busy while the cores work; 6 chunks measured twice as slow as 16 on a VM disk).
    let ahead = (2 * threads + 2).max((PREFETCH_BYTES / CHUNK_BYTES) as usize);
    for w in work.iter().take(ahead) {
        w.prefetch(&tensors);
    }
    (0..threads).into_par_iter().for_each(|_| {
        let mut scratch = PatternCounts::new(16);
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(w) = work.get(i) else { break };
            if let Some(later) = work.get(i + ahead) {
                later.prefetch(&tensors);
            }
            if let Err(e) = w.run(&tensors, &mut scratch) {
                failed.store(true, Ordering::Relaxed);
                first_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(e);
            }
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok(StatsReport {
        tensors: tensors.into_iter().map(Tensor::into_stats).collect(),
    })
}

/// One selected tensor while it is measured: its plan, its chunks' partials, its result.
struct Tensor<'m> {
    model: &'m Model,
    t: &'m TensorInfo,
    plan: std::result::Result<Plan, String>,
    /// One slot per chunk, and how many are still to come.
    partials: Mutex<Vec<Option<FloatAcc>>>,
    left: AtomicUsize,
    done: Mutex<Option<Values>>,
}

/// A piece of work: one chunk of a plain float tensor, or a whole tensor.
enum Work {
    Chunk {
        tensor: usize,
        k: usize,
        range: Range<u64>,
    },
    Whole {
        tensor: usize,
    },
}

impl Work {
    /// Asks the kernel to start reading a chunk's pages (local files; a hint only).
    fn prefetch(&self, tensors: &[Tensor<'_>]) {
        let Work::Chunk { tensor, range, .. } = self else {
            return;
        };
        let t = &tensors[*tensor];
        if let Some(f) = t.model.file_of(t.t).bytes().local_file() {
            let start = t.t.data_range().start + range.start;
            let _ = rustix::fs::fadvise(
                f,
                start,
                std::num::NonZeroU64::new(range.end - range.start),
                rustix::fs::Advice::WillNeed,
            );
        }
    }

    fn run(&self, tensors: &[Tensor<'_>], scratch: &mut PatternCounts) -> Result<()> {
        match self {
            Work::Whole { tensor } => {
                let t = &tensors[*tensor];
                let values = t.whole()?;
                *t.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(values);
                Ok(())
            }
            Work::Chunk { tensor, k, range } => {
                let t = &tensors[*tensor];
                let plan = t.plan.as_ref().expect("chunked tensors have a plan");
                let src = Source::plain(t.model, t.t);
                let bytes = src.piece(range.clone())?;
                let acc = measure_chunk(plan, &bytes, t.t, src.file(), scratch)?;
                crate::progress::advance(range.end - range.start);
                t.partials.lock().unwrap_or_else(|p| p.into_inner())[*k] = Some(acc);
                if t.left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    t.finish_chunks();
                }
                Ok(())
            }
        }
    }
}

impl<'m> Tensor<'m> {
    fn new(model: &'m Model, t: &'m TensorInfo) -> Self {
        Tensor {
            model,
            t,
            plan: plan(model, t),
            partials: Mutex::new(Vec::new()),
            left: AtomicUsize::new(0),
            done: Mutex::new(None),
        }
    }

    /// The chunks of a plain float tensor (at least one); `None` for work done whole.
    fn chunked(&self) -> Option<Vec<Range<u64>>> {
        let unit = match self.plan.as_ref().ok()? {
            Plan::Float(s) => s.width() as u64,
            Plan::F64 => 8,
            Plan::Ggml(g) => u64::from(g.block_bytes()),
            Plan::Int(_) => return None,
        };
        if !self.model.is_plain(self.t) {
            return None;
        }
        let mut chunks = Source::plain(self.model, self.t).chunks(unit);
        if chunks.is_empty() {
            chunks.push(0..0);
        }
        *self.partials.lock().unwrap_or_else(|p| p.into_inner()) = vec![None; chunks.len()];
        self.left.store(chunks.len(), Ordering::Release);
        Some(chunks)
    }

    /// Every chunk is in: merged in chunk order.
    fn finish_chunks(&self) {
        let parts = std::mem::take(&mut *self.partials.lock().unwrap_or_else(|p| p.into_inner()));
        let acc = parts
            .into_iter()
            .flatten()
            .fold(FloatAcc::default(), FloatAcc::merge);
        let dtype = match self.plan {
            Ok(Plan::Float(s)) => float_dtype(s),
            Ok(Plan::F64) => DType::F64,
            _ => DType::F32,
        };
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(Values::Float { dtype, acc });
    }

    /// A tensor measured by one worker: decoded whole when not plain, integers, or not
    /// measured at all.
    fn whole(&self) -> Result<Values> {
        let p = match &self.plan {
            Err(why) => {
                crate::progress::advance(self.t.byte_len());
                return Ok(Values::NotMeasured(why.clone()));
            }
            Ok(p) => p,
        };
        let src = Source::open(self.model, self.t)?;
        match p {
            Plan::Int(d) => ints(&src, self.t, *d),
            Plan::Float(s) => Ok(Values::Float {
                dtype: float_dtype(*s),
                acc: chunks_of(&src, self.t, p, s.width() as u64)?,
            }),
            Plan::F64 => Ok(Values::Float {
                dtype: DType::F64,
                acc: chunks_of(&src, self.t, p, 8)?,
            }),
            Plan::Ggml(g) => Ok(Values::Float {
                dtype: DType::F32,
                acc: chunks_of(&src, self.t, p, u64::from(g.block_bytes()))?,
            }),
        }
    }

    fn into_stats(self) -> TensorStats {
        let values = self
            .done
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .expect("every tensor is measured once the work is done");
        TensorStats {
            name: self.t.name.clone(),
            type_name: self.t.type_name(),
            shape: self.t.shape.to_vec(),
            elements: self.t.elements(),
            values,
        }
    }
}

fn float_dtype(s: FloatSrc) -> DType {
    match s {
        FloatSrc::F32 => DType::F32,
        FloatSrc::BF16 => DType::BF16,
        FloatSrc::F16 => DType::F16,
        FloatSrc::F8(d) => d,
    }
}

/// A decoded tensor's chunks measured in parallel and merged in order.
fn chunks_of(src: &Source<'_>, t: &TensorInfo, p: &Plan, unit: u64) -> Result<FloatAcc> {
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
fn measure_chunk(
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

/// A tensor's value bytes, piece by piece: read from the file when plain, else decoded once.
struct Source<'m> {
    model: &'m Model,
    t: &'m TensorInfo,
    /// Where the values start in the file (plain), or the decoded values.
    whole: Option<Cow<'m, [u8]>>,
    len: u64,
}

impl<'m> Source<'m> {
    /// A plain tensor's bytes, read from its file.
    fn plain(model: &'m Model, t: &'m TensorInfo) -> Source<'m> {
        let r = t.data_range();
        Source {
            model,
            t,
            whole: None,
            len: r.end - r.start,
        }
    }

    fn open(model: &'m Model, t: &'m TensorInfo) -> Result<Source<'m>> {
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
