//! A tensor's values as F32 where the stored bytes are not values: ggml block-quantized
//! tensors (GGUF `Layout::Ggml`) dequantized through [`crate::ggml_quant`], whole or a run of
//! blocks at a time (bounded memory for convert and diff). [`Model::tensor_bytes`] keeps
//! giving the stored blocks.

use crate::error::{Error, ErrorKind, Result};
use crate::ggml_quant;
use crate::ggml_type::GgmlType;
use crate::index::{Layout, TensorInfo};
use crate::model::Model;
use std::path::Path;

/// Values per chunk when a tensor is dequantized piece by piece: 4 Mi values (16 MiB of F32).
pub const CHUNK_VALUES: u64 = 1 << 22;

/// The ggml block type of `t`, if it is block-quantized.
pub fn block_type(t: &TensorInfo) -> Option<GgmlType> {
    match t.layout {
        Layout::Ggml(g) if g.is_quantized() => Some(g),
        _ => None,
    }
}

/// Whether [`values_f32`] can decode `t`, with the error naming the file, tensor and rule.
pub fn check(model: &Model, t: &TensorInfo) -> Result<GgmlType> {
    let place = |e: Error| e.at_tensor(&t.name).in_file(Path::new(&model.location));
    let Some(g) = block_type(t) else {
        return Err(place(Error::new(ErrorKind::Unsupported(format!(
            "{} is not a ggml block-quantized tensor (its bytes are its values)",
            t.type_name()
        )))));
    };
    ggml_quant::kernel(g).map_err(place)?;
    Ok(g)
}

/// The values of a block-quantized tensor as F32, bit-identical to gguf-py's `dequantize`.
pub fn values_f32(model: &Model, t: &TensorInfo) -> Result<Vec<f32>> {
    let g = check(model, t)?;
    let bytes = model.tensor_bytes(t)?;
    ggml_quant::dequantize(g, &bytes).map_err(|e| e.at_tensor(&t.name))
}

/// The values of a block-quantized tensor written into `out` (exactly its element count).
pub fn values_into(model: &Model, t: &TensorInfo, out: &mut [f32]) -> Result<()> {
    let g = check(model, t)?;
    let bytes = model.tensor_bytes(t)?;
    ggml_quant::dequantize_into(g, &bytes, out).map_err(|e| e.at_tensor(&t.name))
}

/// Calls `each` with the tensor's values in order, [`CHUNK_VALUES`] (whole blocks) at a time;
/// only one chunk's stored bytes and values are in memory.
pub fn for_each_chunk(
    model: &Model,
    t: &TensorInfo,
    mut each: impl FnMut(&[f32]) -> Result<()>,
) -> Result<()> {
    let g = check(model, t)?;
    let (bb, be) = (g.block_bytes() as u64, g.block_elements() as u64);
    let blocks_per_chunk = (CHUNK_VALUES / be).max(1);
    let mut out = Vec::new();
    if !model.is_plain(t) {
        let bytes = model.tensor_bytes(t)?;
        for piece in bytes.chunks((blocks_per_chunk * bb) as usize) {
            out.resize((piece.len() as u64 / bb * be) as usize, 0.0);
            ggml_quant::dequantize_into(g, piece, &mut out).map_err(|e| e.at_tensor(&t.name))?;
            each(&out)?;
        }
        return Ok(());
    }
    let r = t.data_range();
    let mut off = r.start;
    while off < r.end {
        let end = (off + blocks_per_chunk * bb).min(r.end);
        let bytes = model.read(t, off..end)?;
        out.resize(((end - off) / bb * be) as usize, 0.0);
        ggml_quant::dequantize_into(g, &bytes, &mut out).map_err(|e| e.at_tensor(&t.name))?;
        each(&out)?;
        off = end;
    }
    Ok(())
}

/// F32 values as little-endian bytes.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(values.len() * 4);
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}
