//! Any model to GGUF v3 through [`gguf::Writer`]: tensors keep their type, or take `dtype`
//! (float tensors), or with `quantize` become ggml blocks (float tensors of two or more
//! dimensions whose rows, `ne[0]`, are whole blocks; the others keep their float type, as
//! llama.cpp's converter leaves them). Each tensor is streamed from the source a chunk at a
//! time: read, cast to F32 and quantized (or cast, or dequantized and cast) per chunk.
//!
//! Metadata: a GGUF input's every key, in order, with its type; a safetensors input's
//! `__metadata__` as strings under `safetensors.metadata.`, a zTensor's under
//! `ztensor.metadata.` (non-strings as JSON text; a `tensorsmith.digest` record is dropped). `set` assignments replace keys in place or
//! are added: before the carried metadata for non-GGUF inputs (so `general.architecture` comes
//! first, where gguf-py's writer puts it), after it for GGUF inputs.

use crate::cast::{cast, Rounding};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::ggml_quant;
use crate::ggml_type::GgmlType;
use crate::gguf::{self, GgufValue};
use crate::index::{Format, Layout, Shape, TensorInfo};
use crate::model::Model;
use crate::ops::convert::options::ConvertOptions;
use crate::ops::convert::skip::skipped;
use crate::ops::convert::{dequantize, meta_carry};
use crate::safetensors::TensorData;
use crate::OpenOptions;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Elements per chunk: 1 Mi (a multiple of every block size).
const CHUNK_ELEMENTS: u64 = 1 << 20;

/// What happens to one tensor's bytes on the way.
#[derive(Clone, Copy)]
enum Step {
    /// Stored bytes as they are.
    Copy,
    /// Float values cast to another float dtype.
    Cast(DType, DType, Rounding),
    /// Float values (of this dtype) to F32, then quantized.
    Quantize(DType, GgmlType),
    /// Block-quantized values dequantized, then cast to this float dtype.
    Dequantize(DType, Rounding),
}

struct Source<'a> {
    model: &'a Model,
    tensor: &'a TensorInfo,
    step: Step,
    len: u64,
    /// Importance weights (`ne[0]` per expert), `ne[0]` and the rows per expert (`ne[1]`).
    weights: Option<(&'a [f32], u64, u64)>,
}

impl TensorData for Source<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        let (model, t) = (self.model, self.tensor);
        let elem = t.dtype.byte_size().unwrap_or(1) as u64;
        match self.step {
            Step::Dequantize(to, rounding) => {
                dequantize::for_each_chunk_as(model, t, to, rounding, |b| Ok(out.write_all(b)?))
            }
            Step::Copy => model.copy_to(t, 8 << 20, out),
            Step::Cast(from, to, r) => model.for_each_chunk(t, CHUNK_ELEMENTS * elem, |b| {
                Ok(out.write_all(&cast(b, from, to, r)?)?)
            }),
            Step::Quantize(from, ty) if self.weights.is_some() => {
                let w = self.weights.expect("weights");
                quantize_weighted(model, t, (from, ty), w, out)
            }
            Step::Quantize(from, ty) => {
                // One output buffer for every chunk: a fresh one each time cost page faults.
                let mut blocks = Vec::new();
                pipelined(model, t, CHUNK_ELEMENTS * elem, from, |values| {
                    let n = values.len() / ty.block_elements() as usize;
                    blocks.resize(n * ty.block_bytes() as usize, 0);
                    ggml_quant::quantize_into(ty, values, &mut blocks)?;
                    Ok(out.write_all(&blocks)?)
                })
            }
        }
    }
}

