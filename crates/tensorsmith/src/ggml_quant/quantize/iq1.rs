//! Quantization to IQ1_S and IQ1_M, bit-identical to ggml's `quantize_row_iq1_s_impl` and
//! `quantize_row_iq1_m_impl` (llama.cpp as llama-cpp-python 0.3.36 vendors it). Each group of
//! 8 values takes a point of ggml's 2048-point grid of the values −1, 0, 1 (the dequantization
//! grid of `iq_grids.rs`, its bytes read as the codes 2l+1 the search uses), shifted by
//! ±`IQ1S_DELTA`; a point off the grid takes the best of its nearest grid points, as
//! `iq2xs_init_impl` lists them (every grid point at the three smallest distances, ordered by
//! distance, then index). The split of a block into the three values is searched exhaustively
//! over its values sorted as glibc's `qsort` sorts them ([`msort`]). IQ1_S is made with an
//! importance matrix only, as ggml makes it; IQ1_M with or without. Written by hand, step for
//! step as the C: a crate cannot give ggml's exact search, and the bytes are the format.
//!
//! Where ggml aborts (no nearest grid point: every weighted distance overflowing), the first
//! neighbour is taken.

// Indexed loops on purpose: they read as the C they follow, index for index.
#![allow(clippy::needless_range_loop)]

use crate::ggml_quant::iq_grids::IQ1S_GRID;
use crate::ggml_quant::iq_search::Tables;
use crate::ggml_quant::k_search::{c_max, fp16, imatrix_weights, nearest_int, sum_sq};
use std::sync::LazyLock;

const QK: usize = 256;
/// `IQ1S_DELTA` (ggml-common.h; IQ1_M uses the same value).
const DELTA: f32 = 0.125;
const GROUP_MAX_EPS_IQ1_S: f32 = 1e-12;
const GROUP_MAX_EPS_IQ1_M: f32 = 1e-7;
/// ggml's map covers the indices of 8 codes in `0..=2` (the largest is 0xAAAA).
const KMAP_SIZE: usize = 43692;
/// The values of the codes 0, 1, 2 with a positive and a negative shift.
const X_P: [f32; 3] = [-1.0 + DELTA, DELTA, 1.0 + DELTA];
const X_M: [f32; 3] = [-1.0 - DELTA, -DELTA, 1.0 - DELTA];

/// Groups of 8 codes of 2 bits.
type Grid = Tables<8, 2>;

static IQ1S: LazyLock<Grid> = LazyLock::new(|| {
    let rows: Vec<[u8; 8]> = IQ1S_GRID.iter().map(|g| g.to_le_bytes()).collect();
    // The grid's bytes are −1, 0, 1 as i8: the codes 0, 1, 2.
    Tables::new(&rows, &[0xFF, 0, 1], KMAP_SIZE, 3)
});

/// glibc's `qsort` of ggml's `(value, index)` pairs by value (`iq1_sort_helper`): glibc 2.36's
/// `msort_with_tmp`, a top-down merge sort that takes the left element unless it compares
/// greater, so that ties keep their order (a NaN compares equal to everything, as in the C).
/// Written out because the order of equal values decides the split, and Rust's sorts, though
/// stable, may reject (or reorder) a comparison that is not a total order.
fn msort(v: &mut [(f32, usize)], tmp: &mut Vec<(f32, usize)>) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    msort(&mut v[..n1], tmp);
    msort(&mut v[n1..], tmp);
    tmp.clear();
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if v[i].0 > v[j].0 {
            tmp.push(v[j]);
            j += 1;
        } else {
            tmp.push(v[i]);
            i += 1;
        }
    }
    tmp.extend_from_slice(&v[i..n1]);
    let k = tmp.len();
    v[..k].copy_from_slice(tmp);
}

/// `x`'s values sorted with their positions ([`msort`]).
fn sorted(x: &[f32], tmp: &mut Vec<(f32, usize)>) -> Vec<(f32, usize)> {
    let mut pairs: Vec<(f32, usize)> = x.iter().copied().zip(0..).collect();
    msort(&mut pairs, tmp);
    pairs
}

/// `iq1_find_best_neighbour2` (its neighbour list; where ggml would scan the whole grid and
/// then abort, the first neighbour), the codes of the point taken into `l`.
fn neighbour(u: usize, xval: &[f32], w: &[f32], scale: f32, xx: &[f32; 3], l: &mut [i8]) -> u16 {
    IQ1S.nearest_by(u, xval, w, scale, |c| xx[((c - 1) / 2) as usize], l) as u16
}

/// The codes of a block from its sorted order split at `i1` and `i2`.
fn split_codes(pairs: &[(f32, usize)], i1: usize, i2: usize, l: &mut [i8]) {
    for (j, &(_, i)) in pairs.iter().enumerate() {
        l[i] = if j < i1 {
            0
        } else if j < i2 {
            1
        } else {
            2
        };
    }
}

