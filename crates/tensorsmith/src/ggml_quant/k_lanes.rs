//! The K-quants' scale searches run on the `L` sub-blocks of a super-block at once, one sub-block
//! per lane: [`qkx_lanes`] is [`make_qkx_quants`](crate::ggml_quant::k_search::make_qkx_quants) (Q2_K, Q4_K
//! and Q5_K without an importance matrix), [`qx_lanes`] is
//! [`make_qx_quants`](crate::ggml_quant::k_search::make_qx_quants) (Q6_K). Each lane takes exactly the steps
//! of the one-sub-block search, in the same order (its sums still add one value after the
//! other), so the bits are ggml's; what changes is that the sums of the lanes advance together,
//! in SIMD registers, where one sub-block's sums were a chain of dependent additions that the
//! CPU waited on. Values are laid out transposed (`x[i][lane]`) so each step over the lanes is
//! one contiguous vector. Branches become per-lane selections: a lane's outcome never depends on
//! another lane's values.

// Indexed loops on purpose: `[i][lane]` reads as the one-lane search's `[i]`, lane by lane.
#![allow(clippy::needless_range_loop)]

use crate::ggml_quant::k_search::{nearest_int, GROUP_MAX_EPS};

/// `f` on every lane.
#[inline(always)]
fn each<const L: usize, T: Copy + Default>(f: impl Fn(usize) -> T) -> [T; L] {
    std::array::from_fn(f)
}

