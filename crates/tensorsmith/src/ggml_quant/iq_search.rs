//! ggml's search tables for the IQ1, IQ2 and IQ3 grids (`iq2xs_init_impl`, `iq3xs_init_impl`)
//! and the nearest-neighbour step the searches take (`iq2_find_best_neighbour`,
//! `iq3_find_best_neighbour`, `iq1_find_best_neighbour2`), and the small steps the IQ2 and IQ3
//! quantizers share. A group of `N` codes (each `BITS` wide) is a point; the grid's
//! points are listed as codes `2l+1`, each mapped from its index; every other point lists the
//! grid points at its `nwant` smallest distances, ordered by distance, then index, as ggml's
//! `qsort` with its comparator orders them.

use crate::ggml_quant::k_search::{c_max, nearest_int};
use rayon::prelude::*;

/// The tables of one grid.
pub(super) struct Tables<const N: usize, const BITS: usize> {
    /// The grid's points, as codes `2l+1`.
    pub grid: Vec<[i8; N]>,
    /// A point's index to its grid entry (`>= 0`) or to its neighbour list (`-(offset + 1)`).
    pub map: Vec<i32>,
    /// The lists: a count, then that many grid entries.
    neighbours: Vec<u16>,
}

impl<const N: usize, const BITS: usize> Tables<N, BITS> {
    /// The tables of the dequantization grid `dequant` (rows of `N` bytes, little-endian in a
    /// word; a byte `values[l]` is code `l`), over point indices `0..map_size`.
    // The point index is the loop's subject (its codes are its bits), not only a map position.
    #[allow(clippy::needless_range_loop)]
    pub(super) fn new(dequant: &[[u8; N]], values: &[u8], map_size: usize, nwant: usize) -> Self {
        let grid: Vec<[i8; N]> = dequant
            .iter()
            .map(|g| {
                g.map(|v| {
                    let l = values.iter().position(|&x| x == v).expect("a grid value");
                    2 * l as i8 + 1
                })
            })
            .collect();
        let mut map = vec![-1i32; map_size];
        for (i, p) in grid.iter().enumerate() {
            map[Self::index_of(&p.map(|c| (c - 1) / 2))] = i as i32;
        }
        let mask = (1usize << BITS) - 1;
        // Each off-grid point's list on its own (rayon: IQ1's grid has 2048 points and ~42k
        // points off it), then laid out in index order as ggml lays them out.
        let lists: Vec<Vec<u16>> = (0..map_size)
            .into_par_iter()
            .map(|i| {
                if map[i] >= 0 {
                    return Vec::new();
                }
                let pos: [i32; N] =
                    std::array::from_fn(|k| 2 * ((i >> (BITS * k)) & mask) as i32 + 1);
                nearest_points(&grid, &pos, nwant)
            })
            .collect();
        let mut neighbours: Vec<u16> = Vec::new();
        for (i, list) in lists.iter().enumerate() {
            if map[i] >= 0 {
                continue;
            }
            map[i] = -(neighbours.len() as i32 + 1);
            neighbours.push(list.len() as u16);
            neighbours.extend_from_slice(list);
        }
        Tables {
            grid,
            map,
            neighbours,
        }
    }

    /// The index of `N` codes.
    pub(super) fn index_of(codes: &[i8]) -> usize {
        (0..N).fold(0, |u, i| u | ((codes[i] as usize) << (BITS * i)))
    }

    /// The grid entry of codes that lie on the grid.
    pub(super) fn entry(&self, codes: &[i8]) -> Option<usize> {
        usize::try_from(self.map[Self::index_of(codes)]).ok()
    }

    /// The neighbour step for the off-grid point `u`: of its listed neighbours, the grid entry
    /// nearest to `xval` at `scale` under weights `w`; its codes go to `codes`. Where ggml
    /// finds none and aborts (every distance overflowing to a NaN), the first is taken.
    pub(super) fn nearest(
        &self,
        u: usize,
        xval: &[f32],
        w: &[f32],
        scale: f32,
        codes: &mut [i8],
    ) -> usize {
        self.nearest_by(u, xval, w, scale, |c| c as f32, codes)
    }