/// `work` on the F32 values of each chunk of `chunk_bytes` of `t` (stored as `from`), in
/// order, while a thread of its own reads and widens the next chunk (one ahead, so memory
/// holds three chunks at most): reading, and a converted input's own work (an HF folder's
/// casts and permutations), no longer leave the cores idle between the quantizer's parallel
/// runs. The chunks' buffers go back to the reader to be filled again (new ones each chunk
/// spent about 5% of a quantize in page faults). The first error wins: `work`'s stops the
/// reading, the reading's ends the chunks.
fn pipelined(
    model: &Model,
    t: &TensorInfo,
    chunk_bytes: u64,
    from: DType,
    mut work: impl FnMut(&[f32]) -> Result<()>,
) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<f32>>(1);
    // Three buffers are ever in flight: one being filled, one queued, one being worked on.
    let (back_tx, back_rx) = std::sync::mpsc::sync_channel::<Vec<f32>>(3);
    // The reader's own parallel steps (an HF folder's casts) run on a pool of one thread, its
    // own: on the shared pool they queued behind the quantizer's tasks while the reader
    // waited on them, and the next chunk was late.
    let own = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| Error::new(ErrorKind::Unsupported(format!("a reading thread: {e}"))))?;
    std::thread::scope(|s| {
        let reader = s.spawn(move || {
            own.install(move || {
                model.for_each_chunk(t, chunk_bytes, |b| {
                    let mut values = back_rx.try_recv().unwrap_or_default();
                    crate::cast::f32s_into(b, from, &mut values)?;
                    // A closed channel: `work` failed, and its error is the one reported; this
                    // one only stops the reading.
                    tx.send(values).map_err(|_| {
                        Error::new(ErrorKind::Unsupported(
                            "the chunks' consumer stopped".into(),
                        ))
                    })
                })
            })
        });
        let mut worked = Ok(());
        for values in rx.iter() {
            // Ctrl-C stops the write at its next chunk (its temporary file goes with it).
            if let Err(e) = crate::interrupt::check().and_then(|()| work(&values)) {
                worked = Err(e);
                break;
            }
            // The reader may have finished: the buffer is then simply dropped.
            let _ = back_tx.try_send(values);
        }
        drop(rx);
        let read = reader.join().expect("the reading thread panicked");
        worked.and(read)
    })
}

/// F32 values of a chunk of `from` bytes.
fn f32s_of(b: &[u8], from: DType) -> Result<Vec<f32>> {
    let mut values = Vec::new();
    crate::cast::f32s_into(b, from, &mut values)?;
    Ok(values)
}

/// Quantizes `t` a chunk of whole rows at a time, each row with its expert's row of weights
/// (`w` holds `ne[0]` per expert; row `r` is expert `r / ne[1]`), as `llama_model_quantize`
/// does.
fn quantize_weighted(
    model: &Model,
    t: &TensorInfo,
    (from, ty): (DType, GgmlType),
    (w, ne0, ne1): (&[f32], u64, u64),
    out: &mut dyn Write,
) -> Result<()> {
    let elem = t.dtype.byte_size().unwrap_or(1) as u64;
    let rows_per_chunk = (CHUNK_ELEMENTS / ne0).max(1);
    let row_bytes = (ne0 / u64::from(ty.block_elements()) * u64::from(ty.block_bytes())) as usize;
    let n = ne0 as usize;
    let mut row = 0u64;
    model.for_each_chunk(t, rows_per_chunk * ne0 * elem, |b| {
        // Ctrl-C stops the write at its next chunk, as in `pipelined`.
        crate::interrupt::check()?;
        let values = f32s_of(b, from)?;
        let rows = (values.len() / n) as u64;
        let mut blocks = vec![0u8; rows as usize * row_bytes];
        let mut r = 0u64;
        while r < rows {
            // Rows up to the next expert's first.
            let expert = (row + r) / ne1;
            let take = (rows - r).min(ne1 - (row + r) % ne1);
            let (v0, v1) = ((r * ne0) as usize, ((r + take) * ne0) as usize);
            let (o0, o1) = (r as usize * row_bytes, (r + take) as usize * row_bytes);
            let e = &w[expert as usize * n..(expert as usize + 1) * n];
            ggml_quant::quantize_rows_into(ty, &values[v0..v1], n, Some(e), &mut blocks[o0..o1])?;
            r += take;
        }
        row += rows;
        Ok(out.write_all(&blocks)?)
    })
}

