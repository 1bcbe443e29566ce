//! Quantization of F32 values to ggml block types: bit-identical to `gguf.quants.quantize`
//! (gguf 0.19.0) for the block types it can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0,
//! TQ2_0, MXFP4), for any values, NaN and infinities included; bit-identical to ggml's
//! `ggml_quantize_chunk` (llama.cpp as llama-cpp-python 0.3.36 vendors it) for the K-quants
//! (Q2_K … Q6_K), IQ4_NL/IQ4_XS, IQ3_XXS/IQ3_S, IQ2_S and IQ1_M, with or without an importance
//! matrix, for IQ2_XXS, IQ2_XS and IQ1_S with one (ggml asserts one), and for Q4_0, Q4_1,
//! Q5_0 and Q5_1 with one (`quantize_legacy_imatrix.rs`; [`quantize_rows`]).
//! Every other type is refused by name. Kernels: `quantize_legacy.rs`, `quantize_ternary.rs`,
//! `quantize_fp4.rs`, `quantize_k.rs`, `quantize_iq4.rs` (over `k_search.rs`).

use super::{fp4, iq1, iq2, iq3, iq4, k, legacy, legacy_imatrix, ternary};
use crate::error::{Error, ErrorKind, Result};
use crate::ggml_type::{Block, GgmlType};
use rayon::prelude::*;

/// A quantizer: whole blocks of values in, their block bytes out (equal block counts).
pub type Quantizer = fn(&[f32], &mut [u8]);

/// A quantizer that takes an importance matrix: whole blocks of values in, and the weights
/// of the same positions (as many as the values) or none, their block bytes out.
pub type WeightedQuantizer = fn(&[f32], Option<&[f32]>, &mut [u8]);

/// Values per parallel task: 64 Ki (2048 blocks of 32, 256 of 256), so that a chunk of a
/// tensor keeps every core busy whatever its block size (the slowest kernels, 256-value
/// K-quant and IQ blocks, take milliseconds per task).
const TASK_VALUES: usize = 1 << 16;

/// The block types [`quantizer`] takes, by name, for messages and help texts.
pub const QUANTIZE_TYPES: &str =
    "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_S, IQ1_M";

/// The types quantized as ggml does, which take an importance matrix.
fn weighted(ty: GgmlType) -> Option<WeightedQuantizer> {
    Some(match ty.block()? {
        Block::Q4_0 => legacy_imatrix::q4_0,
        Block::Q4_1 => legacy_imatrix::q4_1,
        Block::Q5_0 => legacy_imatrix::q5_0,
        Block::Q5_1 => legacy_imatrix::q5_1,
        Block::Q2_K => k::q2_k,
        Block::Q3_K => k::q3_k,
        Block::Q4_K => k::q4_k,
        Block::Q5_K => k::q5_k,
        Block::Q6_K => k::q6_k,
        Block::IQ4_NL => iq4::iq4_nl,
        Block::IQ4_XS => iq4::iq4_xs,
        Block::IQ3_XXS => iq3::iq3_xxs,
        Block::IQ3_S => iq3::iq3_s,
        Block::IQ1_S => iq1::iq1_s,
        Block::IQ1_M => iq1::iq1_m,
        Block::IQ2_XXS => iq2::iq2_xxs,
        Block::IQ2_XS => iq2::iq2_xs,
        Block::IQ2_S => iq2::iq2_s,
        _ => return None,
    })
}

/// Whether `ty` takes an importance matrix ([`quantize_rows`]): Q4_0, Q4_1, Q5_0, Q5_1, the
/// K-quants and the IQ4 types (as ggml's quantizers use one).
pub fn takes_imatrix(ty: GgmlType) -> bool {
    weighted(ty).is_some()
}

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
        Block::Q4_0 => legacy::q4_0,
        Block::Q4_1 => legacy::q4_1,
        Block::Q5_0 => legacy::q5_0,
        Block::Q5_1 => legacy::q5_1,
        Block::Q8_0 => legacy::q8_0,
        Block::TQ1_0 => ternary::tq1_0,
        Block::TQ2_0 => ternary::tq2_0,
        Block::MXFP4 => fp4::mxfp4,
        Block::Q2_K => |x, o| k::q2_k(x, None, o),
        Block::Q3_K => |x, o| k::q3_k(x, None, o),
        Block::Q4_K => |x, o| k::q4_k(x, None, o),
        Block::Q5_K => |x, o| k::q5_k(x, None, o),
        Block::Q6_K => |x, o| k::q6_k(x, None, o),
        Block::IQ4_NL => |x, o| iq4::iq4_nl(x, None, o),
        Block::IQ4_XS => |x, o| iq4::iq4_xs(x, None, o),
        Block::IQ3_XXS => |x, o| iq3::iq3_xxs(x, None, o),
        Block::IQ3_S => |x, o| iq3::iq3_s(x, None, o),
        Block::IQ2_S => |x, o| iq2::iq2_s(x, None, o),
        Block::IQ1_M => |x, o| iq1::iq1_m(x, None, o),
        Block::IQ1_S | Block::IQ2_XXS | Block::IQ2_XS => {
            return refuse("ggml makes it with an importance matrix only (give one)")
        }
        _ => return refuse("no quantizer for this block type"),
    })
}

