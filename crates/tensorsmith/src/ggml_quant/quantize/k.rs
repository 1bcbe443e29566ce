//! Quantization to the K-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K (256-value super-blocks),
//! bit-identical to ggml's `ggml_quantize_chunk` (llama.cpp as llama-cpp-python 0.3.36
//! vendors it): without an importance matrix ggml runs `quantize_row_qX_K_ref`, with one
//! `quantize_row_qX_K_impl`; so do these kernels (`qw` = `None` or the weights of the same
//! positions). Written by hand, step for step as the C (see `k_search.rs` for the float rules
//! and the FMA note); block layouts as `ggml-common.h` declares them. The sub-block searches
//! of Q2_K, Q4_K and Q5_K without weights, and Q6_K's, run a super-block's sub-blocks at once
//! (`k_lanes.rs`: the same steps per sub-block, in SIMD lanes).

// Indexed loops on purpose: they read as the C they follow, index for index.
#![allow(clippy::needless_range_loop)]

use crate::ggml_quant::k_lanes::{qkx_lanes, qx_lanes, transpose};
use crate::ggml_quant::k_search::{
    fp16, fp32, imatrix_weights, make_q3_quants, make_qkx_quants, make_qp_quants, make_qx_quants,
    nearest_int, sum_sq, GROUP_MAX_EPS,
};

const QK: usize = 256;

/// `(values, weights, block)` triples: 256 floats (and their weights, if any) to `B` bytes.
fn blocks<'a, const B: usize>(
    x: &'a [f32],
    qw: Option<&'a [f32]>,
    out: &'a mut [u8],
) -> impl Iterator<Item = (&'a [f32], Option<&'a [f32]>, &'a mut [u8; B])> {
    x.chunks_exact(QK)
        .zip(out.chunks_exact_mut(B))
        .enumerate()
        .map(move |(i, (x, o))| {
            let w = qw.map(|q| &q[i * QK..(i + 1) * QK]);
            (x, w, o.try_into().expect("B bytes"))
        })
}

fn put_f16(b: &mut [u8], at: usize, h: u16) {
    b[at..at + 2].copy_from_slice(&h.to_le_bytes());
}

/// Two-bit codes, four per byte: byte `j/4 + l` of each 128 holds codes `j+l`, `+32`, `+64`,
/// `+96` (Q2_K's and Q3_K's `qs`).
fn pack_2bit(codes: &[u8; QK], qs: &mut [u8]) {
    for j in (0..QK).step_by(128) {
        for l in 0..32 {
            qs[j / 4 + l] = codes[j + l]
                | (codes[j + l + 32] << 2)
                | (codes[j + l + 64] << 4)
                | (codes[j + l + 96] << 6);
        }
    }
}

// ---------------------------------------------------------------- Q2_K

/// Q2_K block: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
pub(super) fn q2_k(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    for (x, w, b) in blocks::<84>(x, qw, out) {
        match w {
            None => q2_k_ref(x, b),
            Some(w) => q2_k_impl(x, w, b),
        }
    }
}

/// `quantize_row_q2_K_ref`.
fn q2_k_ref(x: &[f32], b: &mut [u8; 84]) {
    let mut codes = [0u8; QK];
    let mut mins = [0f32; 16];
    let q4scale = 15.0f32;
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    // The 16 sub-blocks' searches at once (k_lanes.rs), weights `|x|`.
    let xt = transpose::<16, 16>(x);
    let wt = xt.map(|row| row.map(f32::abs));
    let mut ct = [[0u8; 16]; 16];
    let scales = qkx_lanes::<true, 16, 16>(3, &xt, &wt, &mut ct, &mut mins, -0.5, 0.1, 15);
    for j in 0..16 {
        for l in 0..16 {
            codes[16 * j + l] = ct[l][j];
        }
    }
    for j in 0..16 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    if max_scale > 0.0 {
        let iscale = q4scale / max_scale;
        for j in 0..16 {
            b[j] = nearest_int(iscale * scales[j]) as u8;
        }
        put_f16(b, 80, fp16(max_scale / q4scale));
    } else {
        b[..16].fill(0);
        put_f16(b, 80, fp16(0.0));
    }
    if max_min > 0.0 {
        let iscale = q4scale / max_min;
        for j in 0..16 {
            b[j] |= nearest_int(iscale * mins[j]).wrapping_shl(4) as u8;
        }
        put_f16(b, 82, fp16(max_min / q4scale));
    } else {
        put_f16(b, 82, fp16(0.0));
    }
    q2_k_finish(x, &mut codes, b);
}

