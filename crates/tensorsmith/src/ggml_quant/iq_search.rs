//! ggml's search tables for the IQ2 and IQ3 grids (`iq2xs_init_impl`, `iq3xs_init_impl`) and
//! the nearest-neighbour step both searches take (`iq2_find_best_neighbour`,
//! `iq3_find_best_neighbour`). A group of `N` codes (each `BITS` wide) is a point; the grid's
//! points are listed as codes `2l+1`, each mapped from its index; every other point lists the
//! grid points at its `nwant` smallest distances, ordered by distance, then index, as ggml's
//! `qsort` with its comparator orders them.

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
        let mut neighbours: Vec<u16> = Vec::new();
        let mut dist: Vec<(i32, usize)> = Vec::with_capacity(grid.len());
        for i in 0..map_size {
            if map[i] >= 0 {
                continue;
            }
            let pos: [i32; N] = std::array::from_fn(|k| 2 * ((i >> (BITS * k)) & mask) as i32 + 1);
            dist.clear();
            dist.extend(grid.iter().enumerate().map(|(j, pg)| {
                let d2 = (0..N).map(|k| (pg[k] as i32 - pos[k]).pow(2)).sum();
                (d2, j)
            }));
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
        let at = (-self.map[u] - 1) as usize;
        let n = self.neighbours[at] as usize;
        let mut best_d2 = f32::MAX;
        let mut index = usize::MAX;
        for &j in &self.neighbours[at + 1..=at + n] {
            let pg = &self.grid[j as usize];
            let mut d2 = 0f32;
            for i in 0..N {
                let diff = scale * pg[i] as f32 - xval[i];
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