/// Whether `out` is written as GGUF: its name ends in `.gguf`.
pub fn writes_gguf(out: &Path) -> bool {
    out.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// Writes `input` as GGUF v3 at `out` (atomically): one file, or parts split as gguf-py splits
/// them when a limit is set (`shard_size` in tensor bytes, `split_max_tensors`,
/// `split_small_first`; see `gguf::write_split`). Returns each file written and its length.
pub fn convert_gguf(
    input: &Model,
    out: &Path,
    opts: &ConvertOptions,
) -> Result<Vec<(PathBuf, u64)>> {
    let place = |e: Error, t: &TensorInfo| e.at_tensor(&t.name).in_file(Path::new(&input.location));
    crate::ops::convert::digest_guard::before(input, opts)?;
    if let Some(to) = opts.dtype {
        if !matches!(to, DType::F32 | DType::F16 | DType::BF16) {
            return Err(Error::new(ErrorKind::UnsupportedCast {
                from: "float tensors".into(),
                to: format!("{to} (GGUF output takes F32, F16 or BF16)"),
            }));
        }
    }
    if let Some(q) = opts.quantize {
        ggml_quant::quantizer(q)?;
    }
    if opts.quantize.is_some() && opts.quantize_mix.is_some() {
        return Err(Error::new(ErrorKind::Unsupported(
            "one block type for every tensor and a llama-quantize mix at once".into(),
        )));
    }
    let imatrix = crate::ops::convert::imatrix::load(opts.imatrix.as_deref(), opts.quantize_mix)?;
    let mut w = gguf::Writer::new();
    // A GGUF input's own headers (one per part of a split model): the first one's typed
    // metadata, without the split keys (the output is split anew, or not), and every tensor's
    // ggml dims, exactly.
    let headers = match input.index.format {
        Format::Gguf { .. } => input
            .files
            .iter()
            .map(|f| {
                gguf::read_header(f.bytes(), &OpenOptions::default())
                    .map_err(|e| e.in_file(Path::new(&f.location)))
            })
            .collect::<Result<Vec<_>>>()?,
        _ => Vec::new(),
    };
    let dims: HashMap<&str, &Shape> = headers
        .iter()
        .flat_map(|h| h.tensors.iter().map(|t| (t.name.as_str(), &t.ne)))
        .collect();
    match headers.first() {
        Some(h) => {
            for (k, v) in h
                .metadata
                .iter()
                .filter(|(k, _)| !gguf::split::is_split_key(k))
            {
                w.set(k.clone(), v.clone());
            }
            for (k, v) in &opts.gguf_set {
                w.set(k.clone(), v.clone());
            }
        }
        None => {
            for (k, v) in &opts.gguf_set {
                w.set(k.clone(), v.clone());
            }
            let prefix = meta_carry::gguf_prefix(&input.index.format);
            // A digest record describes the input's bytes, not the output's, and a write id
            // one write of a checkpoint: neither is carried.
            let carried = input
                .index
                .metadata
                .iter()
                .filter(|(k, _)| meta_carry::carried(k));
            for (k, v) in carried {
                let key = format!("{prefix}{k}");
                if !opts.gguf_set.iter().any(|(s, _)| *s == key) {
                    w.set(key, GgufValue::String(crate::ops::inspect::meta_text(v)));
                }
            }
        }
    }
    w.alignment().map_err(|e| e.in_file(out))?;
    let ne_of = |t: &TensorInfo| -> Shape {
        match dims.get(t.name.as_str()) {
            Some(ne) => (*ne).clone(),
            None => t.shape.iter().rev().copied().collect(),
        }
    };
    let mut tensors: Vec<&TensorInfo> =
        input.index.tensors.iter().filter(|t| !skipped(t)).collect();
    if opts.quantize_mix.is_some() {
        // In the order llama-quantize writes them.
        let order = ggml_quant::mix::loader_order(tensors.iter().map(|t| t.name.as_str()));
        tensors = order.into_iter().map(|i| tensors[i]).collect();
    }
    let mixed = match opts.quantize_mix {
        Some(ft) => {
            let m = crate::ops::convert::mix::model_of(headers.first(), input)?;
            let types =
                crate::ops::convert::mix::types(&m, ft, &tensors, &ne_of, imatrix.is_some())?;
            w.set_last("general.quantization_version", GgufValue::U32(2));
            w.set_last("general.file_type", GgufValue::U32(ft.id));
            if let (Some(m), Some(p)) = (&imatrix, &opts.imatrix) {
                crate::ops::convert::imatrix::set_keys(&mut w, p, m);
            }
            Some(types)
        }
        None => None,
    };
    for (i, t) in tensors.iter().enumerate() {
        let mut ne = ne_of(t);
        if opts.quantize_mix.is_some() {
            // llama-quantize writes each tensor with ggml's count of dimensions
            // (`ggml_n_dims`: trailing 1s dropped, one kept): Qwen2-MoE's shared-expert gate,
            // [256, 1] in the converter's file, is [256] in its output.
            while ne.len() > 1 && ne.last() == Some(&1) {
                ne.pop();
            }
        }
        let chosen = mixed.as_ref().map(|m| m[i]);
        let (ty, step) = plan(t, &ne, opts, chosen).map_err(|e| place(e, t))?;
        let weights = match opts.quantize_mix {
            Some(ft) => {
                let changes = !matches!(step, Step::Copy | Step::Dequantize(..));
                crate::ops::convert::imatrix::weights_for(
                    imatrix.as_ref(),
                    ft,
                    &t.name,
                    &ne,
                    ty,
                    changes,
                )
                .map_err(|e| place(e, t))?
                .map(|w| (w, ne[0], ne.get(1).copied().unwrap_or(1)))
            }
            None => None,
        };
        let elements = ne.iter().product::<u64>();
        let len = ty
            .byte_len(elements)
            .ok_or_else(|| place(Error::new(ErrorKind::ShapeOverflow), t))?;
        let src = Source {
            model: input,
            tensor: t,
            step,
            len,
            weights,
        };
        w.add(t.name.clone(), ne, ty, src)
            .map_err(|e| e.in_file(Path::new(&input.location)))?;
    }
    let limits = gguf::SplitLimits {
        max_tensors: opts.split_max_tensors.unwrap_or(0),
        max_size: opts.shard_size.unwrap_or(0),
        small_first: opts.split_small_first,
    };
    if crate::bytes::is_url(&out.to_string_lossy()) {
        // One file streamed up (a split model is several: refused before anything is read).
        let n = w.write_file_with(out, &opts.storage)?;
        return Ok(vec![(out.to_path_buf(), n)]);
    }
    gguf::write_split(w, out, &limits)
}

/// The output type of `t` and how its bytes get there (`mixed`: the type a llama-quantize mix
/// chose, `Some(None)` where it leaves the tensor as it is).
fn plan(
    t: &TensorInfo,
    ne: &Shape,
    opts: &ConvertOptions,
    mixed: Option<Option<GgmlType>>,
) -> Result<(GgmlType, Step)> {
    if let Some(g) = dequantize::block_type(t) {
        return Ok(match opts.dtype {
            // Already blocks: kept (--quantize does not requantize).
            None => (g, Step::Copy),
            Some(to) => {
                ggml_quant::kernel(g)?;
                (ggml_of(to)?, Step::Dequantize(to, opts.rounding))
            }
        });
    }
    if t.layout != Layout::Dense {
        return Err(Error::new(ErrorKind::Unsupported(format!(
            "a tensor of layout {}, which GGUF cannot hold",
            t.layout.name(crate::index::LayoutNames::Message)
        ))));
    }
    let float = matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64);
    if let Some(Some(q)) = mixed {
        return Ok(match q.dtype() {
            Some(d) if d == t.dtype => (q, Step::Copy),
            Some(d) => (q, Step::Cast(t.dtype, d, Rounding::Nearest)),
            None => (q, Step::Quantize(t.dtype, q)),
        });
    }
    if let (Some(q), true, None) = (opts.quantize, float, mixed) {
        let ne0 = ne.first().copied().unwrap_or(1);
        if ne.len() >= 2 && ne0 % u64::from(q.block_elements()) == 0 {
            return Ok((q, Step::Quantize(t.dtype, q)));
        }
    }
    match opts.dtype {
        Some(to) if float && to != t.dtype => {
            Ok((ggml_of(to)?, Step::Cast(t.dtype, to, opts.rounding)))
        }
        _ => Ok((ggml_of(t.dtype)?, Step::Copy)),
    }
}

fn ggml_of(d: DType) -> Result<GgmlType> {
    GgmlType::from_dtype(d).ok_or_else(|| {
        Error::new(ErrorKind::UnsupportedDtype(format!(
            "{d} (GGUF holds F32, F16, BF16, F64, I8, I16, I32, I64 and ggml blocks)"
        )))
    })
}