/// `quantize_row_q2_K_impl` (with weights).
fn q2_k_impl(x: &[f32], qw: &[f32], b: &mut [u8; 84]) {
    let mut codes = [0u8; QK];
    let mut mins = [0f32; 16];
    let mut scales = [0f32; 16];
    let mut sw = [0f32; 16];
    let mut weight = [0f32; 16];
    let (mut ls, mut lm) = ([0u8; 16], [0u8; 16]);
    let sigma2 = sum_sq(x) / QK as f32;
    for j in 0..16 {
        let xs = &x[16 * j..16 * j + 16];
        sw[j] = imatrix_weights(&qw[16 * j..], xs, sigma2, &mut weight);
        scales[j] = make_qkx_quants::<false>(
            3,
            xs,
            &weight,
            &mut codes[16 * j..16 * j + 16],
            &mut mins[j],
            -0.9,
            0.05,
            36,
        );
    }
    let dm = make_qp_quants(15, &scales, &mut ls, &sw);
    let mm = make_qp_quants(15, &mins, &mut lm, &sw);
    put_f16(b, 80, fp16(dm));
    put_f16(b, 82, fp16(mm));
    for j in 0..16 {
        b[j] = ls[j] | (lm[j] << 4);
    }
    q2_k_finish(x, &mut codes, b);
}

/// Both Q2_K paths' end: codes again from the stored scales (sub-blocks whose scale is zero
/// keep the search's codes), then packed.
fn q2_k_finish(x: &[f32], codes: &mut [u8; QK], b: &mut [u8; 84]) {
    let d_all = fp32(u16::from_le_bytes([b[80], b[81]]));
    let m_all = fp32(u16::from_le_bytes([b[82], b[83]]));
    for j in 0..16 {
        let d = d_all * (b[j] & 0xF) as f32;
        if d == 0.0 {
            continue;
        }
        let dm = m_all * (b[j] >> 4) as f32;
        for ii in 0..16 {
            let l = nearest_int((x[16 * j + ii] + dm) / d);
            codes[16 * j + ii] = l.clamp(0, 3) as u8;
        }
    }
    pack_2bit(codes, &mut b[16..80]);
}

// ---------------------------------------------------------------- Q3_K

/// Q3_K block: hmask[32], qs[64], scales[12] (6-bit, packed), d.
pub(super) fn q3_k(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    for (x, w, b) in blocks::<110>(x, qw, out) {
        match w {
            None => q3_k_ref(x, b),
            Some(w) => q3_k_impl(x, w, b),
        }
    }
}

/// Stores the 6-bit scale code `l` (0..64) of sub-block `j` in Q3_K's 12 scale bytes.
fn q3_put_scale(sc: &mut [u8], j: usize, l: i32) {
    if j < 8 {
        sc[j] = (l & 0xF) as u8;
    } else {
        sc[j - 8] |= ((l & 0xF) << 4) as u8;
    }
    let l = l >> 4;
    sc[j % 4 + 8] |= (l << (2 * (j / 4))) as u8;
}

