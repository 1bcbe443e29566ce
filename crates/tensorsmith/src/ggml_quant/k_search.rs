//! The scale searches of ggml's K-quant and IQ4 quantizers (`ggml-quants.c` of the llama.cpp
//! that llama-cpp-python 0.3.36 vendors): `make_qx_quants`, `make_q3_quants`,
//! `make_qkx2_quants`/`make_qkx3_quants`, `make_qp_quants`, `best_index_int8`, with
//! `nearest_int` and ggml's own f32 <-> f16 conversions.
//!
//! Written by hand: these searches are the format's logic (the blocks ggml writes are whatever
//! they pick). Each follows the C float operation by operation, in its order and widths
//! (f32 throughout, ints converted where C converts them, `MIN`/`MAX` as C's `?:` macros,
//! integer truncations to `int8_t`/`uint8_t` as C stores them), so the bytes are ggml's.
//!
//! Build flags: the reference is ggml-base of a default portable build, compiled without
//! `-march` flags, so on x86-64 (SSE2 only) GCC has no fused multiply-add to contract
//! expressions such as `sum_w * sum_l2 - sum_l * sum_l` into. A build for a target with FMA
//! (aarch64, or x86-64 with `-mfma` on ggml-base) may contract them (GCC's default
//! `-ffp-contract=fast`) and round differently; Rust never contracts, so these functions
//! match the uncontracted build.

// Indexed loops on purpose: they read as the C they follow, index for index.
#![allow(clippy::needless_range_loop)]

