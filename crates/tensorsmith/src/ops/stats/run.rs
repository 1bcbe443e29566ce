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

use crate::dtype::DType;
use crate::error::Result;
use crate::index::TensorInfo;
use crate::model::Model;
use crate::ops::name_glob::{any_matches, Glob};
use crate::ops::stats::float::FloatAcc;
use crate::ops::stats::int::{IntAcc, BINS};
use crate::ops::stats::measure::{chunks_of, float_dtype, ints, measure_chunk, plan, Plan, Source};
use crate::ops::stats::patterns::PatternCounts;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

pub use crate::ops::stats::measure::CHUNK_BYTES;

/// Bytes of plain tensors asked of the kernel ahead of the chunk being measured.
const PREFETCH_BYTES: u64 = 64 << 20;

/// The statistics of one tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorStats {
    /// The tensor's name.
    pub name: String,
    /// The stored type as people know it: the dtype, or the ggml block type (`q4_k`).
    pub type_name: &'static str,
    /// Dimension sizes, outermost first.
    pub shape: Vec<u64>,
    /// Number of elements.
    pub elements: u64,
    /// The figures measured, by kind of value.
    pub values: Values,
}

/// What was measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Float values; `dtype` is the type they were measured in (F32 for dequantized blocks),
    /// whose subnormals are counted.
    Float {
        /// The type the values were measured in.
        dtype: DType,
        /// Count, extremes, moments and value classes (NaN, infinities, zeros, subnormals).
        acc: FloatAcc,
    },
    /// Integers: first-pass figures and the 64-bin histogram (`None` when empty).
    Int {
        /// Count, extremes and moments from the first pass.
        acc: IntAcc,
        /// Counts of values in 64 equal bins between the extremes, from the second pass.
        histogram: Option<Box<[u64; BINS]>>,
    },
    /// Not measured, and why.
    NotMeasured(String),
}

/// Every selected tensor's statistics, in the model's order.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsReport {
    /// One entry per selected tensor, measured or not.
    pub tensors: Vec<TensorStats>,
}

/// Which tensors to measure: those matching any pattern, or all when there are none.
#[derive(Debug, Clone, Default)]
pub struct StatsOptions {
    /// Name patterns (globs) selecting tensors; empty selects every tensor.
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
            Plan::Int(d) => {
                let (acc, histogram) = ints(&src, self.t, *d)?;
                Ok(Values::Int { acc, histogram })
            }
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