/// `quantize_row_q3_K_ref`.
fn q3_k_ref(x: &[f32], b: &mut [u8; 110]) {
    let mut codes = [0i8; QK];
    let mut scales = [0f32; 16];
    let (mut max_scale, mut amax) = (0f32, 0f32);
    for j in 0..16 {
        scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut codes[16 * j..16 * j + 16]);
        let scale = scales[j].abs();
        if scale > amax {
            amax = scale;
            max_scale = scales[j];
        }
    }
    b[96..108].fill(0);
    if max_scale != 0.0 {
        let iscale = -32.0f32 / max_scale;
        for j in 0..16 {
            // `int8_t l = nearest_int(...)`: truncated to 8 bits first, then clamped.
            let l = nearest_int(iscale * scales[j]) as i8 as i32;
            let l = (l.clamp(-32, 31) + 32) as i8 as i32;
            q3_put_scale(&mut b[96..108], j, l);
        }
        put_f16(b, 108, fp16(1.0f32 / iscale));
    } else {
        put_f16(b, 108, fp16(0.0));
    }
    q3_k_finish(x, &mut codes, b);
}

/// `quantize_row_q3_K_impl` (with weights).
fn q3_k_impl(x: &[f32], qw: &[f32], b: &mut [u8; 110]) {
    let mut codes = [0i8; QK];
    let mut scales = [0f32; 16];
    let mut weight = [0f32; 16];
    let mut sw = [0f32; 16];
    let mut ls = [0i8; 16];
    let sigma2 = 2.0f32 * sum_sq(x) / QK as f32;
    for j in 0..16 {
        let xs = &x[16 * j..16 * j + 16];
        sw[j] = imatrix_weights(&qw[16 * j..], xs, sigma2, &mut weight);
        scales[j] = make_qx_quants(4, xs, &mut codes[16 * j..16 * j + 16], Some(&weight));
    }
    b[96..108].fill(0);
    let d_block = make_qx_quants(32, &scales, &mut ls, Some(&sw));
    for j in 0..16 {
        q3_put_scale(&mut b[96..108], j, ls[j] as i32);
    }
    put_f16(b, 108, fp16(d_block));
    q3_k_finish(x, &mut codes, b);
}

/// Both Q3_K paths' end: codes from the stored scales, high bits to `hmask`, low bits packed.
fn q3_k_finish(x: &[f32], codes: &mut [i8; QK], b: &mut [u8; 110]) {
    let d_all = fp32(u16::from_le_bytes([b[108], b[109]]));
    for j in 0..16 {
        let sc = &b[96..108];
        let lo = (if j < 8 { sc[j] & 0xF } else { sc[j - 8] >> 4 }) as i32;
        let s = (lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) as i32) << 4) - 32;
        let d = d_all * s as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let l = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
            codes[16 * j + ii] = (l + 4) as i8;
        }
    }
    b[..32].fill(0);
    let (mut m, mut hm) = (0usize, 1u8);
    let mut low = [0u8; QK];
    for j in 0..QK {
        if codes[j] > 3 {
            b[m] |= hm;
            codes[j] -= 4;
        }
        low[j] = codes[j] as u8;
        m += 1;
        if m == QK / 8 {
            m = 0;
            hm <<= 1;
        }
    }
    pack_2bit(&low, &mut b[32..96]);
}

// ---------------------------------------------------------------- Q4_K / Q5_K

