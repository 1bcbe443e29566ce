//! Quantization to IQ2_XXS, IQ2_XS and IQ2_S, bit-identical to ggml's
//! `quantize_row_iq2_xxs_impl`, `quantize_row_iq2_xs_impl` and `quantize_row_iq2_s_impl`
//! (llama.cpp as llama-cpp-python 0.3.36 vendors it). Each group of 8 values takes a point of
//! ggml's 256-, 512- or 1024-point grid (the dequantization grids of `iq_grids.rs`, their byte
//! values 8, 25, 43 read as the codes 2l+1 the search uses); a point off the grid takes the best
//! of its nearest grid points, as `iq2xs_init_impl` lists them (every grid point at the two
//! smallest distances, one for IQ2_S, ordered by distance, then index). IQ2_XXS and IQ2_XS are
//! made with an importance matrix only, as ggml makes them; IQ2_S with or without. Written by
//! hand, step for step as the C: a crate cannot give ggml's exact search, and the bytes are the
//! format.
//!
//! Where ggml aborts (values beyond about 1e9, whose weighted distances overflow: no nearest
//! point, or a NaN scale), the first neighbour is taken, or the NaN scale written.

// Indexed loops on purpose: they read as the C they follow, index for index.
#![allow(clippy::needless_range_loop)]

use crate::ggml_quant::iq_grids::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};
use crate::ggml_quant::iq_search::{codes_at, max_of, scale_code, signs, sums, Tables};
use crate::ggml_quant::k_search::{
    c_max, fp16, imatrix_weights, make_qp_quants, sum_sq, GROUP_MAX_EPS,
};
use std::sync::LazyLock;

const QK: usize = 256;
const KMAX_Q: i32 = 3;
/// `GROUP_MAX_EPS_IQ2_S`.
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;
/// ggml's map covers the indices of 8 codes in `0..=2` (the largest is 0xAAAA).
const KMAP_SIZE: usize = 43692;

/// Groups of 8 codes of 2 bits.
type Grid = Tables<8, 2>;

fn grid(dequant: &[u64], nwant: usize) -> Grid {
    let rows: Vec<[u8; 8]> = dequant.iter().map(|g| g.to_le_bytes()).collect();
    Tables::new(&rows, &[8, 25, 43], KMAP_SIZE, nwant)
}

static IQ2XXS: LazyLock<Grid> = LazyLock::new(|| grid(&IQ2XXS_GRID, 2));
static IQ2XS: LazyLock<Grid> = LazyLock::new(|| grid(&IQ2XS_GRID, 2));
static IQ2S: LazyLock<Grid> = LazyLock::new(|| grid(&IQ2S_GRID, 1));

