//! Quantization to IQ4_NL (32-value blocks) and IQ4_XS (256-value super-blocks of eight),
//! bit-identical to ggml's `ggml_quantize_chunk` (llama.cpp as llama-cpp-python 0.3.36 vendors
//! it), which runs `quantize_row_iq4_nl_impl` with `ntry = 7` for both, with or without an
//! importance matrix (its `quantize_row_iq4_nl_ref`, `ntry = -1`, is not what it calls).
//! Written by hand, step for step as the C (float rules and FMA note in `k_search.rs`).

// Indexed loops on purpose: they read as the C they follow, index for index.
#![allow(clippy::needless_range_loop)]

use crate::ggml_quant::iq::KVALUES_IQ4;
use crate::ggml_quant::k_search::{
    abs_max, best_index_int8, fp16, imatrix_weights, nearest_int, sum_sq, GROUP_MAX_EPS,
};

const NTRY: i32 = 7;

/// `quantize_row_iq4_nl_impl` over one super-block `x` of `nb` 32-value blocks: the scale of
/// each block and its codes (`codes`), and the largest scale by magnitude.
fn search(x: &[f32], qw: Option<&[f32]>, scales: &mut [f32], codes: &mut [u8]) -> f32 {
    let values = &KVALUES_IQ4;
    let sigma2 = sum_sq(x) * (2.0f32 / x.len() as f32);
    let (mut max_scale, mut amax_scale) = (0f32, 0f32);
    let mut weight = [0f32; 32];
    for (ib, xb) in x.chunks_exact(32).enumerate() {
        let lb = &mut codes[32 * ib..32 * ib + 32];
        match qw {
            Some(q) => {
                imatrix_weights(&q[32 * ib..], xb, sigma2, &mut weight);
            }
            None => {
                for j in 0..32 {
                    weight[j] = xb[j] * xb[j];
                }
            }
        }
        let (amax, max) = abs_max(xb);
        if amax < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            continue;
        }
        let mut d = -max / values[0] as f32;
        let mut id = 1.0f32 / d;
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for j in 0..32 {
            let l = best_index_int8(values, id * xb[j]);
            lb[j] = l as u8;
            let q = values[l] as f32;
            let w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        let mut best = d * sumqx;
        for itry in -NTRY..=NTRY {
            id = (itry + values[0] as i32) as f32 / max;
            sumqx = 0.0;
            sumq2 = 0.0;
            for j in 0..32 {
                let l = best_index_int8(values, id * xb[j]);
                let q = values[l] as f32;
                let w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        let abs_d = d.abs();
        if abs_d > amax_scale {
            amax_scale = abs_d;
            max_scale = d;
        }
    }
    max_scale
}

/// Low nibbles from values 0..16 of each 32, high nibbles from 16..32.
fn pack(codes: &[u8], q4: &mut [u8]) {
    for i in 0..codes.len() / 32 {
        for j in 0..16 {
            q4[16 * i + j] = codes[32 * i + j] | (codes[32 * i + 16 + j] << 4);
        }
    }
}

/// IQ4_NL block: d, qs[16]. `qw`: the weights of the same positions, or none.
pub(super) fn iq4_nl(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    for (i, (xb, b)) in x.chunks_exact(32).zip(out.chunks_exact_mut(18)).enumerate() {
        let w = qw.map(|q| &q[32 * i..32 * i + 32]);
        let mut scale = [0f32; 1];
        let mut codes = [0u8; 32];
        search(xb, w, &mut scale, &mut codes);
        b[0..2].copy_from_slice(&fp16(scale[0]).to_le_bytes());
        let id = if scale[0] != 0.0 {
            1.0f32 / scale[0]
        } else {
            0.0
        };
        for j in 0..32 {
            codes[j] = best_index_int8(&KVALUES_IQ4, id * xb[j]) as u8;
        }
        pack(&codes, &mut b[2..18]);
    }
}

/// IQ4_XS block: d, scales_h (u16), scales_l[4], qs[128].
pub(super) fn iq4_xs(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    for (i, (xs, b)) in x
        .chunks_exact(256)
        .zip(out.chunks_exact_mut(136))
        .enumerate()
    {
        let w = qw.map(|q| &q[256 * i..256 * i + 256]);
        let mut scales = [0f32; 8];
        let mut codes = [0u8; 256];
        let max_scale = search(xs, w, &mut scales, &mut codes);
        let d = -max_scale / 32.0f32;
        b[0..2].copy_from_slice(&fp16(d).to_le_bytes());
        let id = if d != 0.0 { 1.0f32 / d } else { 0.0 };
        let mut scales_h = 0u16;
        for ib in 0..8 {
            let mut l = nearest_int(id * scales[ib]).clamp(-32, 31);
            let dl = d * l as f32;
            let idl = if dl != 0.0 { 1.0f32 / dl } else { 0.0 };
            for j in 0..32 {
                codes[32 * ib + j] = best_index_int8(&KVALUES_IQ4, idl * xs[32 * ib + j]) as u8;
            }
            l += 32;
            let (l_l, l_h) = ((l & 0xF) as u8, (l >> 4) as u16);
            if ib % 2 == 0 {
                b[4 + ib / 2] = l_l;
            } else {
                b[4 + ib / 2] |= l_l << 4;
            }
            scales_h |= l_h << (2 * (ib % 8));
        }
        b[2..4].copy_from_slice(&scales_h.to_le_bytes());
        pack(&codes, &mut b[8..136]);
    }
}
