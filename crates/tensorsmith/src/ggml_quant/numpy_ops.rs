//! The NumPy float32 steps gguf-py's quantizers are made of, with NumPy's results on x86-64
//! where plain Rust would differ: float-to-integer casts, NaN-first argmax/argmin, the f16
//! conversion of NaNs, and gguf-py's `np_roundf` (round half away from zero).

/// `astype(np.uint8)` (and, reinterpreted, `np.int8`) of a float32: NumPy truncates through a
/// 32-bit integer (`cvttss2si`, which gives `i32::MIN` for NaN and out-of-range values), then
/// keeps the low byte: 300 → 44, -1 → 255, NaN and ±inf → 0.
#[inline]
pub(super) fn cast_u8(x: f32) -> u8 {
    if x > -2_147_483_904.0 && x < 2_147_483_648.0 {
        // SAFETY: x is not NaN and truncates into i32's range (the next f32 below -2^31 is
        // -2^31 - 256).
        unsafe { x.to_int_unchecked::<i32>() as u8 }
    } else {
        0 // NaN and out of range: i32::MIN, whose low byte is 0
    }
}

/// `floor` of a value that is not negative (or NaN), without a libm call (baseline x86-64
/// has no `roundss`): below 2^23 truncation is the floor; from 2^23 on every f32 is an
/// integer already; NaN and infinity come back as they are.
#[inline]
fn floor_nonneg(a: f32) -> f32 {
    debug_assert!(a >= 0.0 || a.is_nan(), "floor_nonneg of {a}");
    if a < 8_388_608.0 {
        // SAFETY: here 0 <= a < 2^23 (callers pass no negative values; NaN fails the
        // comparison), so truncation to i32 is in range.
        unsafe { a.to_int_unchecked::<i32>() as f32 }
    } else {
        a
    }
}

/// gguf-py's `np_roundf`: `sign(n) * (floor(|n|) + floor(2 * (|n| - floor(|n|))))`, in f32.
#[inline]
pub(super) fn roundf(n: f32) -> f32 {
    let a = n.abs();
    let fl = floor_nonneg(a);
    let b = fl + floor_nonneg(2.0 * (a - fl));
    // sign(n) * b: the same value for n != 0; for n = ±0 a zero and for NaN a NaN, which
    // every caller casts to the integer 0 either way.
    b.copysign(n)
}

/// NumPy's `astype(np.float16)` bits (its software conversion): round to nearest even; a NaN
/// keeps its sign and the top 10 bits of its payload, made 1 if they are all zero (so a
/// signalling NaN stays signalling, unlike `half`'s, which quiets it).
#[inline]
pub(super) fn f16_bits(x: f32) -> u16 {
    if x.is_nan() {
        let b = x.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let mut h = 0x7C00u16 + ((b & 0x007F_FFFF) >> 13) as u16;
        if h == 0x7C00 {
            h += 1;
        }
        return sign | h;
    }
    half::f16::from_f32(x).to_bits()
}

/// `abs(x).argmax()`: the first NaN if there is one, else the first largest.
#[inline]
pub(super) fn argmax_abs(x: &[f32]) -> usize {
    let mut best = 0;
    let mut bv = f32::NEG_INFINITY;
    for (i, v) in x.iter().map(|v| v.abs()).enumerate() {
        if v.is_nan() {
            return i;
        }
        if v > bv || i == 0 {
            best = i;
            bv = v;
        }
    }
    best
}

/// `x.argmin()`: the first NaN if there is one, else the first smallest.
#[inline]
pub(super) fn argmin(x: &[f32]) -> usize {
    let mut best = 0;
    let mut bv = f32::INFINITY;
    for (i, &v) in x.iter().enumerate() {
        if v.is_nan() {
            return i;
        }
        if v < bv || i == 0 {
            best = i;
            bv = v;
        }
    }
    best
}

/// The NaN NumPy's max and min reductions return for a NaN input: positive, quiet,
/// payload-free, whatever NaN was in the data. Not always: with AVX-512 dispatch (NumPy 2.4 on
/// an AVX-512 CPU) a NaN among values 17-31 of a 32-value row comes back with its payload, so
/// gguf-py's scale for such a block differs from ours in its NaN payload alone; a rule tied to
/// one NumPy build's SIMD loop is not one to copy (docs/src/formats.md says so).
const REDUCED_NAN: f32 = f32::NAN; // 0x7fc00000 on every Rust target