/// `GROUP_MAX_EPS`: a group whose largest magnitude is below it is all zero.
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: round to nearest (ties to even) through the 1.5·2^23 trick. Only
/// meaningful for |f| <= 2^22 (ggml asserts that in debug builds only); outside it the
/// result is whatever the bits give, exactly as in the release build.
#[inline]
pub(super) fn nearest_int(f: f32) -> i32 {
    let v = f + 12_582_912.0f32;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// ggml's `ggml_compute_fp32_to_fp16` (the portable one, as ggml-base uses without F16C):
/// round to nearest even; NaN becomes 0x7E00 with the sign kept.
pub(super) fn fp16(f: f32) -> u16 {
    let scale_to_inf = f32::from_bits(0x7780_0000); // 0x1.0p+112f
    let scale_to_zero = f32::from_bits(0x0880_0000); // 0x1.0p-110f
    let mut base = (f.abs() * scale_to_inf) * scale_to_zero;
    let w = f.to_bits();
    let shl1_w = w.wrapping_add(w);
    let sign = w & 0x8000_0000;
    let mut bias = shl1_w & 0xFF00_0000;
    if bias < 0x7100_0000 {
        bias = 0x7100_0000;
    }
    base += f32::from_bits((bias >> 1) + 0x0780_0000); // C adds it the other way; exact either way
    let bits = base.to_bits();
    let exp_bits = (bits >> 13) & 0x0000_7C00;
    let mantissa_bits = bits & 0x0000_0FFF;
    let nonsign = exp_bits + mantissa_bits;
    ((sign >> 16)
        | if shl1_w > 0xFF00_0000 {
            0x7E00
        } else {
            nonsign
        }) as u16
}

/// ggml's `ggml_compute_fp16_to_fp32` (exact).
pub(super) fn fp32(h: u16) -> f32 {
    let w = (h as u32) << 16;
    let sign = w & 0x8000_0000;
    let two_w = w.wrapping_add(w);
    let exp_offset = 0xE0u32 << 23;
    let exp_scale = f32::from_bits(0x0780_0000); // 0x1.0p-112f
    let normalized = f32::from_bits((two_w >> 4) + exp_offset) * exp_scale;
    let magic_mask = 126u32 << 23;
    let denormalized = f32::from_bits((two_w >> 17) | magic_mask) - 0.5f32;
    let denormalized_cutoff = 1u32 << 27;
    f32::from_bits(
        sign | if two_w < denormalized_cutoff {
            denormalized.to_bits()
        } else {
            normalized.to_bits()
        },
    )
}

/// C's `MAX(a, b)` on floats: `a > b ? a : b` (a NaN `b` wins, a NaN `a` loses).
#[inline]
pub(super) fn c_max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// The largest magnitude of `x` and the value carrying it (the first such), as ggml's
/// `if (ax > amax) { amax = ax; max = x[i]; }` loops find them.
#[inline]
pub(super) fn abs_max(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    (amax, max)
}

/// `make_qx_quants` with `rmse_type == 1` (the only one the K-quants call): signed codes
/// `L[i] = nmax + l`, `l` in `-nmax..nmax`, weights `qw` or `x²`; at most 32 values;
/// returns the scale.
pub(super) fn make_qx_quants(nmax: i32, x: &[f32], codes: &mut [i8], qw: Option<&[f32]>) -> f32 {
    let (amax, max) = abs_max(x);
    if amax < GROUP_MAX_EPS {
        codes.fill(0);
        return 0.0;
    }
    // The weights up front (`qw`, or `x²` as C computes it in each loop: the same bits).
    let n = x.len();
    let mut wbuf = [0f32; 32];
    let wv = &mut wbuf[..n];
    match qw {
        Some(q) => wv.copy_from_slice(&q[..n]),
        None => {
            for (w, &xi) in wv.iter_mut().zip(x) {
                *w = xi * xi;
            }
        }
    }
    let wv = &wbuf[..n];
    let codes = &mut codes[..n];
    let clamp = |l: i32| l.clamp(-nmax, nmax - 1);
    let mut iscale = (-nmax) as f32 / max;
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for ((c, &xi), &w) in codes.iter_mut().zip(x).zip(wv) {
        let l = clamp(nearest_int(iscale * xi));
        *c = (l + nmax) as i8;
        sumlx += w * xi * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    // `suml2 ? … : 0`: NaN counts as true in C.
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1f32 * is as f32) / max;
        // The codes in a loop of their own (it vectorizes), the sums in C's order.
        let mut lfs = [0f32; 32];
        let lfs = &mut lfs[..n];
        for (lf, &xi) in lfs.iter_mut().zip(x) {
            *lf = clamp(nearest_int(iscale * xi)) as f32;
        }
        sumlx = 0.0;
        suml2 = 0.0;
        for ((&xi, &w), &lf) in x.iter().zip(wv).zip(lfs.iter()) {
            sumlx += w * xi * lf;
            suml2 += w * lf * lf;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (c, &xi) in codes.iter_mut().zip(x) {
                *c = (nmax + clamp(nearest_int(iscale * xi))) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants` with `do_rmse` (Q3_K without an importance matrix): codes `nmax + l`,
/// `l` in `-nmax..nmax`, refined by up to five passes of single-code changes.
pub(super) fn make_q3_quants(nmax: i32, x: &[f32], codes: &mut [i8]) -> f32 {
    let (amax, max) = abs_max(x);
    if amax < GROUP_MAX_EPS {
        codes.fill(0);
        return 0.0;
    }
    let clamp = |l: i32| l.clamp(-nmax, nmax - 1);
    let iscale = (-nmax) as f32 / max;
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for i in 0..x.len() {
        let l = clamp(nearest_int(iscale * x[i]));
        codes[i] = l as i8;
        let w = x[i] * x[i];
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = 0;
        for i in 0..x.len() {
            let w = x[i] * x[i];
            let li = codes[i] as i32;
            let mut slx = sumlx - w * x[i] * li as f32;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li as f32 * li as f32;
                let new_l = clamp(nearest_int(x[i] * sl2 / slx));
                if new_l != li {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        codes[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed += 1;
                    }
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    for c in codes.iter_mut() {
        *c = (*c as i32 + nmax) as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// The search of a scale and a minimum over `0..=nmax` codes. `make_qkx2_quants` and
/// `make_qkx3_quants` (with its weights given, as every K-quant passes them) take the same
/// steps: they differ only in the degenerate test (`max == min` against `max <= min`), which
/// agree because `min <= max` whenever neither is NaN, and both are false when one is.
/// `MAD` weighs absolute errors instead of squared ones. At most 32 values. Returns the scale;
/// `-min` goes to `the_min`.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_qkx_quants<const MAD: bool>(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    codes: &mut [u8],
    the_min: &mut f32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> f32 {
    let n = x.len();
    // Equal lengths up front, so the loops below zip without bounds checks.
    let (weights, codes) = (&weights[..n], &mut codes[..n]);
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for (&xi, &w) in x.iter().zip(weights).skip(1) {
        if xi < min {
            min = xi;
        }
        if xi > max {
            max = xi;
        }
        sum_w += w;
        sum_x += w * xi;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        codes.fill(0);
        *the_min = -min;
        return 0.0;
    }
    let clamp = |l: i32| l.clamp(0, nmax);
    let error = |d: f32| if MAD { d.abs() } else { d * d };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0f32 / iscale;
    let mut best_error = 0f32;
    for ((c, &xi), &w) in codes.iter_mut().zip(x).zip(weights) {
        let l = clamp(nearest_int(iscale * (xi - min)));
        *c = l as u8;
        let diff = scale * l as f32 + min - xi;
        best_error += w * error(diff);
    }
    if nstep < 1 {
        *the_min = -min;
        return scale;
    }
    let mut aux = [0u8; 32];
    let aux = &mut aux[..n];
    // The codes as floats, computed apart from the sums: the codes vectorize, the sums keep
    // C's order (one element after the other), so the bits stay ggml's.
    let mut lfs = [0f32; 32];
    let lfs = &mut lfs[..n];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        for ((a, lf), &xi) in aux.iter_mut().zip(lfs.iter_mut()).zip(x) {
            let l = clamp(nearest_int(iscale * (xi - min)));
            *a = l as u8;
            *lf = l as f32;
        }
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for ((&lf, &xi), &w) in lfs.iter().zip(x).zip(weights) {
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * xi;
        }
        // FMA-sensitive (see the module comment): contracted builds may round D differently.
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0f32;
            for ((&lf, &xi), &w) in lfs.iter().zip(x).zip(weights) {
                let diff = this_scale * lf + this_min - xi;
                cur_error += w * error(diff);
            }
            if cur_error < best_error {
                codes.copy_from_slice(aux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    scale
}

/// `make_qp_quants`: unsigned codes `0..=nmax` for non-negative `x` (sub-block scales or
/// minimums) under weights `qw`; a negative code wraps as C stores it into `uint8_t`.
pub(super) fn make_qp_quants(nmax: i32, x: &[f32], codes: &mut [u8], qw: &[f32]) -> f32 {
    let n = x.len();
    let mut max = 0f32;
    for &v in x {
        max = c_max(max, v);
    }
    if max < GROUP_MAX_EPS {
        codes.fill(0);
        return 0.0;
    }
    let mut iscale = nmax as f32 / max;
    for i in 0..n {
        codes[i] = nearest_int(iscale * x[i]) as u8;
    }
    let scale = 1.0f32 / iscale;
    let mut best_mse = 0f32;
    for i in 0..n {
        let diff = x[i] - scale * codes[i] as f32;
        best_mse += qw[i] * diff * diff;
    }
    for is in -4i32..=4 {
        if is == 0 {
            continue;
        }
        let iscale_is = (0.1f32 * is as f32 + nmax as f32) / max;
        let scale_is = 1.0f32 / iscale_is;
        let mut mse = 0f32;
        for i in 0..n {
            let l = nearest_int(iscale_is * x[i]).min(nmax);
            let diff = x[i] - scale_is * l as f32;
            mse += qw[i] * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for i in 0..n {
        let l = nearest_int(iscale * x[i]).min(nmax);
        codes[i] = l as u8;
        let w = qw[i];
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = 0;
        for i in 0..n {
            let w = qw[i];
            let li = codes[i] as i32;
            let mut slx = sumlx - w * x[i] * li as f32;
            let mut sl2 = suml2 - w * li as f32 * li as f32;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(x[i] * sl2 / slx).min(nmax);
                if new_l != li {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        codes[i] = new_l as u8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed += 1;
                    }
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// `best_index_int8`: the index of the value of the sorted table `val` nearest to `x` (ties
/// to the upper one; below the first or above the last, the end).
#[inline]
pub(super) fn best_index_int8(val: &[i8; 16], x: f32) -> usize {
    if x <= val[0] as f32 {
        return 0;
    }
    if x >= val[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (val[mu - 1] as f32) < val[mu] as f32 - x {
        mu - 1
    } else {
        mu
    }
}

/// Σ v² over `x`, summed in order as ggml's loops do.
pub(crate) fn sum_sq(x: &[f32]) -> f32 {
    let mut s = 0f32;
    for &v in x {
        s += v * v;
    }
    s
}

/// ggml's importance weights of one sub-block, `qw[l] · sqrt(sigma2 + xs[l]²)`, into `out`
/// (as long as `xs`), and their sum in order (the sub-block's `sw`).
pub(crate) fn imatrix_weights(qw: &[f32], xs: &[f32], sigma2: f32, out: &mut [f32]) -> f32 {
    for ((o, &q), &v) in out.iter_mut().zip(qw).zip(xs) {
        *o = q * (sigma2 + v * v).sqrt();
    }
    let mut sum = 0f32;
    for &w in out.iter() {
        sum += w;
    }
    sum
}
