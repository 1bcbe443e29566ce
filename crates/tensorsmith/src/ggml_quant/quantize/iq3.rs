//! Quantization to IQ3_XXS and IQ3_S, bit-identical to ggml's `quantize_row_iq3_xxs_impl` and
//! `quantize_row_iq3_s_impl` (llama.cpp as llama-cpp-python 0.3.36 vendors it), with or without
//! an importance matrix. Each group of 4 values takes a point of ggml's 256- or 512-point grid
//! (the dequantization grids of `iq_grids.rs`, their byte values read as the codes 2l+1 the
//! search uses); a point off the grid takes the best of its nearest grid points, as
//! `iq3xs_init_impl` lists them (every grid point at the two, or three, smallest distances,
//! ordered by distance, then index). Written by hand, step for step as the
//! C: a crate cannot give ggml's exact search, and the bytes are the format.
//!
//! One departure, where ggml has none to give: on values beyond about 1e9 the weighted
//! distances overflow, and ggml aborts (`GGML_ASSERT(grid_index >= 0)`, or `scale >= 0` when
//! the scale comes out NaN); here the first neighbour is taken, or the NaN scale written.

// Indexed loops on purpose: they read as the C they follow, index for index.
#![allow(clippy::needless_range_loop)]

use crate::ggml_quant::iq_grids::{IQ3S_GRID, IQ3XXS_GRID};
use crate::ggml_quant::iq_search::{codes_at, max_of, scale_code, signs, sums, Tables};
use crate::ggml_quant::k_search::{c_max, fp16, imatrix_weights, sum_sq};
use std::sync::LazyLock;

const QK: usize = 256;
const KMAX_Q: i32 = 8;
/// `GROUP_MAX_EPS_IQ3_XXS`.
const GROUP_MAX_EPS: f32 = 1e-8;

/// Groups of 4 codes of 3 bits.
type Grid = Tables<4, 3>;

fn grid(dequant: &[u32], values: [u8; 8], nwant: usize) -> Grid {
    let rows: Vec<[u8; 4]> = dequant.iter().map(|g| g.to_le_bytes()).collect();
    Tables::new(&rows, &values, 4096, nwant)
}

static IQ3XXS: LazyLock<Grid> =
    LazyLock::new(|| grid(&IQ3XXS_GRID, [4, 12, 20, 28, 36, 44, 52, 62], 2));
static IQ3S: LazyLock<Grid> = LazyLock::new(|| grid(&IQ3S_GRID, [1, 3, 5, 7, 9, 11, 13, 15], 3));

/// ggml's search over one sub-block of 32 values (8 groups of 4; `xval` made non-negative),
/// as both IQ3 types run it: scales `(15 + is·0.2)/max` for `is` in `-steps..=steps`, each
/// group's codes moved to the grid; then, if a group of the best is off the grid, those groups
/// (`redo_all`: every group, as IQ3_S does; its groups start as off the grid) again at the
/// best scale. The codes and the scale.
fn search(
    t: &Grid,
    xval: &[f32; 32],
    weight: &[f32; 32],
    waux: &[f32; 32],
    max: f32,
    steps: i32,
    redo_all: bool,
) -> ([i8; 32], f32) {
    let mut l = [0i8; 32];
    let mut best = 0f32;
    let mut scale = max / (2 * KMAX_Q - 1) as f32;
    let mut on_grid = [!redo_all; 8];
    let mut laux = [0i8; 32];
    let mut on_grid_aux = [true; 8];
    for is in -steps..=steps {
        let id = ((2 * KMAX_Q - 1) as f32 + is as f32 * 0.2f32) / max;
        let this_scale = 1.0 / id;
        for k in 0..8 {
            let g = 4 * k..4 * k + 4;
            codes_at(id, &xval[g.clone()], &mut laux[g.clone()], KMAX_Q);
            on_grid_aux[k] = t.entry(&laux[g.clone()]).is_some();
            if !on_grid_aux[k] {
                let u = Grid::index_of(&laux[g.clone()]);
                t.nearest(
                    u,
                    &xval[g.clone()],
                    &waux[g.clone()],
                    this_scale,
                    &mut laux[g],
                );
            }
        }
        let (sumqx, sumq2) = sums(weight, xval, &laux);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            l = laux;
            on_grid = on_grid_aux;
        }
    }
    if on_grid.iter().any(|g| !g) && scale > 0.0 {
        let id = 1.0 / scale;
        for k in 0..8 {
            if on_grid[k] && !redo_all {
                continue;
            }
            let g = 4 * k..4 * k + 4;
            codes_at(id, &xval[g.clone()], &mut l[g.clone()], KMAX_Q);
            if t.entry(&l[g.clone()]).is_none() {
                let u = Grid::index_of(&l[g.clone()]);
                t.nearest(u, &xval[g.clone()], &waux[g.clone()], scale, &mut l[g]);
            }
        }
        let (sumqx, sumq2) = sums(weight, xval, &l);
        if sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    (l, scale)
}

