//! The legacy 32-value blocks Q4_0, Q4_1, Q5_0 and Q5_1 with an importance matrix, bit-identical
//! to ggml's `quantize_row_q4_0_impl` … `quantize_row_q5_1_impl` (llama.cpp as
//! llama-cpp-python 0.3.36 vendors it): each block's weights `qw · sqrt(σ² + x²)` (σ² the row's
//! mean square), then ggml's search of the K-quants (`make_qx_quants` for the symmetric types,
//! `make_qkx3_quants` with rmin -0.9, rdelta 0.05, 36 steps for the ones with a minimum).
//! Without weights ggml quantizes them by its reference rows, which gguf-py's (and so
//! `quantize_legacy.rs`) equal bit for bit; these kernels hand those over. Block layouts as
//! `ggml-common.h` declares them.

use crate::ggml_quant::k_search::{fp16, imatrix_weights, make_qkx_quants, make_qx_quants, sum_sq};
use crate::ggml_quant::quantize::legacy;

const QK: usize = 32;

/// Each block of the row `x` with its weights: `f(values, weights, block bytes)`.
fn blocks<const B: usize>(
    x: &[f32],
    qw: &[f32],
    out: &mut [u8],
    f: impl Fn(&[f32], &[f32], &mut [u8; B]),
) {
    let sigma2 = sum_sq(x) / x.len() as f32;
    let mut weight = [0f32; QK];
    for ((xb, qb), o) in x
        .chunks_exact(QK)
        .zip(qw.chunks_exact(QK))
        .zip(out.chunks_exact_mut(B))
    {
        imatrix_weights(qb, xb, sigma2, &mut weight);
        f(xb, &weight, o.try_into().expect("B bytes"));
    }
}

/// Low nibbles from the first 16 codes, high nibbles from the last 16; the codes' fifth bits
/// as the little-endian `qh` word (Q5 types).
fn pack(l: &[u8; QK], qs: &mut [u8], qh: Option<&mut [u8]>) {
    let mut h = 0u32;
    for j in 0..16 {
        qs[j] = (l[j] & 0x0F) | ((l[j + 16] & 0x0F) << 4);
        h |= u32::from((l[j] & 0x10) >> 4) << j;
        h |= u32::from((l[j + 16] & 0x10) >> 4) << (j + 16);
    }
    if let Some(qh) = qh {
        qh.copy_from_slice(&h.to_le_bytes());
    }
}

/// Q4_0 (nmax 8) or Q5_0 (nmax 16): `d` and signed codes `L + nmax`.
fn symmetric(xb: &[f32], w: &[f32], nmax: i32) -> (u16, [u8; QK]) {
    let mut codes = [0i8; QK];
    let d = make_qx_quants(nmax, xb, &mut codes, Some(w));
    (fp16(d), codes.map(|c| c as u8))
}

/// Q4_1 (nmax 15) or Q5_1 (nmax 31): `d`, `m` (the minimum) and codes `0..=nmax`.
fn with_min(xb: &[f32], w: &[f32], nmax: i32) -> (u16, u16, [u8; QK]) {
    let mut codes = [0u8; QK];
    let mut the_min = 0f32;
    let d = make_qkx_quants::<false>(nmax, xb, w, &mut codes, &mut the_min, -0.9, 0.05, 36);
    (fp16(d), fp16(-the_min), codes)
}

pub(super) fn q4_0(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let Some(qw) = qw else {
        return legacy::q4_0(x, out);
    };
    blocks::<18>(x, qw, out, |xb, w, o| {
        let (d, l) = symmetric(xb, w, 8);
        o[..2].copy_from_slice(&d.to_le_bytes());
        pack(&l, &mut o[2..], None);
    });
}

pub(super) fn q4_1(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let Some(qw) = qw else {
        return legacy::q4_1(x, out);
    };
    blocks::<20>(x, qw, out, |xb, w, o| {
        let (d, m, l) = with_min(xb, w, 15);
        o[..2].copy_from_slice(&d.to_le_bytes());
        o[2..4].copy_from_slice(&m.to_le_bytes());
        pack(&l, &mut o[4..], None);
    });
}

pub(super) fn q5_0(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let Some(qw) = qw else {
        return legacy::q5_0(x, out);
    };
    blocks::<22>(x, qw, out, |xb, w, o| {
        let (d, l) = symmetric(xb, w, 16);
        o[..2].copy_from_slice(&d.to_le_bytes());
        let (qh, qs) = o[2..].split_at_mut(4);
        pack(&l, qs, Some(qh));
    });
}

pub(super) fn q5_1(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let Some(qw) = qw else {
        return legacy::q5_1(x, out);
    };
    blocks::<24>(x, qw, out, |xb, w, o| {
        let (d, m, l) = with_min(xb, w, 31);
        o[..2].copy_from_slice(&d.to_le_bytes());
        o[2..4].copy_from_slice(&m.to_le_bytes());
        let (qh, qs) = o[4..].split_at_mut(4);
        pack(&l, qs, Some(qh));
    });
}
