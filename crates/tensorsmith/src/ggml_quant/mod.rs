//! Dequantization of ggml block-quantized tensors to F32, bit-identical to the `gguf` package's
//! `gguf.quants.dequantize` (0.19.0) for any block bytes, NaN and infinities included.
//!
//! The kernels are written by hand: the block layouts *are* the format logic, and each kernel
//! follows the reference's float32 arithmetic operation by operation (same operand order, same
//! widths, no fused multiply-add), so rounding, NaN and infinity come out as NumPy computes
//! them. Files per family: `legacy.rs` (Q4_0 … Q8_0), `k_quants.rs` (Q2_K … Q6_K), `iq.rs`
//! with `iq_grids.rs` (the IQ types), `ternary.rs` (TQ1_0, TQ2_0), `fp4.rs` (MXFP4, NVFP4).
//! Q8_1, Q8_K and Q1_0 are refused by name, as the reference cannot dequantize them either.
//!
//! The other way, [`quantize`] (`quantize.rs`) makes blocks from F32 values bit-identical to
//! `gguf.quants.quantize` for the eight types it supports, over NumPy's steps (`numpy_ops.rs`),
//! and to ggml's `ggml_quantize_chunk` for the K-quants and IQ4_NL/IQ4_XS (`quantize_k.rs`,
//! `quantize_iq4.rs`, over ggml's scale searches in `k_search.rs`), with an importance matrix
//! through [`quantize_rows`].

mod fp4;
pub mod imatrix;
mod iq;
mod iq_grids;
mod iq_search;
mod k_lanes;
mod k_quants;
mod k_search;
mod legacy;
pub mod mix;
mod numpy_ops;
mod quantize;
#[doc(hidden)]
pub mod reference;
mod ternary;

pub use quantize::{
    can_quantize, quantize, quantize_into, quantize_rows, quantize_rows_into, quantizer,
    takes_imatrix, Quantizer, WeightedQuantizer, QUANTIZE_TYPES,
};

use crate::error::{Error, ErrorKind, Result};
use crate::ggml_type::{Block, GgmlType};
use rayon::prelude::*;

/// A kernel: whole blocks in, `block_elements` values per block out (equal block counts).
pub type Kernel = fn(&[u8], &mut [f32]);

/// Blocks per parallel task: large enough to amortise scheduling, small enough to balance.
const TASK_BLOCKS: usize = 2048;

/// The dequantizer of a block type, or why there is none (the error names the type).
pub fn kernel(ty: GgmlType) -> Result<Kernel> {
    let refuse = |reason| {
        Err(Error::new(ErrorKind::CannotDequantize {
            ggml_type: ty.name(),
            reason,
        }))
    };
    let Some(block) = ty.block() else {
        return refuse("it is a plain element type, not a block-quantized one");
    };
    Ok(match block {
        Block::Q4_0 => legacy::q4_0,
        Block::Q4_1 => legacy::q4_1,
        Block::Q5_0 => legacy::q5_0,
        Block::Q5_1 => legacy::q5_1,
        Block::Q8_0 => legacy::q8_0,
        Block::Q2_K => k_quants::q2_k,
        Block::Q3_K => k_quants::q3_k,
        Block::Q4_K => k_quants::q4_k,
        Block::Q5_K => k_quants::q5_k,
        Block::Q6_K => k_quants::q6_k,
        Block::IQ2_XXS => iq::iq2_xxs,
        Block::IQ2_XS => iq::iq2_xs,
        Block::IQ2_S => iq::iq2_s,
        Block::IQ3_XXS => iq::iq3_xxs,
        Block::IQ3_S => iq::iq3_s,
        Block::IQ1_S => iq::iq1_s,
        Block::IQ1_M => iq::iq1_m,
        Block::IQ4_NL => iq::iq4_nl,
        Block::IQ4_XS => iq::iq4_xs,
        Block::TQ1_0 => ternary::tq1_0,
        Block::TQ2_0 => ternary::tq2_0,
        Block::MXFP4 => fp4::mxfp4,
        Block::NVFP4 => fp4::nvfp4,
        Block::Q8_1 | Block::Q8_K => {
            return refuse("it is an intermediate type for dot products (the gguf package cannot dequantize it either)")
        }
        _ => return refuse("no dequantizer for this block type (the gguf package 0.19.0 has none either)"),
    })
}

