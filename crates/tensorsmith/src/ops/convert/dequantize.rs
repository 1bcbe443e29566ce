//! A tensor's values as F32 where the stored bytes are not values: ggml block-quantized
//! tensors (GGUF `Layout::Ggml`) dequantized through [`crate::ggml_quant`], whole or a run of
//! blocks at a time (bounded memory for convert and diff). [`Model::tensor_bytes`] keeps
//! giving the stored blocks.

use crate::cast::{cast, Rounding};
use crate::dtype::DType;
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
    model.for_each_chunk(t, blocks_per_chunk * bb, |bytes| {
        out.resize((bytes.len() as u64 / bb * be) as usize, 0.0);
        ggml_quant::dequantize_into(g, bytes, &mut out).map_err(|e| e.at_tensor(&t.name))?;
        each(&out)
    })
}

/// [`for_each_chunk`] with the values as little-endian bytes of `to` (F32, or a float type
/// cast from it with `rounding`).
pub fn for_each_chunk_as(
    model: &Model,
    t: &TensorInfo,
    to: DType,
    rounding: Rounding,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    for_each_chunk(model, t, |values| {
        let bytes = f32_bytes(values);
        if to == DType::F32 {
            each(&bytes)
        } else {
            each(&cast(&bytes, DType::F32, to, rounding)?)
        }
    })
}

/// F32 values as little-endian bytes.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(values.len() * 4);
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}