/// Whether values can be quantized to `ty`.
pub fn can_quantize(ty: GgmlType) -> bool {
    quantizer(ty).is_ok()
}

/// Quantizes `values` (whole blocks) into `out`, which must hold exactly their blocks. Large
/// inputs run in parallel (rayon), a task per `TASK_VALUES` (65,536) values.
pub fn quantize_into(ty: GgmlType, values: &[f32], out: &mut [u8]) -> Result<()> {
    let q = quantizer(ty)?;
    let (bb, be) = (ty.block_bytes() as usize, ty.block_elements() as usize);
    let task_blocks = (TASK_VALUES / be).max(1);
    let n = values.len() / be;
    if values.len() % be != 0 || out.len() as u64 != n as u64 * bb as u64 {
        return Err(Error::new(ErrorKind::BlockBytes {
            ggml_type: ty.name(),
            bytes: out.len() as u64,
            block_bytes: ty.block_bytes(),
            elements: values.len() as u64,
        }));
    }
    if n <= task_blocks {
        q(values, out);
    } else {
        values
            .par_chunks(task_blocks * be)
            .zip(out.par_chunks_mut(task_blocks * bb))
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

/// Quantizes rows of `n_per_row` values (`values` holds whole rows; a row must be whole blocks)
/// into `out`, which must hold exactly their blocks, as `ggml_quantize_chunk` does: with
/// `imatrix` (one weight per position of a row, the same for every row; K-quants and IQ4 only)
/// the importance-weighted searches, without it the plain ones. Rows run in parallel (rayon).
pub fn quantize_rows_into(
    ty: GgmlType,
    values: &[f32],
    n_per_row: usize,
    imatrix: Option<&[f32]>,
    out: &mut [u8],
) -> Result<()> {
    if weighted(ty).is_none() {
        quantizer(ty)?;
    }
    let refuse = |detail: String| {
        Err(Error::new(ErrorKind::QuantizeRows {
            ggml_type: ty.name(),
            detail,
        }))
    };
    let be = ty.block_elements() as usize;
    if n_per_row % be != 0 {
        return refuse(format!(
            "a row of {n_per_row} values is not a whole number of {be}-value blocks"
        ));
    }
    if values.is_empty() {
        // No rows (of any length): no blocks.
        return quantize_into(ty, values, out);
    }
    if n_per_row == 0 || values.len() % n_per_row != 0 {
        return refuse(format!(
            "{} values are not whole rows of {n_per_row}",
            values.len()
        ));
    }
    let Some(imatrix) = imatrix else {
        return quantize_into(ty, values, out);
    };
    let Some(q) = weighted(ty) else {
        return refuse(
            "an importance matrix applies to Q4_0, Q4_1, Q5_0, Q5_1, the K-quants and the IQ4 \
             types only (ggml quantizes this type without one, as gguf-py does)"
                .into(),
        );
    };
    if imatrix.len() != n_per_row {
        return refuse(format!(
            "the importance matrix has {} values for rows of {n_per_row}",
            imatrix.len()
        ));
    }
    let bb = ty.block_bytes() as usize;
    let row_bytes = n_per_row / be * bb;
    let rows = values.len() / n_per_row;
    if out.len() as u64 != rows as u64 * row_bytes as u64 {
        return Err(Error::new(ErrorKind::BlockBytes {
            ggml_type: ty.name(),
            bytes: out.len() as u64,
            block_bytes: ty.block_bytes(),
            elements: values.len() as u64,
        }));
    }
    let rows_per_task = TASK_VALUES.div_ceil(n_per_row).max(1);
    values
        .par_chunks(rows_per_task * n_per_row)
        .zip(out.par_chunks_mut(rows_per_task * row_bytes))
        .for_each(|(v, o)| {
            for (v, o) in v.chunks_exact(n_per_row).zip(o.chunks_exact_mut(row_bytes)) {
                q(v, Some(imatrix), o);
            }
        });
    Ok(())
}

/// Quantizes rows of `n_per_row` values into a new vector ([`quantize_rows_into`]).
pub fn quantize_rows(
    ty: GgmlType,
    values: &[f32],
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> Result<Vec<u8>> {
    if imatrix.is_none() || weighted(ty).is_none() {
        quantizer(ty)?;
    }
    let n = values.len() / ty.block_elements() as usize;
    let mut out = vec![0u8; n * ty.block_bytes() as usize];
    quantize_rows_into(ty, values, n_per_row, imatrix, &mut out)?;
    Ok(out)
}