/// Whether values of `ty` can be dequantized.
pub fn can_dequantize(ty: GgmlType) -> bool {
    kernel(ty).is_ok()
}

/// Dequantizes whole blocks of `ty` into `out`, which must hold exactly their values.
/// Large inputs run in parallel (rayon), a task per `TASK_BLOCKS` (2048) blocks.
pub fn dequantize_into(ty: GgmlType, blocks: &[u8], out: &mut [f32]) -> Result<()> {
    let k = kernel(ty)?;
    let (bb, be) = (ty.block_bytes() as usize, ty.block_elements() as usize);
    let n = blocks.len() / bb;
    if blocks.len() % bb != 0 || out.len() as u64 != n as u64 * be as u64 {
        return Err(Error::new(ErrorKind::BlockBytes {
            ggml_type: ty.name(),
            bytes: blocks.len() as u64,
            block_bytes: ty.block_bytes(),
            elements: out.len() as u64,
        }));
    }
    if n <= TASK_BLOCKS {
        k(blocks, out);
    } else {
        blocks
            .par_chunks(TASK_BLOCKS * bb)
            .zip(out.par_chunks_mut(TASK_BLOCKS * be))
            .for_each(|(b, o)| k(b, o));
    }
    Ok(())
}

/// Dequantizes whole blocks of `ty` into a new vector (its size checked against the bytes:
/// at most `block_elements / block_bytes` values per byte).
pub fn dequantize(ty: GgmlType, blocks: &[u8]) -> Result<Vec<f32>> {
    kernel(ty)?;
    let n = blocks.len() / ty.block_bytes() as usize;
    let mut out = vec![0f32; n * ty.block_elements() as usize];
    dequantize_into(ty, blocks, &mut out)?;
    Ok(out)
}

/// `(block, values)` pairs of fixed sizes: `B` bytes to `E` values.
pub(crate) fn pairs<'a, const B: usize, const E: usize>(
    blocks: &'a [u8],
    out: &'a mut [f32],
) -> impl Iterator<Item = (&'a [u8; B], &'a mut [f32; E])> {
    blocks
        .chunks_exact(B)
        .zip(out.chunks_exact_mut(E))
        .map(|(b, o)| {
            let b: &[u8; B] = b.try_into().expect("chunks_exact yields B bytes");
            let o: &mut [f32; E] = o.try_into().expect("chunks_exact_mut yields E values");
            (b, o)
        })
}

/// The little-endian f16 at byte `i`, widened exactly (as NumPy's `astype(np.float32)`).
#[inline]
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// `a + b`, with the NaN bits NumPy's vector loops give when both are NaN: the first
/// operand's, quieted (x86 `addps` keeps its first source). LLVM treats `+` as commutative
/// and may swap the operands, so the rule is spelled out. (For a single block gguf-py's
/// broadcast loop picks the second NaN instead: with two NaN operands the reference itself
/// depends on the array shape; one NaN operand, or none, is exact either way.)
#[inline]
pub(crate) fn add_nan_first(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        f32::from_bits(a.to_bits() | 0x0040_0000)
    } else {
        a + b
    }
}

/// `a * sign` for `sign` = ±1.0, with NumPy's NaN bits: a NaN `a` comes back as itself,
/// quieted (x86 `mulps`), its sign kept. LLVM may turn a multiplication by ±1 into a sign
/// flip, which would flip a NaN's sign too, so the rule is spelled out.
#[inline]
pub(crate) fn mul_sign(a: f32, sign: f32) -> f32 {
    if a.is_nan() {
        f32::from_bits(a.to_bits() | 0x0040_0000)
    } else {
        a * sign
    }
}

#[inline]
pub(crate) fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

#[inline]
pub(crate) fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

#[cfg(test)]
mod tests;
