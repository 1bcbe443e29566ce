//! Quantization of F32 values to ggml block types, bit-identical to `gguf.quants.quantize`
//! (gguf 0.19.0) for any values, NaN and infinities included: exactly the block types it can
//! quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXFP4); every other is refused by
//! name. Kernels: `quantize_legacy.rs`, `quantize_ternary.rs`, `quantize_fp4.rs`.

use super::{quantize_fp4, quantize_legacy, quantize_ternary};
use crate::error::{Error, ErrorKind, Result};
use crate::ggml_type::{Block, GgmlType};
use rayon::prelude::*;

/// A quantizer: whole blocks of values in, their block bytes out (equal block counts).
pub type Quantizer = fn(&[f32], &mut [u8]);

/// Blocks per parallel task.
const TASK_BLOCKS: usize = 2048;

/// The quantizer of a block type, or why there is none (the error names the type).
pub fn quantizer(ty: GgmlType) -> Result<Quantizer> {
    let refuse = |reason| {
        Err(Error::new(ErrorKind::CannotQuantize {
            ggml_type: ty.name(),
            reason,
        }))
    };
    let Some(block) = ty.block() else {
        return refuse("it is a plain element type, not a block-quantized one");
    };
    Ok(match block {
        Block::Q4_0 => quantize_legacy::q4_0,
        Block::Q4_1 => quantize_legacy::q4_1,
        Block::Q5_0 => quantize_legacy::q5_0,
        Block::Q5_1 => quantize_legacy::q5_1,
        Block::Q8_0 => quantize_legacy::q8_0,
        Block::TQ1_0 => quantize_ternary::tq1_0,
        Block::TQ2_0 => quantize_ternary::tq2_0,
        Block::MXFP4 => quantize_fp4::mxfp4,
        _ => {
            return refuse(
                "no quantizer for this block type (the gguf package 0.19.0 has none either)",
            )
        }
    })
}

/// Whether values can be quantized to `ty`.
pub fn can_quantize(ty: GgmlType) -> bool {
    quantizer(ty).is_ok()
}

/// Quantizes `values` (whole blocks) into `out`, which must hold exactly their blocks. Large
/// inputs run in parallel (rayon), a task per [`TASK_BLOCKS`] blocks.
pub fn quantize_into(ty: GgmlType, values: &[f32], out: &mut [u8]) -> Result<()> {
    let q = quantizer(ty)?;
    let (bb, be) = (ty.block_bytes() as usize, ty.block_elements() as usize);
    let n = values.len() / be;
    if values.len() % be != 0 || out.len() as u64 != n as u64 * bb as u64 {
        return Err(Error::new(ErrorKind::BlockBytes {
            ggml_type: ty.name(),
            bytes: out.len() as u64,
            block_bytes: ty.block_bytes(),
            elements: values.len() as u64,
        }));
    }
    if n <= TASK_BLOCKS {
        q(values, out);
    } else {
        values
            .par_chunks(TASK_BLOCKS * be)
            .zip(out.par_chunks_mut(TASK_BLOCKS * bb))
            .for_each(|(v, o)| q(v, o));
    }
    Ok(())
}

/// Quantizes whole blocks of values into a new vector.
pub fn quantize(ty: GgmlType, values: &[f32]) -> Result<Vec<u8>> {
    quantizer(ty)?;
    let n = values.len() / ty.block_elements() as usize;
    let mut out = vec![0u8; n * ty.block_bytes() as usize];
    quantize_into(ty, values, &mut out)?;
    Ok(out)
}