/// `make_qkx_quants` on `L` lanes of `N` values (`x[i][lane]`, weights alike): codes to
/// `codes[i][lane]`, `-min` of each lane to `the_min`; returns the scales.
#[allow(clippy::too_many_arguments)]
pub(super) fn qkx_lanes<const MAD: bool, const L: usize, const N: usize>(
    nmax: i32,
    x: &[[f32; L]; N],
    weights: &[[f32; L]; N],
    codes: &mut [[u8; L]; N],
    the_min: &mut [f32; L],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> [f32; L] {
    let error = |d: f32| if MAD { d.abs() } else { d * d };
    let clamp = |l: i32| l.clamp(0, nmax);
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x: [f32; L] = each(|k| sum_w[k] * x[0][k]);
    for i in 1..N {
        for k in 0..L {
            let xi = x[i][k];
            if xi < min[k] {
                min[k] = xi;
            }
            if xi > max[k] {
                max[k] = xi;
            }
            sum_w[k] += weights[i][k];
            sum_x[k] += weights[i][k] * xi;
        }
    }
    for m in min.iter_mut() {
        if *m > 0.0 {
            *m = 0.0;
        }
    }
    // `max == min`: the lane's codes are 0, its scale 0 (computed below like the others, then
    // replaced).
    let flat: [bool; L] = each(|k| max[k] == min[k]);
    let iscale: [f32; L] = each(|k| nmax as f32 / (max[k] - min[k]));
    let mut scale: [f32; L] = each(|k| 1.0f32 / iscale[k]);
    let mut best_error = [0f32; L];
    for i in 0..N {
        for k in 0..L {
            let l = clamp(nearest_int(iscale[k] * (x[i][k] - min[k])));
            codes[i][k] = l as u8;
            let diff = scale[k] * l as f32 + min[k] - x[i][k];
            best_error[k] += weights[i][k] * error(diff);
        }
    }
    let mut aux = [[0u8; L]; N];
    let mut lfs = [[0f32; L]; N];
    // The minimum a flat lane keeps.
    let min0 = min;
    // No steps when `nstep < 1`.
    for is in (0..=nstep).filter(|_| nstep >= 1) {
        let num = rmin + rdelta * is as f32 + nmax as f32;
        // Over the current minimum: a step taken moves it.
        let iscale: [f32; L] = each(|k| num / (max[k] - min[k]));
        for i in 0..N {
            for k in 0..L {
                let l = clamp(nearest_int(iscale[k] * (x[i][k] - min[k])));
                aux[i][k] = l as u8;
                lfs[i][k] = l as f32;
            }
        }
        let (mut sum_l, mut sum_l2, mut sum_xl) = ([0f32; L], [0f32; L], [0f32; L]);
        for i in 0..N {
            for k in 0..L {
                let (lf, xi, w) = (lfs[i][k], x[i][k], weights[i][k]);
                sum_l[k] += w * lf;
                sum_l2[k] += w * lf * lf;
                sum_xl[k] += w * lf * xi;
            }
        }
        // FMA-sensitive as in the one-lane search (see k_search.rs).
        let d: [f32; L] = each(|k| sum_w[k] * sum_l2[k] - sum_l[k] * sum_l[k]);
        let mut this_scale: [f32; L] =
            each(|k| (sum_w[k] * sum_xl[k] - sum_x[k] * sum_l[k]) / d[k]);
        let mut this_min: [f32; L] = each(|k| (sum_l2[k] * sum_x[k] - sum_l[k] * sum_xl[k]) / d[k]);
        for k in 0..L {
            if this_min[k] > 0.0 {
                this_min[k] = 0.0;
                this_scale[k] = sum_xl[k] / sum_l2[k];
            }
        }
        let mut cur_error = [0f32; L];
        for i in 0..N {
            for k in 0..L {
                let diff = this_scale[k] * lfs[i][k] + this_min[k] - x[i][k];
                cur_error[k] += weights[i][k] * error(diff);
            }
        }
        let take: [bool; L] = each(|k| d[k] > 0.0 && cur_error[k] < best_error[k]);
        if take.iter().any(|&t| t) {
            for i in 0..N {
                for k in 0..L {
                    if take[k] {
                        codes[i][k] = aux[i][k];
                    }
                }
            }
            for k in 0..L {
                if take[k] {
                    best_error[k] = cur_error[k];
                    scale[k] = this_scale[k];
                    min[k] = this_min[k];
                }
            }
        }
    }
    for k in 0..L {
        if flat[k] {
            for c in codes.iter_mut() {
                c[k] = 0;
            }
            scale[k] = 0.0;
            min[k] = min0[k];
        }
        the_min[k] = -min[k];
    }
    scale
}

/// `make_qx_quants` (`rmse_type` 1) on `L` lanes of `N` values (`x[i][lane]`), weights `qw`
/// (alike) or `x²`: codes `nmax + l` to `codes[i][lane]`; returns the scales.
pub(super) fn qx_lanes<const L: usize, const N: usize>(
    nmax: i32,
    x: &[[f32; L]; N],
    qw: Option<&[[f32; L]; N]>,
    codes: &mut [[i8; L]; N],
) -> [f32; L] {
    let clamp = |l: i32| l.clamp(-nmax, nmax - 1);
    // The largest magnitude and the value carrying it (the first such).
    let (mut amax, mut max) = ([0f32; L], [0f32; L]);
    for i in 0..N {
        for k in 0..L {
            let ax = x[i][k].abs();
            if ax > amax[k] {
                amax[k] = ax;
                max[k] = x[i][k];
            }
        }
    }
    let mut w = [[0f32; L]; N];
    match qw {
        Some(q) => w = *q,
        None => {
            for i in 0..N {
                for k in 0..L {
                    w[i][k] = x[i][k] * x[i][k];
                }
            }
        }
    }
    let iscale: [f32; L] = each(|k| (-nmax) as f32 / max[k]);
    let (mut sumlx, mut suml2) = ([0f32; L], [0f32; L]);
    for i in 0..N {
        for k in 0..L {
            let l = clamp(nearest_int(iscale[k] * x[i][k]));
            codes[i][k] = (l + nmax) as i8;
            sumlx[k] += w[i][k] * x[i][k] * l as f32;
            suml2[k] += w[i][k] * l as f32 * l as f32;
        }
    }
    // `suml2 ? … : 0`: NaN counts as true in C.
    let mut scale: [f32; L] = each(|k| {
        if suml2[k] != 0.0 {
            sumlx[k] / suml2[k]
        } else {
            0.0
        }
    });
    let mut best: [f32; L] = each(|k| scale[k] * sumlx[k]);
    let mut lfs = [[0f32; L]; N];
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        let num = -(nmax as f32 + 0.1f32 * is as f32);
        let iscale: [f32; L] = each(|k| num / max[k]);
        for i in 0..N {
            for k in 0..L {
                lfs[i][k] = clamp(nearest_int(iscale[k] * x[i][k])) as f32;
            }
        }
        let (mut sumlx, mut suml2) = ([0f32; L], [0f32; L]);
        for i in 0..N {
            for k in 0..L {
                sumlx[k] += w[i][k] * x[i][k] * lfs[i][k];
                suml2[k] += w[i][k] * lfs[i][k] * lfs[i][k];
            }
        }
        let take: [bool; L] = each(|k| suml2[k] > 0.0 && sumlx[k] * sumlx[k] > best[k] * suml2[k]);
        if take.iter().any(|&t| t) {
            for i in 0..N {
                for k in 0..L {
                    if take[k] {
                        codes[i][k] = (nmax as f32 + lfs[i][k]) as i32 as i8;
                    }
                }
            }
            for k in 0..L {
                if take[k] {
                    scale[k] = sumlx[k] / suml2[k];
                    best[k] = scale[k] * sumlx[k];
                }
            }
        }
    }
    for k in 0..L {
        if amax[k] < GROUP_MAX_EPS {
            for c in codes.iter_mut() {
                c[k] = 0;
            }
            scale[k] = 0.0;
        }
    }
    scale
}