/// `abs(x).max()`: NaN if any value is NaN.
#[inline]
pub(super) fn max_abs(x: &[f32]) -> f32 {
    if x.iter().any(|v| v.is_nan()) {
        return REDUCED_NAN;
    }
    x.iter().fold(0.0f32, |m, v| m.max(v.abs()))
}

/// `x.max()` and `x.min()`: NumPy's NaN if any value is NaN; of equal extremes the last (which
/// decides the sign of a zero: NumPy's SIMD `maxps`/`minps` keep the later operand on ties).
#[inline]
pub(super) fn max_min(x: &[f32]) -> (f32, f32) {
    if x.iter().any(|v| v.is_nan()) {
        return (REDUCED_NAN, REDUCED_NAN);
    }
    let (mut hi, mut lo) = (x[0], x[0]);
    for &v in &x[1..] {
        if v >= hi {
            hi = v;
        }
        if v <= lo {
            lo = v;
        }
    }
    (hi, lo)
}

/// `np.where(d == 0, 0, 1 / d)`.
#[inline]
pub(super) fn inverse(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_wrap_like_numpy_on_x86() {
        let cases = [
            (f32::INFINITY, 0),
            (f32::NEG_INFINITY, 0),
            (f32::NAN, 0),
            (300.0, 44),
            (-1.0, 255),
            (1e10, 0),
            (-1e10, 0),
            (255.9, 255),
            (256.0, 0),
            (-129.0, 127),
            (128.0, 128),
        ];
        for (x, want) in cases {
            assert_eq!(cast_u8(x), want, "{x}");
        }
    }

    #[test]
    fn roundf_rounds_half_away_from_zero() {
        for (x, want) in [
            (0.5, 1.0),
            (-0.5, -1.0),
            (1.49, 1.0),
            (2.5, 3.0),
            (-2.5, -3.0),
        ] {
            assert_eq!(roundf(x), want);
        }
        assert!(roundf(f32::NAN).is_nan());
        assert_eq!(cast_u8(roundf(f32::INFINITY)), 0);
        for x in [
            0.0f32, 0.49999997, 1e-45, 8388607.5, 8388608.0, 3e38, 1.5e7, 0.75,
        ] {
            assert_eq!(floor_nonneg(x), x.floor(), "{x}");
        }
        assert!(floor_nonneg(f32::NAN).is_nan());
        assert_eq!(floor_nonneg(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn f16_keeps_nan_payloads_as_numpy_does() {
        assert_eq!(f16_bits(f32::from_bits(0x7f80_0001)), 0x7c01);
        assert_eq!(f16_bits(f32::from_bits(0xff80_0001)), 0xfc01);
        assert_eq!(f16_bits(f32::from_bits(0x7fc0_0000)), 0x7e00);
        assert_eq!(f16_bits(f32::from_bits(0x7f81_2345)), 0x7c09);
        assert_eq!(f16_bits(65520.0), 0x7c00);
        assert_eq!(f16_bits(1.0), 0x3c00);
    }

    #[test]
    fn arg_extremes_take_the_first_nan_or_the_first_extreme() {
        assert_eq!(argmax_abs(&[1.0, -3.0, 3.0]), 1);
        assert_eq!(argmax_abs(&[1.0, f32::NAN, f32::INFINITY, f32::NAN]), 1);
        assert_eq!(argmin(&[2.0, 1.0, 1.0]), 1);
        assert_eq!(argmin(&[f32::INFINITY; 3]), 0);
        assert_eq!(argmin(&[0.0, f32::NAN]), 1);
    }

    #[test]
    fn reductions_give_numpys_nan_and_the_last_of_equal_zeros() {
        let nan = f32::from_bits(0xffc0_0002);
        let (hi, lo) = max_min(&[1.0, nan, 2.0]);
        assert_eq!((hi.to_bits(), lo.to_bits()), (0x7fc0_0000, 0x7fc0_0000));
        assert_eq!(max_abs(&[nan, 1.0]).to_bits(), 0x7fc0_0000);
        let (hi, lo) = max_min(&[0.0, -0.0, 1.0]);
        assert_eq!((hi, lo.to_bits()), (1.0, 0x8000_0000));
        let (hi, lo) = max_min(&[-0.0, 0.0, -1.0]);
        assert_eq!((hi.to_bits(), lo), (0, -1.0));
    }
}
