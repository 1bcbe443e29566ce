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

use super::iq_grids::{IQ3S_GRID, IQ3XXS_GRID};
use super::k_search::{c_max, fp16, nearest_int, sum_sq};
use std::sync::LazyLock;

const QK: usize = 256;
const KMAX_Q: i32 = 8;
/// `GROUP_MAX_EPS_IQ3_XXS`.
const GROUP_MAX_EPS: f32 = 1e-8;

/// ggml's search tables for a grid: the points as codes `2l+1`, the map from a point's 12-bit
/// index to its grid entry (`>= 0`) or to its neighbour list (`-(offset + 1)`), and the lists
/// (a count, then that many grid entries).
struct Tables {
    grid: Vec<[i8; 4]>,
    map: Vec<i32>,
    neighbours: Vec<u16>,
}

static IQ3XXS: LazyLock<Tables> =
    LazyLock::new(|| tables(&IQ3XXS_GRID, [4, 12, 20, 28, 36, 44, 52, 62], 2));
static IQ3S: LazyLock<Tables> =
    LazyLock::new(|| tables(&IQ3S_GRID, [1, 3, 5, 7, 9, 11, 13, 15], 3));

/// `iq3xs_init_impl`: the tables of the dequantization grid `dequant` (whose byte values are
/// `values[l]` for code `l`), each off-grid point listing the grid points at its `nwant`
/// smallest distances.
fn tables(dequant: &[u32], values: [u8; 8], nwant: usize) -> Tables {
    let grid: Vec<[i8; 4]> = dequant
        .iter()
        .map(|g| {
            g.to_le_bytes().map(|v| {
                let l = values.iter().position(|&x| x == v).expect("a grid value");
                2 * l as i8 + 1
            })
        })
        .collect();
    let mut map = vec![-1i32; 4096];
    for (i, p) in grid.iter().enumerate() {
        let mut index = 0usize;
        for k in 0..4 {
            index |= (((p[k] - 1) / 2) as usize) << (3 * k);
        }
        map[index] = i as i32;
    }
    let mut neighbours: Vec<u16> = Vec::new();
    for i in 0..4096usize {
        if map[i] >= 0 {
            continue;
        }
        let pos: [i32; 4] = std::array::from_fn(|k| 2 * ((i >> (3 * k)) & 7) as i32 + 1);
        let mut dist: Vec<(i32, usize)> = grid
            .iter()
            .enumerate()
            .map(|(j, pg)| {
                let d2 = (0..4).map(|k| (pg[k] as i32 - pos[k]).pow(2)).sum();
                (d2, j)
            })
            .collect();
        dist.sort_unstable();
        let start = neighbours.len();
        map[i] = -(start as i32 + 1);
        neighbours.push(0);
        let (mut d2, mut nhave, mut n) = (dist[0].0, 1, 0u16);
        for &(d, j) in &dist {
            if d > d2 {
                if nhave == nwant {
                    break;
                }
                d2 = d;
                nhave += 1;
            }
            neighbours.push(j as u16);
            n += 1;
        }
        neighbours[start] = n;
    }
    Tables {
        grid,
        map,
        neighbours,
    }
}

/// `iq3_find_best_neighbour`: of the neighbours listed at `at`, the grid entry nearest to
/// `xval` at `scale` under weights `w`; its codes `l` go to `codes`.
fn best_neighbour(
    t: &Tables,
    at: usize,
    xval: &[f32],
    w: &[f32],
    scale: f32,
    codes: &mut [i8],
) -> usize {
    let n = t.neighbours[at] as usize;
    let mut best_d2 = f32::MAX;
    let mut index = usize::MAX;
    for &j in &t.neighbours[at + 1..=at + n] {
        let pg = &t.grid[j as usize];
        let mut d2 = 0f32;
        for i in 0..4 {
            let diff = scale * pg[i] as f32 - xval[i];
            d2 += w[i] * diff * diff;
        }
        if d2 < best_d2 {
            best_d2 = d2;
            index = j as usize;
        }
    }
    // ggml asserts one was found; a NaN distance everywhere finds none: take the first.
    if index == usize::MAX {
        index = t.neighbours[at + 1] as usize;
    }
    let pg = &t.grid[index];
    for i in 0..4 {
        codes[i] = (pg[i] - 1) / 2;
    }
    index
}