/// `x` (rows of `N` values per lane, lane after lane) transposed to `[i][lane]`.
pub(super) fn transpose<const L: usize, const N: usize>(x: &[f32]) -> [[f32; L]; N] {
    let mut t = [[0f32; L]; N];
    for k in 0..L {
        for i in 0..N {
            t[i][k] = x[N * k + i];
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::super::k_search::{make_qkx_quants, make_qx_quants};
    use super::*;

    /// Values of every kind a sub-block can hold: normal, flat, all zero, tiny, huge, NaN.
    fn lanes_input(seed: u64, k: usize, n: usize) -> Vec<f32> {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        };
        (0..k * n)
            .map(|i| match (i / n) % 8 {
                0 => next() * 3.0,
                1 => 0.75,
                2 => 0.0,
                3 => next() * 1e-30,
                4 => next() * 3e38,
                5 if i % n == 3 => f32::NAN,
                5 => next(),
                6 => next().abs() + 0.5,
                _ => (next() * 4.0).round() / 4.0,
            })
            .collect()
    }

    #[test]
    fn qkx_lanes_equal_the_one_lane_search() {
        for seed in 0..20 {
            let x = lanes_input(seed, 8, 32);
            let w: Vec<f32> = x.iter().map(|v| 0.3 + v.abs()).collect();
            let (xt, wt) = (transpose::<8, 32>(&x), transpose::<8, 32>(&w));
            let mut codes = [[0u8; 8]; 32];
            let mut mins = [0f32; 8];
            let scales =
                qkx_lanes::<false, 8, 32>(15, &xt, &wt, &mut codes, &mut mins, -1.0, 0.1, 20);
            for k in 0..8 {
                let r = 32 * k..32 * k + 32;
                let mut c1 = [0u8; 32];
                let mut m1 = 0f32;
                let s1 = make_qkx_quants::<false>(
                    15,
                    &x[r.clone()],
                    &w[r],
                    &mut c1,
                    &mut m1,
                    -1.0,
                    0.1,
                    20,
                );
                assert_eq!(s1.to_bits(), scales[k].to_bits(), "seed {seed} lane {k}");
                assert_eq!(m1.to_bits(), mins[k].to_bits(), "seed {seed} lane {k}");
                assert!(
                    (0..32).all(|i| c1[i] == codes[i][k]),
                    "seed {seed} lane {k}"
                );
            }
        }
    }

    #[test]
    fn qkx_lanes_of_absolute_errors_equal_the_one_lane_search() {
        for seed in 0..20 {
            let x = lanes_input(seed, 16, 16);
            let w: Vec<f32> = x.iter().map(|v| v.abs()).collect();
            let (xt, wt) = (transpose::<16, 16>(&x), transpose::<16, 16>(&w));
            let mut codes = [[0u8; 16]; 16];
            let mut mins = [0f32; 16];
            let scales =
                qkx_lanes::<true, 16, 16>(3, &xt, &wt, &mut codes, &mut mins, -0.5, 0.1, 15);
            for k in 0..16 {
                let r = 16 * k..16 * k + 16;
                let mut c1 = [0u8; 16];
                let mut m1 = 0f32;
                let s1 = make_qkx_quants::<true>(
                    3,
                    &x[r.clone()],
                    &w[r],
                    &mut c1,
                    &mut m1,
                    -0.5,
                    0.1,
                    15,
                );
                assert_eq!(s1.to_bits(), scales[k].to_bits(), "seed {seed} lane {k}");
                assert_eq!(m1.to_bits(), mins[k].to_bits(), "seed {seed} lane {k}");
                assert!(
                    (0..16).all(|i| c1[i] == codes[i][k]),
                    "seed {seed} lane {k}"
                );
            }
        }
    }

    #[test]
    fn qx_lanes_equal_the_one_lane_search() {
        for seed in 0..20 {
            let x = lanes_input(seed, 16, 16);
            let q: Vec<f32> = x.iter().map(|v| 0.1 + v.abs() * 2.0).collect();
            let xt = transpose::<16, 16>(&x);
            let qt = transpose::<16, 16>(&q);
            for qw in [None, Some(&qt)] {
                let mut codes = [[0i8; 16]; 16];
                let scales = qx_lanes::<16, 16>(32, &xt, qw, &mut codes);
                for k in 0..16 {
                    let r = 16 * k..16 * k + 16;
                    let mut c1 = [0i8; 16];
                    let s1 = make_qx_quants(32, &x[r.clone()], &mut c1, qw.map(|_| &q[r]));
                    assert_eq!(s1.to_bits(), scales[k].to_bits(), "seed {seed} lane {k}");
                    assert!(
                        (0..16).all(|i| c1[i] == codes[i][k]),
                        "seed {seed} lane {k}"
                    );
                }
            }
        }
    }
}