/// A sub-block's weights: `qw · sqrt(σ² + x²)` with an importance matrix, else `x²`.
fn weights(xb: &[f32], qw: Option<&[f32]>, sigma2: f32) -> [f32; 32] {
    let mut w = [0f32; 32];
    match qw {
        Some(q) => {
            imatrix_weights(&q[..32], xb, sigma2, &mut w);
        }
        None => {
            for (w, &x) in w.iter_mut().zip(xb) {
                *w = x * x;
            }
        }
    }
    w
}

/// IQ3_XXS: super-blocks of 256 values to 98 bytes (`d`, 64 grid indices, 8 words of signs and
/// a 4-bit scale), with the weights of the same positions `qw` or none.
pub(super) fn iq3_xxs(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let t = &*IQ3XXS;
    for (ibl, (xbl, y)) in x.chunks_exact(QK).zip(out.chunks_exact_mut(98)).enumerate() {
        let mut q3 = [0u8; 64];
        let mut scales_and_signs = [0u32; 8];
        let mut scales = [0f32; 8];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_sq(xbl) / QK as f32;
        for ib in 0..QK / 32 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let weight = weights(xb, qw.map(|q| &q[QK * ibl + 32 * ib..]), sigma2);
            let waux = weight.map(f32::sqrt);
            let mut xval = [0f32; 32];
            let mut block_signs = signs(xb, &weight, &mut xval, true);
            let max = max_of(&xval);
            if max < GROUP_MAX_EPS {
                scales[ib] = 0.0;
                continue;
            }
            let (l, mut scale) = search(t, &xval, &weight, &waux, max, 15, false);
            if scale < 0.0 {
                scale = -scale;
                for s in block_signs.iter_mut() {
                    *s = !*s & 127;
                }
            }
            for k in 0..8 {
                // Every group ends on the grid (ggml aborts otherwise; it cannot happen).
                q3[8 * ib + k] = t.entry(&l[4 * k..]).unwrap_or(0) as u8;
            }
            scales_and_signs[ib] = u32::from(block_signs[0])
                | u32::from(block_signs[1]) << 7
                | u32::from(block_signs[2]) << 14
                | u32::from(block_signs[3]) << 21;
            scales[ib] = scale;
            max_scale = c_max(max_scale, scale);
        }
        // `if (!max_scale)`: zero (a NaN is not).
        if max_scale == 0.0 {
            y.fill(0);
            continue;
        }
        let d = max_scale / 31.0;
        y[..2].copy_from_slice(&fp16(d * 1.0125f32).to_le_bytes());
        let id = 1.0 / d;
        for ib in 0..QK / 32 {
            scales_and_signs[ib] |= scale_code(id, scales[ib]) << 28;
        }
        y[2..66].copy_from_slice(&q3);
        for (ib, w) in scales_and_signs.iter().enumerate() {
            y[66 + 4 * ib..70 + 4 * ib].copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// IQ3_S: super-blocks of 256 values to 110 bytes (`d`, 64 low bytes of grid indices, 8 bytes
/// of their ninth bits, 32 sign bytes, 8 4-bit scales), with the weights `qw` or none.
///
/// As ggml: a sub-block of 32 that is all zero is skipped without moving the write position of
/// its grid indices and signs, so the next sub-block's land where its would have (its ninth
/// bits and scale keep their own places).
pub(super) fn iq3_s(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let t = &*IQ3S;
    for (ibl, (xbl, y)) in x
        .chunks_exact(QK)
        .zip(out.chunks_exact_mut(110))
        .enumerate()
    {
        y.fill(0);
        let (mut qs_at, mut signs_at) = (2usize, 74usize);
        let mut scales = [0f32; 8];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_sq(xbl) / QK as f32;
        for ib in 0..QK / 32 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let weight = weights(xb, qw.map(|q| &q[QK * ibl + 32 * ib..]), sigma2);
            let waux = weight.map(f32::sqrt);
            let mut xval = [0f32; 32];
            let mut block_signs = signs(xb, &weight, &mut xval, false);
            let max = max_of(&xval);
            // `if (!max)`: zero (a NaN is not).
            if max == 0.0 {
                scales[ib] = 0.0;
                continue;
            }
            let (l, mut scale) = search(t, &xval, &weight, &waux, max, 9, true);
            if scale < 0.0 {
                scale = -scale;
                for s in block_signs.iter_mut() {
                    *s = !*s;
                }
            }
            for k in 0..8 {
                let grid_index = t.entry(&l[4 * k..]).unwrap_or(0);
                y[qs_at + k] = (grid_index & 255) as u8;
                let bit = ib * 8 + k;
                y[66 + bit / 8] |= ((grid_index >> 8) as u8) << (bit % 8);
            }
            qs_at += 8;
            y[signs_at..signs_at + 4].copy_from_slice(&block_signs);
            signs_at += 4;
            scales[ib] = scale;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[..2].copy_from_slice(&fp16(d * 1.033f32).to_le_bytes());
        let id = 1.0 / d;
        for ib in (0..QK / 32).step_by(2) {
            let (l1, l2) = (scale_code(id, scales[ib]), scale_code(id, scales[ib + 1]));
            y[106 + ib / 2] = (l1 | (l2 << 4)) as u8;
        }
    }
}