/// The grid entries of a block's groups of 8 (off-grid points by the neighbour step, whose
/// values are `xx(k)` for group `k`), and whether every group was on the grid.
fn grid_points(
    xb: &[f32],
    weight: &[f32],
    scale: f32,
    l: &mut [i8],
    xx: impl Fn(usize) -> &'static [f32; 3],
    index: &mut [u16],
) -> bool {
    let mut all_on_grid = true;
    for k in 0..index.len() {
        let g = 8 * k..8 * k + 8;
        let u = Grid::index_of(&l[g.clone()]);
        index[k] = match IQ1S.entry(&l[g.clone()]) {
            Some(i) => i as u16,
            None => {
                all_on_grid = false;
                neighbour(
                    u,
                    &xb[g.clone()],
                    &weight[g.clone()],
                    scale,
                    xx(k),
                    &mut l[g],
                )
            }
        };
    }
    all_on_grid
}

/// The scale refitted to the grid points taken (`sumqx / sumq2` when both are positive).
fn refit(
    xb: &[f32],
    weight: &[f32],
    index: &[u16],
    xx: impl Fn(usize) -> &'static [f32; 3],
    scale: f32,
) -> f32 {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for (k, &ix) in index.iter().enumerate() {
        let pg = &IQ1S.grid[ix as usize];
        for j in 0..8 {
            let w = weight[8 * k + j];
            let q = xx(k)[((pg[j] - 1) / 2) as usize];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    if sumqx > 0.0 && sumq2 > 0.0 {
        sumqx / sumq2
    } else {
        scale
    }
}

/// IQ1_S: super-blocks of 256 values to 50 bytes (`d`; 32 low bytes of grid indices; per 32
/// values a word of the indices' high 3 bits, a 3-bit scale and the shift's sign). `qw` is
/// required (ggml asserts it).
pub(super) fn iq1_s(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    const BS: usize = 32;
    let qw = qw.expect("IQ1_S is made with an importance matrix only");
    let mut tmp = Vec::with_capacity(BS);
    for (ibl, (xbl, y)) in x.chunks_exact(QK).zip(out.chunks_exact_mut(50)).enumerate() {
        y.fill(0);
        let mut scales = [0f32; QK / BS];
        let mut shifts = [0i8; QK / BS];
        let mut qh = [0u16; QK / BS];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_sq(xbl) / QK as f32;
        for ib in 0..QK / BS {
            let xb = &xbl[BS * ib..BS * ib + BS];
            let mut weight = [0f32; BS];
            imatrix_weights(&qw[QK * ibl + BS * ib..][..BS], xb, sigma2, &mut weight);
            let max = xb[1..].iter().fold(xb[0].abs(), |m, v| c_max(m, v.abs()));
            if max < GROUP_MAX_EPS_IQ1_S {
                scales[ib] = 0.0;
                shifts[ib] = 1;
                continue;
            }
            let pairs = sorted(xb, &mut tmp);
            let (mut sumx, mut sumw) = ([0f32; BS + 1], [0f32; BS + 1]);
            for (j, &(_, i)) in pairs.iter().enumerate() {
                sumx[j + 1] = sumx[j] + weight[i] * xb[i];
                sumw[j + 1] = sumw[j] + weight[i];
            }
            let (mut best_score, mut scale) = (-f32::MAX, max);
            let (mut besti1, mut besti2, mut best_shift) = (usize::MAX, usize::MAX, 0i8);
            for i1 in 0..=BS {
                for i2 in i1..=BS {
                    for (xs, shift) in [(&X_P, 1i8), (&X_M, -1)] {
                        let sumqx = (sumx[i1] - sumx[0]) * xs[0]
                            + (sumx[i2] - sumx[i1]) * xs[1]
                            + (sumx[BS] - sumx[i2]) * xs[2];
                        let sumq2 = (sumw[i1] - sumw[0]) * xs[0] * xs[0]
                            + (sumw[i2] - sumw[i1]) * xs[1] * xs[1]
                            + (sumw[BS] - sumw[i2]) * xs[2] * xs[2];
                        if sumq2 > 0.0 && sumqx * sumqx > best_score * sumq2 {
                            scale = sumqx / sumq2;
                            best_score = scale * sumqx;
                            (besti1, besti2, best_shift) = (i1, i2, shift);
                        }
                    }
                }
            }
            if besti1 == usize::MAX || best_shift == 0 {
                scales[ib] = 0.0;
                shifts[ib] = 1;
                continue;
            }
            let mut l = [0i8; BS];
            split_codes(&pairs, besti1, besti2, &mut l);
            if scale < 0.0 {
                for c in l.iter_mut() {
                    *c = 2 - *c;
                }
                scale = -scale;
                best_shift = -best_shift;
            }
            let xx: &'static [f32; 3] = if best_shift == 1 { &X_P } else { &X_M };
            let mut index = [0u16; BS / 8];
            if !grid_points(xb, &weight, scale, &mut l, |_| xx, &mut index) {
                scale = refit(xb, &weight, &index, |_| xx, scale);
            }
            let mut h = 0u16;
            for k in 0..BS / 8 {
                y[2 + (BS / 8) * ib + k] = (index[k] & 255) as u8;
                h |= (index[k] >> 8) << (3 * k);
            }
            qh[ib] = h;
            scales[ib] = scale;
            shifts[ib] = best_shift;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale != 0.0 {
            let d = max_scale / 15.0;
            // ggml's fudge factor.
            y[..2].copy_from_slice(&fp16(d * 1.125f32).to_le_bytes());
            let id = 1.0 / d;
            for ib in 0..QK / BS {
                let mut l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7) as u16;
                if shifts[ib] == -1 {
                    l |= 8;
                }
                qh[ib] |= l << 12;
            }
        }
        for (ib, h) in qh.iter().enumerate() {
            y[34 + 2 * ib..36 + 2 * ib].copy_from_slice(&h.to_le_bytes());
        }
    }
}

/// IQ1_M: super-blocks of 256 values to 56 bytes (32 low bytes of grid indices; per 16 values
/// a byte of the two groups' high 3 bits and shift signs; 3-bit scales per 16 values in 4
/// words whose top nibbles hold the f16 super-block scale), with the weights `qw` or none.
pub(super) fn iq1_m(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    const BS: usize = 16;
    /// A block's shift kind: `k` < 2 takes `X_P` for its first group, `k % 2 == 0` for its
    /// second.
    fn xx_of(kind: i8, k: usize) -> &'static [f32; 3] {
        let plus = if k == 0 { kind < 2 } else { kind % 2 == 0 };
        if plus {
            &X_P
        } else {
            &X_M
        }
    }
    const MASKS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];
    let weights_of =
        |ibl: usize, ib: usize, xb: &[f32], sigma2: f32, weight: &mut [f32; BS]| match qw {
            Some(qw) => {
                imatrix_weights(&qw[QK * ibl + BS * ib..][..BS], xb, sigma2, weight);
            }
            None => {
                for i in 0..BS {
                    weight[i] = xb[i] * xb[i];
                }
            }
        };
    let mut tmp = Vec::with_capacity(BS);
    for (ibl, (xbl, y)) in x.chunks_exact(QK).zip(out.chunks_exact_mut(56)).enumerate() {
        y.fill(0);
        let (qs_at, qh_at, sc_at) = (0usize, QK / 8, QK / 8 + QK / 16);
        let mut scales = [0f32; QK / BS];
        let mut shifts = [0i8; QK / BS];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_sq(xbl) / QK as f32;
        for ib in 0..QK / BS {
            let xb = &xbl[BS * ib..BS * ib + BS];
            let mut weight = [0f32; BS];
            weights_of(ibl, ib, xb, sigma2, &mut weight);
            let max = xb[1..].iter().fold(xb[0].abs(), |m, v| c_max(m, v.abs()));
            if max < GROUP_MAX_EPS_IQ1_M {
                scales[ib] = 0.0;
                shifts[ib] = 0;
                continue;
            }
            let pairs = sorted(xb, &mut tmp);
            // Prefix sums per half of the block (each half may take its own shift).
            let (mut px, mut pw) = ([[0f32; BS + 1]; 2], [[0f32; BS + 1]; 2]);
            for (j, &(_, i)) in pairs.iter().enumerate() {
                let h = usize::from(i >= BS / 2);
                px[h][j + 1] = px[h][j] + weight[i] * xb[i];
                px[1 - h][j + 1] = px[1 - h][j];
                pw[h][j + 1] = pw[h][j] + weight[i];
                pw[1 - h][j + 1] = pw[1 - h][j];
            }
            let txs = [px[0][BS], px[1][BS]];
            let tws = [pw[0][BS], pw[1][BS]];
            let (p2, m2) = (X_P[2], X_M[2]);
            let cp1 = X_P[0] * X_P[0] - X_P[1] * X_P[1];
            let cp2 = X_P[1] * X_P[1] - X_P[2] * X_P[2];
            let cm1 = X_M[0] * X_M[0] - X_M[1] * X_M[1];
            let cm2 = X_M[1] * X_M[1] - X_M[2] * X_M[2];
            let (mut best_score, mut scale) = (-f32::MAX, max);
            let (mut besti1, mut besti2, mut best_k) = (usize::MAX, usize::MAX, -1i8);
            for i1 in 0..=BS {
                for i2 in i1..=BS {
                    let (mut qx_p, mut qx_m, mut q2_p, mut q2_m) =
                        ([0f32; 2], [0f32; 2], [0f32; 2], [0f32; 2]);
                    for h in 0..2 {
                        let sx = px[h][i1] + px[h][i2];
                        qx_p[h] = txs[h] * p2 - sx;
                        qx_m[h] = txs[h] * m2 - sx;
                        q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                        q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
                    }
                    let sumqx = [
                        qx_p[0] + qx_p[1],
                        qx_p[0] + qx_m[1],
                        qx_m[0] + qx_p[1],
                        qx_m[0] + qx_m[1],
                    ];
                    let sumq2 = [
                        q2_p[0] + q2_p[1],
                        q2_p[0] + q2_m[1],
                        q2_m[0] + q2_p[1],
                        q2_m[0] + q2_m[1],
                    ];
                    for k in 0..4 {
                        if sumq2[k] > 0.0 && sumqx[k] * sumqx[k] > best_score * sumq2[k] {
                            scale = sumqx[k] / sumq2[k];
                            best_score = scale * sumqx[k];
                            (besti1, besti2, best_k) = (i1, i2, k as i8);
                        }
                    }
                }
            }
            if besti1 == usize::MAX || best_k < 0 {
                scales[ib] = 0.0;
                shifts[ib] = 0;
                continue;
            }
            let mut l = [0i8; BS];
            split_codes(&pairs, besti1, besti2, &mut l);
            if scale < 0.0 {
                for c in l.iter_mut() {
                    *c = 2 - *c;
                }
                scale = -scale;
                best_k = 3 - best_k;
            }
            let mut index = [0u16; BS / 8];
            let kind = best_k;
            if !grid_points(xb, &weight, scale, &mut l, |k| xx_of(kind, k), &mut index) {
                scale = refit(xb, &weight, &index, |k| xx_of(kind, k), scale);
            }
            y[qs_at + 2 * ib] = (index[0] & 255) as u8;
            y[qs_at + 2 * ib + 1] = (index[1] & 255) as u8;
            y[qh_at + ib] = ((index[0] >> 8) | ((index[1] >> 8) << 4)) as u8;
            scales[ib] = scale;
            shifts[ib] = best_k;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let mut sc = [0u16; 4];
        let mut d = max_scale / 15.0;
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for ib in 0..QK / BS {
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7);
            sc[ib / 4] |= (l as u16) << (3 * (ib % 4));
            y[qh_at + ib] |= MASKS[shifts[ib] as usize];
            let xb = &xbl[BS * ib..BS * ib + BS];
            let mut weight = [0f32; BS];
            weights_of(ibl, ib, xb, sigma2, &mut weight);
            let qh = u32::from(y[qh_at + ib]);
            for k in 0..BS / 8 {
                let xx = xx_of(shifts[ib], k);
                let ix = y[qs_at + 2 * ib + k] as usize | ((qh << (8 - 4 * k)) & 0x700) as usize;
                let pg = &IQ1S.grid[ix];
                for j in 0..8 {
                    let w = weight[8 * k + j];
                    let q = xx[((pg[j] - 1) / 2) as usize] * (2 * l + 1) as f32;
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
        }
        if sumq2 > 0.0 {
            d = sumqx / sumq2;
        }
        // ggml's fudge factor.
        let s = fp16(d * 1.1125f32);
        sc[0] |= (s & 0x000f) << 12;
        sc[1] |= (s & 0x00f0) << 8;
        sc[2] |= (s & 0x0f00) << 4;
        sc[3] |= s & 0xf000;
        for (i, w) in sc.iter().enumerate() {
            y[sc_at + 2 * i..sc_at + 2 * i + 2].copy_from_slice(&w.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msort_keeps_ties_in_order_and_orders_values() {
        let mut tmp = Vec::new();
        let v = [3.0, -1.0, 3.0, 0.0, -0.0, 2.0, -1.0];
        let got = sorted(&v, &mut tmp);
        let idx: Vec<usize> = got.iter().map(|p| p.1).collect();
        assert_eq!(idx, [1, 6, 3, 4, 5, 0, 2]);
    }

    #[test]
    fn the_grid_lists_three_codes_per_value_and_maps_its_points() {
        let t = &*IQ1S;
        assert_eq!(t.grid.len(), 2048);
        for (i, p) in t.grid.iter().enumerate() {
            assert!(p.iter().all(|c| [1, 3, 5].contains(c)));
            assert_eq!(t.entry(&p.map(|c| (c - 1) / 2)), Some(i));
        }
    }
}