/// The 6-bit scale and min codes of the eight sub-blocks, packed into 12 bytes
/// (`get_scale_min_k4`'s layout).
fn put_scale_min_k4(sc: &mut [u8], j: usize, ls: u8, lm: u8) {
    if j < 4 {
        sc[j] = ls;
        sc[j + 4] = lm;
    } else {
        sc[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
        sc[j - 4] |= (((ls >> 4) as u32) << 6) as u8;
        sc[j] |= (((lm >> 4) as u32) << 6) as u8;
    }
}

fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The 32-value sub-block searches of Q4_K/Q5_K's ref paths (`nmax` 15 or 31): codes in
/// `codes`, the scales and mins returned for the caller to store.
fn qk_ref_search(
    x: &[f32],
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    codes: &mut [u8; QK],
) -> ([f32; 8], [f32; 8]) {
    let mut mins = [0f32; 8];
    // The 8 sub-blocks' searches at once (k_lanes.rs), weights `av_x + |x|`.
    let av_x: [f32; 8] =
        std::array::from_fn(|j| (sum_sq(&x[32 * j..32 * j + 32]) / 32.0f32).sqrt());
    let xt = transpose::<8, 32>(x);
    let wt = xt.map(|row| std::array::from_fn(|j| av_x[j] + row[j].abs()));
    let mut ct = [[0u8; 8]; 32];
    let scales = qkx_lanes::<false, 8, 32>(nmax, &xt, &wt, &mut ct, &mut mins, rmin, rdelta, nstep);
    for j in 0..8 {
        for l in 0..32 {
            codes[32 * j + l] = ct[l][j];
        }
    }
    (scales, mins)
}

/// The ref paths' scale packing (Q4_K, Q5_K): codes of `63 / max`, clipped to 63 as `uint8_t`.
fn qk_ref_scales(scales: &[f32; 8], mins: &[f32; 8], sc: &mut [u8], dh: &mut [u8]) {
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..8 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0f32 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 {
        63.0f32 / max_min
    } else {
        0.0
    };
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        put_scale_min_k4(sc, j, ls, lm);
    }
    put_f16(dh, 0, fp16(max_scale / 63.0f32));
    put_f16(dh, 2, fp16(max_min / 63.0f32));
}

/// The impl paths' sub-block searches and scale packing (Q4_K, Q5_K, with weights);
/// `clip63` is Q5_K's `MIN(63, ls)` (Q4_K stores the codes unclipped).
fn qk_impl_search(
    x: &[f32],
    qw: &[f32],
    nmax: i32,
    clip63: bool,
    codes: &mut [u8; QK],
    sc: &mut [u8],
    dh: &mut [u8],
) {
    let mut weights = [0f32; 32];
    let mut sw = [0f32; 8];
    let mut mins = [0f32; 8];
    let mut scales = [0f32; 8];
    let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
    let sigma2 = 2.0f32 * sum_sq(x) / QK as f32;
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        sw[j] = imatrix_weights(&qw[32 * j..], xs, sigma2, &mut weights);
        scales[j] = make_qkx_quants::<false>(
            nmax,
            xs,
            &weights,
            &mut codes[32 * j..32 * j + 32],
            &mut mins[j],
            -0.9,
            0.05,
            36,
        );
    }
    let d_block = make_qp_quants(63, &scales, &mut ls, &sw);
    let m_block = make_qp_quants(63, &mins, &mut lm, &sw);
    for j in 0..8 {
        let (s, m) = if clip63 {
            (ls[j].min(63), lm[j].min(63))
        } else {
            (ls[j], lm[j])
        };
        put_scale_min_k4(sc, j, s, m);
    }
    put_f16(dh, 0, fp16(d_block));
    put_f16(dh, 2, fp16(m_block));
}

/// Codes again from the stored scales and mins (Q4_K, Q5_K: `nmax` 15 or 31).
fn qk_requantize(x: &[f32], nmax: i32, b: &[u8], codes: &mut [u8; QK]) {
    let d_all = fp32(u16::from_le_bytes([b[0], b[1]]));
    let m_all = fp32(u16::from_le_bytes([b[2], b[3]]));
    for j in 0..8 {
        let (sc, m) = get_scale_min_k4(j, &b[4..16]);
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = m_all * m as f32;
        for ii in 0..32 {
            let l = nearest_int((x[32 * j + ii] + dm) / d);
            codes[32 * j + ii] = l.clamp(0, nmax) as u8;
        }
    }
}

/// Q4_K block: d, dmin, scales[12], qs[128].
pub(super) fn q4_k(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    for (x, w, b) in blocks::<144>(x, qw, out) {
        let mut codes = [0u8; QK];
        let (dh, rest) = b.split_at_mut(4);
        match w {
            None => {
                let (scales, mins) = qk_ref_search(x, 15, -1.0, 0.1, 20, &mut codes);
                qk_ref_scales(&scales, &mins, &mut rest[..12], dh);
            }
            Some(w) => qk_impl_search(x, w, 15, false, &mut codes, &mut rest[..12], dh),
        }
        qk_requantize(x, 15, b, &mut codes);
        for (k, j) in (0..QK).step_by(64).enumerate() {
            for l in 0..32 {
                b[16 + 32 * k + l] = codes[j + l] | (codes[j + l + 32] << 4);
            }
        }
    }
}