    /// [`Tables::nearest`] with a grid code `2l+1` worth `value(code)` (the IQ2 and IQ3 grids:
    /// the code itself; IQ1's: a shifted −1, 0 or 1).
    pub(super) fn nearest_by(
        &self,
        u: usize,
        xval: &[f32],
        w: &[f32],
        scale: f32,
        value: impl Fn(i8) -> f32,
        codes: &mut [i8],
    ) -> usize {
        let at = (-self.map[u] - 1) as usize;
        let n = self.neighbours[at] as usize;
        let mut best_d2 = f32::MAX;
        let mut index = usize::MAX;
        for &j in &self.neighbours[at + 1..=at + n] {
            let pg = &self.grid[j as usize];
            let mut d2 = 0f32;
            for i in 0..N {
                let diff = scale * value(pg[i]) - xval[i];
                d2 += w[i] * diff * diff;
            }
            if d2 < best_d2 {
                best_d2 = d2;
                index = j as usize;
            }
        }
        if index == usize::MAX {
            index = self.neighbours[at + 1] as usize;
        }
        self.codes_of(index, codes);
        index
    }

    /// The codes `l` of grid entry `index`.
    pub(super) fn codes_of(&self, index: usize, codes: &mut [i8]) {
        for (c, p) in codes.iter_mut().zip(&self.grid[index]) {
            *c = (p - 1) / 2;
        }
    }
}

/// The grid points at the `nwant` smallest distances from `pos`, ordered by distance, then
/// index (what ggml keeps of its `qsort` of every distance): the distances found in one pass,
/// only the points kept sorted.
fn nearest_points<const N: usize>(grid: &[[i8; N]], pos: &[i32; N], nwant: usize) -> Vec<u16> {
    let dist: Vec<i32> = grid
        .iter()
        .map(|pg| (0..N).map(|k| (pg[k] as i32 - pos[k]).pow(2)).sum())
        .collect();
    // The `nwant` smallest distinct distances, ascending.
    let mut least: Vec<i32> = Vec::with_capacity(nwant + 1);
    for &d in &dist {
        if let Err(at) = least.binary_search(&d) {
            if at < nwant {
                least.insert(at, d);
                least.truncate(nwant);
            }
        }
    }
    let bound = *least.last().expect("a grid has points");
    let mut kept: Vec<(i32, u16)> = (0..grid.len())
        .filter(|&j| dist[j] <= bound)
        .map(|j| (dist[j], j as u16))
        .collect();
    kept.sort_unstable();
    kept.into_iter().map(|(_, j)| j).collect()
}

/// Codes `0..kmax` of a group at the inverse scale `id`: `nearest_int(0.5·(id·x − 1))`.
pub(super) fn codes_at(id: f32, xval: &[f32], codes: &mut [i8], kmax: i32) {
    for (c, &x) in codes.iter_mut().zip(xval) {
        *c = nearest_int(0.5 * (id * x - 1.0)).clamp(0, kmax - 1) as i8;
    }
}

/// Σ w·x·q and Σ w·q² of codes `l` (q = 2l+1), in C's order.
pub(super) fn sums(weight: &[f32], xval: &[f32], l: &[i8]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for i in 0..xval.len() {
        let w = weight[i];
        let q = (2 * l[i] as i32 + 1) as f32;
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// `|xb|` into `xval` per group of 8, and each group's sign bits; with `parity` (IQ2_XXS,
/// IQ2_XS, IQ3_XXS), the least weighted value of a group with an odd count of negatives keeps
/// its sign, and 7 bits are kept.
pub(super) fn signs(xb: &[f32], weight: &[f32], xval: &mut [f32], parity: bool) -> [u8; 4] {
    let mut out = [0u8; 4];
    for k in 0..xb.len() / 8 {
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
        if parity && nflip % 2 == 1 {
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
        out[k] = if parity { s & 127 } else { s };
    }
    out
}

/// The largest of `xval`, as C's `MAX` loop finds it.
pub(super) fn max_of(xval: &[f32]) -> f32 {
    xval[1..].iter().fold(xval[0], |m, &v| c_max(m, v))
}

/// A sub-block's 4-bit scale: `nearest_int(0.5·(scale/d − 1))` in `0..=15`.
pub(super) fn scale_code(id: f32, scale: f32) -> u32 {
    nearest_int(0.5 * (id * scale - 1.0)).clamp(0, 15) as u32
}