/// IQ2_XXS: super-blocks of 256 values to 66 bytes (`d`, then per 32 values a word of 4 grid
/// indices and a word of 4×7 sign bits and a 4-bit scale). `qw` is required (ggml asserts it).
pub(super) fn iq2_xxs(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let t = &*IQ2XXS;
    let qw = qw.expect("IQ2_XXS is made with an importance matrix only");
    for (ibl, (xbl, y)) in x.chunks_exact(QK).zip(out.chunks_exact_mut(66)).enumerate() {
        y.fill(0);
        let mut q2 = [0u32; 16];
        let mut scales = [0f32; 8];
        let mut max_scale = 0f32;
        let sigma2 = sum_sq(xbl) / QK as f32;
        for ib in 0..QK / 32 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let q = &qw[QK * ibl + 32 * ib..QK * ibl + 32 * ib + 32];
            let mut weight = [0f32; 32];
            imatrix_weights(q, xb, sigma2, &mut weight);
            let waux = weight.map(f32::sqrt);
            let mut xval = [0f32; 32];
            let mut block_signs = signs(xb, &weight, &mut xval, true);
            let max = max_of(&xval);
            if max < GROUP_MAX_EPS {
                scales[ib] = 0.0;
                continue;
            }
            let mut lq = [0u8; 32];
            let mut scale = make_qp_quants(KMAX_Q + 1, &xval, &mut lq, &weight);
            let mut l = lq.map(|c| c as i8);
            let eff_max = scale * KMAX_Q as f32;
            if eff_max <= 0.0 {
                scales[ib] = 0.0;
                continue;
            }
            let mut best = 0f32;
            let mut laux = [0i8; 32];
            for is in -6i32..=6 {
                let id = ((2 * KMAX_Q - 1) as f32 + is as f32 * 0.1f32) / eff_max;
                let this_scale = 1.0 / id;
                for k in 0..4 {
                    let g = 8 * k..8 * k + 8;
                    codes_at(id, &xval[g.clone()], &mut laux[g.clone()], KMAX_Q);
                    let u = Grid::index_of(&laux[g.clone()]);
                    if t.map[u] < 0 {
                        t.nearest(
                            u,
                            &xval[g.clone()],
                            &waux[g.clone()],
                            this_scale,
                            &mut laux[g],
                        );
                    }
                }
                let (sumqx, sumq2) = sums(&weight, &xval, &laux);
                if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    l = laux;
                }
            }
            if scale > 0.0 {
                let id = 1.0 / scale;
                for k in 0..4 {
                    let g = 8 * k..8 * k + 8;
                    let mut codes = [0i8; 8];
                    codes_at(id, &xval[g.clone()], &mut codes, KMAX_Q);
                    let u = Grid::index_of(&codes);
                    let grid_index = if t.map[u] < 0 {
                        t.nearest(
                            u,
                            &xval[g.clone()],
                            &waux[g.clone()],
                            scale,
                            &mut l[g.clone()],
                        )
                    } else {
                        t.map[u] as usize
                    };
                    let pg = &t.grid[grid_index];
                    for i in 0..8 {
                        l[8 * k + i] = (pg[i] - 1) / 2;
                    }
                }
                let (sumqx, sumq2) = sums(&weight, &xval, &l);
                if sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            if scale < 0.0 {
                scale = -scale;
                for s in block_signs.iter_mut() {
                    *s = !*s & 127;
                }
            }
            for k in 0..4 {
                let grid_index = t.map[Grid::index_of(&l[8 * k..])].max(0) as u32;
                q2[2 * ib] |= grid_index << (8 * k);
                q2[2 * ib + 1] |= u32::from(block_signs[k]) << (7 * k);
            }
            scales[ib] = scale;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[..2].copy_from_slice(&fp16(d).to_le_bytes());
        let id = 1.0 / d;
        for ib in 0..QK / 32 {
            q2[2 * ib + 1] |= scale_code(id, scales[ib]) << 28;
        }
        for (i, w) in q2.iter().enumerate() {
            y[2 + 4 * i..6 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// The search of IQ2_XS and IQ2_S over one sub-block of 16 values: the codes and the scale.
fn search16(t: &Grid, xval: &[f32], weight: &[f32], waux: &[f32], max: f32) -> ([i8; 16], f32) {
    let mut l = [0i8; 16];
    let mut best = 0f32;
    let mut scale = max / (2 * KMAX_Q - 1) as f32;
    let mut on_grid = [true; 2];
    let mut laux = [0i8; 16];
    let mut on_grid_aux = [true; 2];
    for is in -9i32..=9 {
        let id = ((2 * KMAX_Q - 1) as f32 + is as f32 * 0.1f32) / max;
        let this_scale = 1.0 / id;
        for k in 0..2 {
            let g = 8 * k..8 * k + 8;
            codes_at(id, &xval[g.clone()], &mut laux[g.clone()], KMAX_Q);
            let u = Grid::index_of(&laux[g.clone()]);
            on_grid_aux[k] = true;
            if t.map[u] < 0 {
                on_grid_aux[k] = false;
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
        for k in 0..2 {
            if on_grid[k] {
                continue;
            }
            let g = 8 * k..8 * k + 8;
            codes_at(id, &xval[g.clone()], &mut l[g.clone()], KMAX_Q);
            let u = Grid::index_of(&l[g.clone()]);
            if t.map[u] < 0 {
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

/// IQ2_XS: super-blocks of 256 values to 74 bytes (`d`, per 8 values a 16-bit word of a grid
/// index and 7 sign bits, 4-bit scales per 16 values). `qw` is required (ggml asserts it).
pub(super) fn iq2_xs(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let t = &*IQ2XS;
    let qw = qw.expect("IQ2_XS is made with an importance matrix only");
    for (ibl, (xbl, y)) in x.chunks_exact(QK).zip(out.chunks_exact_mut(74)).enumerate() {
        y.fill(0);
        let mut q2 = [0u16; 32];
        let mut scales = [0f32; 16];
        let mut max_scale = 0f32;
        let sigma2 = sum_sq(xbl) / QK as f32;
        for ib in 0..QK / 16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            let q = &qw[QK * ibl + 16 * ib..QK * ibl + 16 * ib + 16];
            let mut weight = [0f32; 16];
            imatrix_weights(q, xb, sigma2, &mut weight);
            let waux = weight.map(f32::sqrt);
            let mut xval = [0f32; 16];
            let mut block_signs = signs(xb, &weight, &mut xval, true);
            let max = max_of(&xval);
            if max < GROUP_MAX_EPS {
                scales[ib] = 0.0;
                continue;
            }
            let (l, mut scale) = search16(t, &xval, &weight, &waux, max);
            if scale < 0.0 {
                scale = -scale;
                for s in block_signs[..2].iter_mut() {
                    *s = !*s & 127;
                }
            }
            for k in 0..2 {
                let grid_index = t.map[Grid::index_of(&l[8 * k..])].max(0) as u16;
                q2[2 * ib + k] = grid_index | u16::from(block_signs[k]) << 9;
            }
            scales[ib] = scale;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[..2].copy_from_slice(&fp16(d).to_le_bytes());
        let id = 1.0 / d;
        for ib in 0..QK / 16 {
            let l = scale_code(id, scales[ib]) as u8;
            y[66 + ib / 2] |= if ib % 2 == 0 { l } else { l << 4 };
        }
        for (i, w) in q2.iter().enumerate() {
            y[2 + 2 * i..4 + 2 * i].copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// IQ2_S: super-blocks of 256 values to 82 bytes (`d`, 32 low bytes of grid indices, 32 sign
/// bytes, 8 bytes of the indices' high bits, 4-bit scales per 16 values), with the weights `qw`
/// or none.
pub(super) fn iq2_s(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let t = &*IQ2S;
    for (ibl, (xbl, y)) in x.chunks_exact(QK).zip(out.chunks_exact_mut(82)).enumerate() {
        y.fill(0);
        let mut scales = [0f32; 16];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_sq(xbl) / QK as f32;
        for ib in 0..QK / 16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            let mut weight = [0f32; 16];
            match qw {
                Some(qw) => {
                    let q = &qw[QK * ibl + 16 * ib..QK * ibl + 16 * ib + 16];
                    imatrix_weights(q, xb, sigma2, &mut weight);
                }
                None => {
                    for i in 0..16 {
                        weight[i] = 0.25 * sigma2 + xb[i] * xb[i];
                    }
                }
            }
            let waux = weight.map(f32::sqrt);
            let mut xval = [0f32; 16];
            let mut block_signs = signs(xb, &weight, &mut xval, false);
            let max = max_of(&xval);
            if max < GROUP_MAX_EPS_IQ2_S {
                scales[ib] = 0.0;
                continue;
            }
            let (l, mut scale) = search16(t, &xval, &weight, &waux, max);
            if scale < 0.0 {
                scale = -scale;
                for s in block_signs[..2].iter_mut() {
                    *s = !*s;
                }
            }
            for k in 0..2 {
                let grid_index = t.map[Grid::index_of(&l[8 * k..])].max(0) as usize;
                let i8 = 2 * ib + k;
                y[2 + i8] = (grid_index & 255) as u8;
                y[66 + i8 / 4] |= ((grid_index >> 8) as u8) << (2 * (i8 % 4));
                y[2 + QK / 8 + i8] = block_signs[k];
            }
            scales[ib] = scale;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[..2].copy_from_slice(&fp16(d * 0.9875f32).to_le_bytes());
        let id = 1.0 / d;
        for ib in 0..QK / 16 {
            let l = scale_code(id, scales[ib]) as u8;
            y[74 + ib / 2] |= if ib % 2 == 0 { l } else { l << 4 };
        }
    }
}