/// Q5_K block: d, dmin, scales[12], qh[32], qs[128].
pub(super) fn q5_k(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    for (x, w, b) in blocks::<176>(x, qw, out) {
        let mut codes = [0u8; QK];
        let (dh, rest) = b.split_at_mut(4);
        match w {
            None => {
                let (scales, mins) = qk_ref_search(x, 31, -0.5, 0.1, 15, &mut codes);
                qk_ref_scales(&scales, &mins, &mut rest[..12], dh);
            }
            Some(w) => qk_impl_search(x, w, 31, true, &mut codes, &mut rest[..12], dh),
        }
        qk_requantize(x, 31, b, &mut codes);
        b[16..48].fill(0);
        let (mut m1, mut m2) = (1u8, 2u8);
        for (k, n) in (0..QK).step_by(64).enumerate() {
            for j in 0..32 {
                let mut l1 = codes[n + j];
                if l1 > 15 {
                    l1 -= 16;
                    b[16 + j] |= m1;
                }
                let mut l2 = codes[n + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    b[16 + j] |= m2;
                }
                b[48 + 32 * k + j] = l1 | (l2 << 4);
            }
            m1 <<= 2;
            m2 <<= 2;
        }
    }
}

// ---------------------------------------------------------------- Q6_K

/// Q6_K block: ql[128], qh[64], scales[16] (int8), d. The ref and impl paths differ only in
/// the weights of the sub-block search (`x²`, or the importance weights themselves).
pub(super) fn q6_k(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    for (x, w, b) in blocks::<210>(x, qw, out) {
        let mut codes = [0i8; QK];
        let (mut max_scale, mut max_abs_scale) = (0f32, 0f32);
        // The 16 sub-blocks' searches at once (k_lanes.rs).
        let xt = transpose::<16, 16>(x);
        let wt = w.map(transpose::<16, 16>);
        let mut ct = [[0i8; 16]; 16];
        let scales = qx_lanes::<16, 16>(32, &xt, wt.as_ref(), &mut ct);
        for ib in 0..16 {
            for l in 0..16 {
                codes[16 * ib + l] = ct[l][ib];
            }
        }
        for ib in 0..16 {
            let scale = scales[ib];
            let abs_scale = scale.abs();
            if abs_scale > max_abs_scale {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            b.fill(0);
            put_f16(b, 208, fp16(0.0));
            continue;
        }
        let iscale = -128.0f32 / max_scale;
        put_f16(b, 208, fp16(1.0f32 / iscale));
        for ib in 0..16 {
            b[192 + ib] = nearest_int(iscale * scales[ib]).min(127) as i8 as u8;
        }
        let d_all = fp32(u16::from_le_bytes([b[208], b[209]]));
        for j in 0..16 {
            let d = d_all * (b[192 + j] as i8) as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
                codes[16 * j + ii] = (l + 32) as i8;
            }
        }
        let c = |i: usize| codes[i] as u8;
        for (k, j) in (0..QK).step_by(128).enumerate() {
            for l in 0..32 {
                let (q1, q2, q3, q4) = (
                    c(j + l) & 0xF,
                    c(j + l + 32) & 0xF,
                    c(j + l + 64) & 0xF,
                    c(j + l + 96) & 0xF,
                );
                b[64 * k + l] = q1 | (q3 << 4);
                b[64 * k + l + 32] = q2 | (q4 << 4);
                b[128 + 32 * k + l] = (c(j + l) >> 4)
                    | ((c(j + l + 32) >> 4) << 2)
                    | ((c(j + l + 64) >> 4) << 4)
                    | ((c(j + l + 96) >> 4) << 6);
            }
        }
    }
}