/// The 12-bit index of four codes.
fn index_of(codes: &[i8]) -> usize {
    (0..4).fold(0, |u, i| u | ((codes[i] as usize) << (3 * i)))
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
            let mut weight = [0f32; 32];
            match qw {
                Some(q) => {
                    let q = &q[QK * ibl + 32 * ib..QK * ibl + 32 * ib + 32];
                    for i in 0..32 {
                        weight[i] = q[i] * (sigma2 + xb[i] * xb[i]).sqrt();
                    }
                }
                None => {
                    for i in 0..32 {
                        weight[i] = xb[i] * xb[i];
                    }
                }
            }
            let waux = weight.map(f32::sqrt);
            let mut xval = [0f32; 32];
            let mut block_signs = [0u8; 4];
            for k in 0..4 {
                let mut nflip = 0;
                let mut s = 0u8;
                for i in 0..8 {
                    if xb[8 * k + i] >= 0.0 {
                        xval[8 * k + i] = xb[8 * k + i];
                    } else {
                        xval[8 * k + i] = -xb[8 * k + i];
                        nflip += 1;
                        s |= 1 << i;
                    }
                }
                if nflip % 2 == 1 {
                    let mut imin = 0;
                    let mut min = weight[8 * k] * xb[8 * k] * xb[8 * k];
                    for i in 1..8 {
                        let ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                        if ax < min {
                            min = ax;
                            imin = i;
                        }
                    }
                    xval[8 * k + imin] = -xval[8 * k + imin];
                    s ^= 1 << imin;
                }
                block_signs[k] = s & 127;
            }
            let mut max = xval[0];
            for i in 1..32 {
                max = c_max(max, xval[i]);
            }
            let mut l_best = [0i8; 32];
            if max < GROUP_MAX_EPS {
                scales[ib] = 0.0;
                continue;
            }
            let mut best = 0f32;
            let mut scale = max / (2 * KMAX_Q - 1) as f32;
            let mut on_grid = [true; 8];
            let mut laux = [0i8; 32];
            let mut on_grid_aux = [true; 8];
            for is in -15i32..=15 {
                let id = ((2 * KMAX_Q - 1) as f32 + is as f32 * 0.2f32) / max;
                let this_scale = 1.0 / id;
                for k in 0..8 {
                    for i in 0..4 {
                        let l = nearest_int(0.5 * (id * xval[4 * k + i] - 1.0));
                        laux[4 * k + i] = l.clamp(0, KMAX_Q - 1) as i8;
                    }
                    let u = index_of(&laux[4 * k..]);
                    on_grid_aux[k] = true;
                    if t.map[u] < 0 {
                        on_grid_aux[k] = false;
                        let at = (-t.map[u] - 1) as usize;
                        best_neighbour(
                            t,
                            at,
                            &xval[4 * k..4 * k + 4],
                            &waux[4 * k..4 * k + 4],
                            this_scale,
                            &mut laux[4 * k..4 * k + 4],
                        );
                    }
                }
                let (mut sumqx, mut sumq2) = (0f32, 0f32);
                for i in 0..32 {
                    let w = weight[i];
                    let q = (2 * laux[i] as i32 + 1) as f32;
                    sumqx += w * xval[i] * q;
                    sumq2 += w * q * q;
                }
                if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    l_best = laux;
                    on_grid = on_grid_aux;
                }
            }
            if on_grid.iter().any(|g| !g) && scale > 0.0 {
                let id = 1.0 / scale;
                for k in 0..8 {
                    if on_grid[k] {
                        continue;
                    }
                    let mut codes = [0i8; 4];
                    for i in 0..4 {
                        let l = nearest_int(0.5 * (id * xval[4 * k + i] - 1.0));
                        codes[i] = l.clamp(0, KMAX_Q - 1) as i8;
                    }
                    let u = index_of(&codes);
                    let mut grid_index = t.map[u];
                    if grid_index < 0 {
                        let at = (-grid_index - 1) as usize;
                        grid_index = best_neighbour(
                            t,
                            at,
                            &xval[4 * k..4 * k + 4],
                            &waux[4 * k..4 * k + 4],
                            scale,
                            &mut l_best[4 * k..4 * k + 4],
                        ) as i32;
                    }
                    let pg = &t.grid[grid_index as usize];
                    for i in 0..4 {
                        l_best[4 * k + i] = (pg[i] - 1) / 2;
                    }
                }
                let (mut sumqx, mut sumq2) = (0f32, 0f32);
                for i in 0..32 {
                    let w = weight[i];
                    let q = (2 * l_best[i] as i32 + 1) as f32;
                    sumqx += w * xval[i] * q;
                    sumq2 += w * q * q;
                }
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
            for k in 0..8 {
                // Every group ends on the grid (ggml aborts otherwise; it cannot happen).
                let grid_index = t.map[index_of(&l_best[4 * k..])].max(0);
                q3[8 * ib + k] = grid_index as u8;
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
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 15);
            scales_and_signs[ib] |= (l as u32) << 28;
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
            let mut weight = [0f32; 32];
            match qw {
                Some(q) => {
                    let q = &q[QK * ibl + 32 * ib..QK * ibl + 32 * ib + 32];
                    for i in 0..32 {
                        weight[i] = q[i] * (sigma2 + xb[i] * xb[i]).sqrt();
                    }
                }
                None => {
                    for i in 0..32 {
                        weight[i] = xb[i] * xb[i];
                    }
                }
            }
            let waux = weight.map(f32::sqrt);
            let mut xval = [0f32; 32];
            let mut block_signs = [0u8; 4];
            for k in 0..4 {
                let mut s = 0u8;
                for i in 0..8 {
                    if xb[8 * k + i] >= 0.0 {
                        xval[8 * k + i] = xb[8 * k + i];
                    } else {
                        xval[8 * k + i] = -xb[8 * k + i];
                        s |= 1 << i;
                    }
                }
                block_signs[k] = s;
            }
            let mut max = xval[0];
            for i in 1..32 {
                max = c_max(max, xval[i]);
            }
            let mut l_best = [0i8; 32];
            // `if (!max)`: zero (a NaN is not).
            if max == 0.0 {
                scales[ib] = 0.0;
                continue;
            }
            let mut best = 0f32;
            let mut scale = max / (2 * KMAX_Q - 1) as f32;
            let mut on_grid = [false; 8];
            let mut laux = [0i8; 32];
            let mut on_grid_aux = [true; 8];
            for is in -9i32..=9 {
                let id = ((2 * KMAX_Q - 1) as f32 + is as f32 * 0.2f32) / max;
                let this_scale = 1.0 / id;
                for k in 0..8 {
                    for i in 0..4 {
                        let l = nearest_int(0.5 * (id * xval[4 * k + i] - 1.0));
                        laux[4 * k + i] = l.clamp(0, KMAX_Q - 1) as i8;
                    }
                    let u = index_of(&laux[4 * k..]);
                    on_grid_aux[k] = true;
                    if t.map[u] < 0 {
                        on_grid_aux[k] = false;
                        let at = (-t.map[u] - 1) as usize;
                        best_neighbour(
                            t,
                            at,
                            &xval[4 * k..4 * k + 4],
                            &waux[4 * k..4 * k + 4],
                            this_scale,
                            &mut laux[4 * k..4 * k + 4],
                        );
                    }
                }
                let (mut sumqx, mut sumq2) = (0f32, 0f32);
                for i in 0..32 {
                    let w = weight[i];
                    let q = (2 * laux[i] as i32 + 1) as f32;
                    sumqx += w * xval[i] * q;
                    sumq2 += w * q * q;
                }
                if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    l_best = laux;
                    on_grid = on_grid_aux;
                }
            }
            if on_grid.iter().any(|g| !g) && scale > 0.0 {
                // Every group again (ggml's skip of groups on the grid is commented out).
                let id = 1.0 / scale;
                for k in 0..8 {
                    let mut codes = [0i8; 4];
                    for i in 0..4 {
                        let l = nearest_int(0.5 * (id * xval[4 * k + i] - 1.0));
                        codes[i] = l.clamp(0, KMAX_Q - 1) as i8;
                    }
                    let u = index_of(&codes);
                    let mut grid_index = t.map[u];
                    if grid_index < 0 {
                        let at = (-grid_index - 1) as usize;
                        grid_index = best_neighbour(
                            t,
                            at,
                            &xval[4 * k..4 * k + 4],
                            &waux[4 * k..4 * k + 4],
                            scale,
                            &mut l_best[4 * k..4 * k + 4],
                        ) as i32;
                    }
                    let pg = &t.grid[grid_index as usize];
                    for i in 0..4 {
                        l_best[4 * k + i] = (pg[i] - 1) / 2;
                    }
                }
                let (mut sumqx, mut sumq2) = (0f32, 0f32);
                for i in 0..32 {
                    let w = weight[i];
                    let q = (2 * l_best[i] as i32 + 1) as f32;
                    sumqx += w * xval[i] * q;
                    sumq2 += w * q * q;
                }
                if sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            if scale < 0.0 {
                scale = -scale;
                for s in block_signs.iter_mut() {
                    *s = !*s;
                }
            }
            for k in 0..8 {
                let grid_index = t.map[index_of(&l_best[4 * k..])].max(0) as usize;
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
            let l1 = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 15);
            let l2 = nearest_int(0.5 * (id * scales[ib + 1] - 1.0)).clamp(0, 15);
            y[106 + ib / 2] = (l1 | (l2 << 4)) as u8;
        }
    }
}
