//! Element casts between the float types (F64, F32, F16, BF16). Narrowing to F16/BF16 rounds
//! to nearest even by default (as NumPy and PyTorch do) or truncates on request, bit for bit
//! like the safetensors-spark connector: BF16 keeps the top 16 bits of the f32; F16 drops the
//! low mantissa bits, flushes anything below 2^-14 to signed zero and sends |x| >= 65536 to
//! infinity. Widening is exact. All data is little-endian.
//!
//! NaNs, outside truncation, come out as NumPy makes them ([`nan_bits`]; F16 by NumPy's own
//! conversions, BF16 by ml_dtypes'), whatever the CPU: the F16C instructions and `half` quiet
//! a signalling NaN where NumPy keeps it signalling, and keep a payload that ml_dtypes drops.

use crate::dtype::DType;
use crate::error::{ErrorKind, Result};
use half::{bf16, f16};

/// How to narrow a float to 16 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rounding {
    /// Round to nearest, ties to even (IEEE 754 default).
    #[default]
    Nearest,
    /// safetensors-spark's truncation (see the module docs).
    Truncate,
}

/// f32 → f16 by truncation, the safetensors-spark way.
pub fn f32_to_f16_truncate(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 31) as u16) << 15;
    let exp32 = ((bits >> 23) & 0xff) as i32;
    let mant32 = bits & 0x7f_ffff;
    if exp32 == 0xff {
        return sign | 0x7c00 | if mant32 != 0 { 0x200 } else { 0 };
    }
    if exp32 == 0 {
        return sign;
    }
    let exp16 = exp32 - 127 + 15;
    if exp16 >= 0x1f {
        sign | 0x7c00
    } else if exp16 <= 0 {
        sign
    } else {
        sign | ((exp16 as u16) << 10) | ((mant32 >> 13) as u16)
    }
}

/// f32 → bf16 by truncation: the top 16 bits, a NaN's with its quiet bit set. A signalling
/// NaN whose payload lies in the low 16 bits (0x7f80_0001) would otherwise keep only its
/// exponent and become an infinity; setting the quiet bit is what widening it to f64 (the
/// connector's and our element path's trip) does, and the optimiser may fold that trip away.
pub fn f32_to_bf16_truncate(x: f32) -> u16 {
    let top = (x.to_bits() >> 16) as u16;
    if x.is_nan() {
        top | 0x0040
    } else {
        top
    }
}

/// The bits NumPy gives casting the NaN `bits` (an element of `from`) to `to`, all four of
/// F64, F32, F16, BF16 (checked against NumPy 2.4 and ml_dtypes 0.6 in the tests below):
/// - to F16, from F64 or F32: the payload's top 10 bits kept as they are, so a signalling NaN
///   stays signalling (0x7c01 where those bits are all zero, to stay a NaN); from BF16 the
///   quiet NaN 0x7e00;
/// - to BF16: the quiet NaN 0x7fc0, the payload dropped;
/// - F16 to F32 or F64, BF16 to F32: the payload kept as it is (exact widening);
/// - F32, F64, BF16 to the other wide types: the quiet bit set, the payload's top bits kept
///   (the CPU's own conversion, which NumPy uses there).
///
/// The sign is always kept.
pub fn nan_bits(from: DType, to: DType, bits: u64) -> u64 {
    // The payload as f64's 52 mantissa bits, and the sign.
    let (sign, man) = match from {
        DType::F64 => (bits >> 63, bits & ((1 << 52) - 1)),
        DType::F32 => (bits >> 31 & 1, (bits & 0x7f_ffff) << 29),
        DType::F16 => (bits >> 15 & 1, (bits & 0x3ff) << 42),
        _ => (bits >> 15 & 1, (bits & 0x7f) << 45),
    };
    let keep = matches!(
        (from, to),
        (DType::F16, DType::F32 | DType::F64) | (DType::BF16, DType::F32)
    );
    match to {
        DType::F16 if from == DType::BF16 => sign << 15 | 0x7e00,
        DType::F16 => sign << 15 | 0x7c00 | (man >> 42).max(1),
        DType::BF16 => sign << 15 | 0x7fc0,
        DType::F32 => {
            let quiet = if keep { 0 } else { 0x40_0000 };
            sign << 31 | 0x7f80_0000 | quiet | man >> 29
        }
        _ => {
            let quiet = if keep { 0 } else { 1 << 51 };
            sign << 63 | 0x7ff0_0000_0000_0000 | quiet | man
        }
    }
}

/// f32 → f16 to nearest even, NaNs as NumPy makes them ([`nan_bits`]).
pub fn f32_to_f16_nearest(x: f32) -> u16 {
    if x.is_nan() {
        nan_bits(DType::F32, DType::F16, u64::from(x.to_bits())) as u16
    } else {
        f16::from_f32(x).to_bits()
    }
}

/// f32 → bf16 to nearest even, NaNs as ml_dtypes makes them ([`nan_bits`]).
pub fn f32_to_bf16_nearest(x: f32) -> u16 {
    if x.is_nan() {
        nan_bits(DType::F32, DType::BF16, u64::from(x.to_bits())) as u16
    } else {
        bf16::from_f32(x).to_bits()
    }
}

/// Rounds an f64 to nearest-even in a binary format with `exp_bits` exponent bits and
/// `man_bits` stored mantissa bits (F16: 5/10, BF16: 8/7), subnormals included. Written here
/// because `half`'s f64 path drops the low 32 mantissa bits before rounding, which turns some
/// values just above a tie into a wrong round-down.
fn f64_to_narrow_nearest(x: f64, exp_bits: u32, man_bits: u32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 63) as u16) << 15;
    let exp = ((bits >> 52) & 0x7ff) as i64;
    let man = bits & ((1u64 << 52) - 1);
    let inf = ((1u16 << exp_bits) - 1) << man_bits;
    if exp == 0x7ff {
        let nan = if man != 0 {
            (1u16 << (man_bits - 1)) | (man >> (52 - man_bits)) as u16
        } else {
            0
        };
        return sign | inf | nan;
    }
    if exp == 0 {
        // f64 subnormals are far below the smallest F16/BF16 subnormal.
        return sign;
    }
    let bias = (1i64 << (exp_bits - 1)) - 1;
    let e = exp - 1023;
    if e > bias {
        return sign | inf;
    }
    let emin = 1 - bias;
    let shift = (52 - man_bits as i64) + if e < emin { emin - e } else { 0 };
    if shift > 53 {
        // Below half the smallest subnormal: rounds to zero.
        return sign;
    }
    let m = (1u64 << 52) | man;
    let mut q = m >> shift;
    let rem = m & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q += 1;
    }
    // For normals q carries the implicit bit, so adding it to (e + bias - 1) << man_bits
    // gives the biased exponent; a carry out of the mantissa bumps the exponent by itself.
    let mag = if e < emin {
        q
    } else {
        (((e + bias - 1) as u64) << man_bits) + q
    };
    sign | (mag.min(u64::from(inf)) as u16)
}

fn narrow16(x: f64, to: DType, rounding: Rounding) -> u16 {
    match (to, rounding) {
        // f32 inputs widen to f64 exactly, so one correctly rounded path serves both.
        (DType::F16, Rounding::Nearest) => f64_to_narrow_nearest(x, 5, 10),
        (DType::BF16, Rounding::Nearest) => f64_to_narrow_nearest(x, 8, 7),
        // The connector goes through f32 (nearest) before truncating: so do we.
        (DType::F16, Rounding::Truncate) => f32_to_f16_truncate(x as f32),
        (DType::BF16, Rounding::Truncate) => f32_to_bf16_truncate(x as f32),
        _ => unreachable!("narrow16 is only called for F16 and BF16"),
    }
}

fn is_castable_float(d: DType) -> bool {
    matches!(d, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
}

/// Decodes one little-endian float element of `dtype` to f64 (exact for all four types).
fn read_f64(dtype: DType, b: &[u8]) -> f64 {
    match dtype {
        DType::F64 => f64::from_le_bytes(b.try_into().expect("8 bytes")),
        DType::F32 => f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes"))),
        DType::F16 => f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        DType::BF16 => bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        _ => unreachable!("checked by is_castable_float"),
    }
}

/// Elements per block of the F32 → 16-bit fast path (16 KiB of input on the stack).
const BLOCK: usize = 4096;

/// F32 to F16 or BF16, nearest even, through `half`'s slice conversions (the CPU's F16C
/// instructions where it has them), blocks in parallel: the same bits as the element-by-
/// element path through f64 (`f64_to_narrow_nearest`; f32 widens to f64 exactly) for every
/// f32, NaNs included (tested below), at many times its speed (it was 84% of a Q4_K GGUF to
/// F16 convert).
fn f32_to_16_nearest(data: &[u8], to: DType) -> Vec<u8> {
    use half::slice::HalfFloatSliceExt;
    use rayon::prelude::*;
    let mut out = vec![0u8; data.len() / 2];
    out.par_chunks_mut(BLOCK * 2)
        .zip(data.par_chunks(BLOCK * 4))
        .for_each(|(dst, src)| {
            let n = src.len() / 4;
            let mut x = [0f32; BLOCK];
            for (v, b) in x.iter_mut().zip(src.chunks_exact(4)) {
                *v = f32::from_le_bytes(b.try_into().expect("4 bytes"));
            }
            let mut bits = [0u16; BLOCK];
            match to {
                DType::F16 => {
                    let mut h = [f16::ZERO; BLOCK];
                    h[..n].convert_from_f32_slice(&x[..n]);
                    for (o, v) in bits.iter_mut().zip(&h[..n]) {
                        *o = v.to_bits();
                    }
                }
                _ => {
                    let mut h = [bf16::ZERO; BLOCK];
                    h[..n].convert_from_f32_slice(&x[..n]);
                    for (o, v) in bits.iter_mut().zip(&h[..n]) {
                        *o = v.to_bits();
                    }
                }
            }
            for ((o, v), x) in dst.chunks_exact_mut(2).zip(&bits[..n]).zip(&x[..n]) {
                let v = if x.is_nan() {
                    nan_bits(DType::F32, to, u64::from(x.to_bits())) as u16
                } else {
                    *v
                };
                o.copy_from_slice(&v.to_le_bytes());
            }
        });
    out
}

/// F16 bits to F32 bits: exact, a NaN's payload kept as it is (NumPy's widening; `half` and
/// the F16C instructions quiet a signalling NaN).
fn f16_to_f32_bits(h: u16) -> u32 {
    if f16::from_bits(h).is_nan() {
        nan_bits(DType::F16, DType::F32, u64::from(h)) as u32
    } else {
        f16::from_bits(h).to_f32().to_bits()
    }
}

/// F16 or BF16 to F32: exact (BF16 is F32's upper half; F16 through `half`), blocks in
/// parallel. The same values as the path through f64, and NaN payloads kept as NumPy's
/// widening keeps them ([`nan_bits`]).
fn widen_16(data: &[u8], from: DType) -> Vec<u8> {
    use rayon::prelude::*;
    let mut out = vec![0u8; data.len() * 2];
    out.par_chunks_mut(BLOCK * 4)
        .zip(data.par_chunks(BLOCK * 2))
        .for_each(|(dst, src)| {
            for (o, b) in dst.chunks_exact_mut(4).zip(src.chunks_exact(2)) {
                let h = u16::from_le_bytes([b[0], b[1]]);
                let bits = match from {
                    DType::BF16 => u32::from(h) << 16,
                    _ => f16_to_f32_bits(h),
                };
                o.copy_from_slice(&bits.to_le_bytes());
            }
        });
    out
}

/// Casts little-endian elements of `from` to `to`. Supports F64, F32, F16 and BF16 in any
/// direction; a same-type cast is a copy.
pub fn cast(data: &[u8], from: DType, to: DType, rounding: Rounding) -> Result<Vec<u8>> {
    if !is_castable_float(from) || !is_castable_float(to) {
        return Err(ErrorKind::UnsupportedCast {
            from: from.to_string(),
            to: to.to_string(),
        }
        .into());
    }
    let in_size = from.byte_size().expect("whole-byte float");
    let out_size = to.byte_size().expect("whole-byte float");
    if data.len() % in_size != 0 {
        return Err(ErrorKind::SizeMismatch {
            expected: (data.len() / in_size * in_size) as u64,
            actual: data.len() as u64,
        }
        .into());
    }
    if from == to {
        return Ok(data.to_vec());
    }
    if from == DType::F32 && rounding == Rounding::Nearest && matches!(to, DType::F16 | DType::BF16)
    {
        return Ok(f32_to_16_nearest(data, to));
    }
    if to == DType::F32 && matches!(from, DType::F16 | DType::BF16) {
        return Ok(widen_16(data, from));
    }
    let n = data.len() / in_size;
    let mut out = Vec::with_capacity(n * out_size);
    let narrow_truncated = rounding == Rounding::Truncate && out_size == 2;
    for chunk in data.chunks_exact(in_size) {
        let x = read_f64(from, chunk);
        if x.is_nan() && !narrow_truncated {
            // From the element's own bits: the trip through f64 may have quieted it.
            let mut raw = [0u8; 8];
            raw[..in_size].copy_from_slice(chunk);
            let bits = nan_bits(from, to, u64::from_le_bytes(raw));
            out.extend_from_slice(&bits.to_le_bytes()[..out_size]);
            continue;
        }
        match to {
            DType::F64 => out.extend_from_slice(&x.to_le_bytes()),
            // f64 → f32 is IEEE nearest-even in Rust; narrower inputs widen exactly.
            DType::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            _ => out.extend_from_slice(&narrow16(x, to, rounding).to_le_bytes()),
        }
    }
    Ok(out)
}

/// `values` become the F32 values of `data`, elements of `from` (F32 read as it is, F16 and
/// BF16 widened exactly, F64 rounded to nearest): [`cast`]'s values into a buffer the caller
/// reuses (the quantizer's chunks), without `cast`'s rayon tasks (its reader runs beside
/// the quantizer's).
pub fn f32s_into(data: &[u8], from: DType, values: &mut Vec<f32>) -> Result<()> {
    values.clear();
    match from {
        DType::F32 => values.extend(
            data.chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))),
        ),
        DType::BF16 => values.extend(
            data.chunks_exact(2)
                .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)),
        ),
        DType::F16 => {
            // Through `half`'s slice conversion: the CPU's F16C instructions where it has them.
            use half::slice::HalfFloatSliceExt;
            let mut h = [f16::ZERO; BLOCK];
            let mut f = [0f32; BLOCK];
            for src in data.chunks(BLOCK * 2) {
                let n = src.len() / 2;
                let mut nan = false;
                for (d, c) in h.iter_mut().zip(src.chunks_exact(2)) {
                    *d = f16::from_bits(u16::from_le_bytes([c[0], c[1]]));
                    nan |= d.is_nan();
                }
                h[..n].convert_to_f32_slice(&mut f[..n]);
                if nan {
                    // The slice conversion quiets signalling NaNs; NumPy keeps their bits.
                    for (v, h) in f[..n].iter_mut().zip(&h[..n]) {
                        if h.is_nan() {
                            *v = f32::from_bits(f16_to_f32_bits(h.to_bits()));
                        }
                    }
                }
                values.extend_from_slice(&f[..n]);
            }
        }
        _ => values.extend(
            cast(data, from, DType::F32, Rounding::Nearest)?
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))),
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_of(x: f32, r: Rounding) -> u16 {
        let out = cast(&x.to_le_bytes(), DType::F32, DType::F16, r).unwrap();
        u16::from_le_bytes([out[0], out[1]])
    }

    #[test]
    fn nearest_rounds_ties_to_even_and_keeps_subnormals() {
        // 1 + 2^-11 is halfway between 1.0 and the next f16: ties to even (1.0).
        assert_eq!(f16_of(1.0 + 2f32.powi(-11), Rounding::Nearest), 0x3c00);
        // 1 + 3*2^-11 is halfway between two values: ties to the even one above.
        assert_eq!(
            f16_of(1.0 + 3.0 * 2f32.powi(-11), Rounding::Nearest),
            0x3c02
        );
        assert_eq!(f16_of(2f32.powi(-24), Rounding::Nearest), 0x0001);
        assert_eq!(f16_of(65520.0, Rounding::Nearest), 0x7c00);
    }

    #[test]
    fn widening_is_exact_for_every_16_bit_pattern() {
        for from in [DType::F16, DType::BF16] {
            let all: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
            let got = cast(&all, from, DType::F32, Rounding::Nearest).unwrap();
            for (h, out) in (0..=u16::MAX).zip(got.chunks_exact(4)) {
                let x = f32::from_le_bytes(out.try_into().unwrap());
                let want = read_f64(from, &h.to_le_bytes());
                if want.is_nan() {
                    assert!(x.is_nan() && x.is_sign_negative() == want.is_sign_negative());
                } else {
                    assert_eq!(x.to_bits(), (want as f32).to_bits(), "{from} {h:#06x}");
                }
            }
        }
    }

    #[test]
    fn truncate_matches_the_spark_connector() {
        assert_eq!(
            f16_of(1.0 + 3.0 * 2f32.powi(-11), Rounding::Truncate),
            0x3c01
        );
        assert_eq!(f16_of(2f32.powi(-24), Rounding::Truncate), 0x0000);
        assert_eq!(f16_of(-2f32.powi(-20), Rounding::Truncate), 0x8000);
        assert_eq!(f16_of(65535.0, Rounding::Truncate), 0x7bff);
        assert_eq!(f16_of(65536.0, Rounding::Truncate), 0x7c00);
        assert_eq!(f16_of(f32::NAN, Rounding::Truncate), 0x7e00);
        assert_eq!(f16_of(f32::NEG_INFINITY, Rounding::Truncate), 0xfc00);
        assert_eq!(f32_to_bf16_truncate(f32::from_bits(0x3f80_ffff)), 0x3f80);
        assert_eq!(
            bf16::from_f32(f32::from_bits(0x3f80_ffff)).to_bits(),
            0x3f81
        );
    }

    /// A NaN stays a NaN under every cast, signalling ones included: a BF16 truncation that
    /// kept the top 16 bits of 0x7f80_0001 would make an infinity of it. Run in the optimised
    /// profile too, where the trip through f64 that quiets a signalling NaN is folded away.
    #[test]
    fn signalling_nans_stay_nans() {
        for bits in [
            0x7f80_0001u32,
            0xff80_0001,
            0x7f80_ffff,
            0x7f81_2345,
            0x7fc0_0000,
        ] {
            let x = f32::from_bits(bits);
            assert!(x.is_nan());
            for to in [DType::F16, DType::BF16] {
                for r in [Rounding::Nearest, Rounding::Truncate] {
                    let out = cast(&x.to_le_bytes(), DType::F32, to, r).unwrap();
                    let h = u16::from_le_bytes([out[0], out[1]]);
                    let (nan, sign) = match to {
                        DType::F16 => (
                            f16::from_bits(h).is_nan(),
                            f16::from_bits(h).is_sign_negative(),
                        ),
                        _ => (
                            bf16::from_bits(h).is_nan(),
                            bf16::from_bits(h).is_sign_negative(),
                        ),
                    };
                    assert!(nan, "{bits:#010x} to {to} ({r:?}) gave {h:#06x}");
                    assert_eq!(sign, x.is_sign_negative(), "{bits:#010x} to {to} ({r:?})");
                }
            }
            assert!(
                bf16::from_bits(f32_to_bf16_truncate(x)).is_nan(),
                "{bits:#010x}"
            );
            assert!(
                f16::from_bits(f32_to_f16_truncate(x)).is_nan(),
                "{bits:#010x}"
            );
        }
    }

    /// NaNs as NumPy 2.4.6 (F16, F32, F64) and ml_dtypes 0.6.0 (BF16) cast them, on x86-64:
    /// `np.array([bits], np.uint32).view(np.float32).astype(np.float16)` and so on.
    #[test]
    fn nans_are_cast_as_numpy_casts_them() {
        use DType::{BF16, F16, F32, F64};
        let cases: &[(DType, u64, DType, u64)] = &[
            (F32, 0x7f80_0001, F16, 0x7c01),
            (F32, 0xff80_0001, F16, 0xfc01),
            (F32, 0x7fa0_0000, F16, 0x7d00),
            (F32, 0x7fc0_0001, F16, 0x7e00),
            (F32, 0x7fc0_2000, F16, 0x7e01),
            (F32, 0xffbf_ffff, F16, 0xfdff),
            (F32, 0x7fdd_0000, F16, 0x7ee8),
            (F32, 0x7f80_0001, BF16, 0x7fc0),
            (F32, 0xffbf_ffff, BF16, 0xffc0),
            (F32, 0x7fdd_0000, BF16, 0x7fc0),
            (F32, 0x7f80_0001, F64, 0x7ff8_0000_2000_0000),
            (F32, 0x7fa0_0000, F64, 0x7ffc_0000_0000_0000),
            (F32, 0xffbf_ffff, F64, 0xffff_ffff_e000_0000),
            (F64, 0x7ff0_0000_0000_0001, F16, 0x7c01),
            (F64, 0x7ff4_0000_0000_0000, F16, 0x7d00),
            (F64, 0xfff8_0000_0000_0001, F16, 0xfe00),
            (F64, 0x7ff0_0400_0000_0000, F16, 0x7c01),
            (F64, 0x7ff0_0000_0000_0001, BF16, 0x7fc0),
            (F64, 0xfff8_0000_0000_0001, BF16, 0xffc0),
            (F64, 0x7ff0_0000_0000_0001, F32, 0x7fc0_0000),
            (F64, 0x7ff4_0000_0000_0000, F32, 0x7fe0_0000),
            (F64, 0xfff8_0000_0000_0001, F32, 0xffc0_0000),
            (F64, 0x7ff0_0400_0000_0000, F32, 0x7fc0_2000),
            (F16, 0x7c01, F32, 0x7f80_2000),
            (F16, 0xfc01, F32, 0xff80_2000),
            (F16, 0x7d00, F32, 0x7fa0_0000),
            (F16, 0x7e01, F32, 0x7fc0_2000),
            (F16, 0x7fff, F32, 0x7fff_e000),
            (F16, 0x7c01, F64, 0x7ff0_0400_0000_0000),
            (F16, 0xfc01, F64, 0xfff0_0400_0000_0000),
            (F16, 0x7fff, F64, 0x7fff_fc00_0000_0000),
            (F16, 0x7c01, BF16, 0x7fc0),
            (F16, 0xfc01, BF16, 0xffc0),
            (BF16, 0x7f81, F32, 0x7f81_0000),
            (BF16, 0xff81, F32, 0xff81_0000),
            (BF16, 0x7fa0, F32, 0x7fa0_0000),
            (BF16, 0x7f81, F64, 0x7ff8_2000_0000_0000),
            (BF16, 0x7fa0, F64, 0x7ffc_0000_0000_0000),
            (BF16, 0x7f81, F16, 0x7e00),
            (BF16, 0xff81, F16, 0xfe00),
            (BF16, 0x7fc1, F16, 0x7e00),
        ];
        for &(from, bits, to, want) in cases {
            assert_eq!(nan_bits(from, to, bits), want, "{from} {bits:#x} to {to}");
            // And through cast, each element alone and among others (the fast paths).
            let size = from.byte_size().unwrap();
            let one = &bits.to_le_bytes()[..size];
            let mut many = Vec::new();
            for i in 0..5000 {
                many.extend_from_slice(if i % 7 == 3 { one } else { &[0u8; 8][..size] });
            }
            let out_size = to.byte_size().unwrap();
            for data in [one.to_vec(), many] {
                let out = cast(&data, from, to, Rounding::Nearest).unwrap();
                for (i, o) in out.chunks_exact(out_size).enumerate() {
                    let mut raw = [0u8; 8];
                    raw[..out_size].copy_from_slice(o);
                    let got = u64::from_le_bytes(raw);
                    let expect = if data.len() == size || i % 7 == 3 {
                        want
                    } else {
                        0
                    };
                    assert_eq!(got, expect, "{from} {bits:#x} to {to}, element {i}");
                }
            }
        }
        // The scalar functions the dataset writer uses.
        assert_eq!(f32_to_f16_nearest(f32::from_bits(0x7f80_0001)), 0x7c01);
        assert_eq!(f32_to_bf16_nearest(f32::from_bits(0xffbf_ffff)), 0xffc0);
        assert_eq!(f32_to_bf16_nearest(1.0 + 2f32.powi(-8)), 0x3f80);
        assert_eq!(f32_to_f16_nearest(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
    }

    #[test]
    fn f64_to_f16_nearest_has_no_double_rounding() {
        // Just above the f16 tie point between 1.0 and 1+2^-10: must round up. Going through
        // f32 first would land exactly on the tie and round down to 1.0.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        let out = cast(&x.to_le_bytes(), DType::F64, DType::F16, Rounding::Nearest).unwrap();
        assert_eq!(u16::from_le_bytes([out[0], out[1]]), 0x3c01);
    }

    #[test]
    fn nearest_agrees_with_half_for_every_f32_pattern_sampled() {
        // half's f32 paths are correctly rounded: compare on a spread of bit patterns.
        let mut x: u32 = 0x1234_5678;
        for _ in 0..2_000_000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let v = f32::from_bits(x);
            if v.is_nan() {
                continue;
            }
            let w = f64::from(v);
            assert_eq!(
                f64_to_narrow_nearest(w, 5, 10),
                f16::from_f32(v).to_bits(),
                "{v:e}"
            );
            assert_eq!(
                f64_to_narrow_nearest(w, 8, 7),
                bf16::from_f32(v).to_bits(),
                "{v:e}"
            );
        }
    }

    #[test]
    fn the_f32_fast_path_gives_the_f64_paths_bits_nans_included() {
        // Sampled patterns (NaNs, infinities, subnormals, ties among them) plus edge values,
        // over several blocks with a short tail: every element as the f64 path rounds it.
        let mut x: u32 = 0x9e37_79b9;
        let mut v: Vec<u32> = vec![
            0x7f80_0001,
            0xff80_0001,
            0x7fc0_0000,
            0x7fbf_ffff,
            0x7f80_0000,
            0xff80_0000,
            0x0000_0001,
            0x8000_0000,
            0x3380_0000,
            0x3380_0001,
            0x477f_f000,
            0x477f_efff,
        ];
        for _ in 0..3 * BLOCK + 37 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            v.push(x);
        }
        let bytes: Vec<u8> = v.iter().flat_map(|b| b.to_le_bytes()).collect();
        for (to, exp, man) in [(DType::F16, 5, 10), (DType::BF16, 8, 7)] {
            let fast = cast(&bytes, DType::F32, to, Rounding::Nearest).unwrap();
            for (i, b) in v.iter().enumerate() {
                let want = if f32::from_bits(*b).is_nan() {
                    nan_bits(DType::F32, to, u64::from(*b)) as u16
                } else {
                    f64_to_narrow_nearest(f64::from(f32::from_bits(*b)), exp, man)
                };
                let got = u16::from_le_bytes([fast[2 * i], fast[2 * i + 1]]);
                assert_eq!(got, want, "{to:?} of {b:#010x}");
            }
        }
    }

    #[test]
    fn widening_is_exact_and_other_types_are_refused() {
        let h = f16::from_f32(0.333).to_bits().to_le_bytes();
        let out = cast(&h, DType::F16, DType::F32, Rounding::Nearest).unwrap();
        assert_eq!(
            f32::from_le_bytes(out.try_into().unwrap()),
            f16::from_f32(0.333).to_f32()
        );
        assert!(cast(&[0; 4], DType::I32, DType::F16, Rounding::Nearest).is_err());
        assert!(cast(&[0; 3], DType::F16, DType::F32, Rounding::Nearest).is_err());
    }

    /// The quantizer's widening gives `cast`'s values, bit for bit, for every F16 and BF16
    /// pattern (NaN payloads included), and F32 and F64 chunks as `cast` reads them.
    #[test]
    fn chunks_widen_as_cast_does() {
        let all16: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
        let f64s: Vec<u8> = [0.1f64, -3.5e300, 1e-320, f64::NAN, f64::INFINITY]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let f32s: Vec<u8> = [0.1f32, -0.0, f32::MIN_POSITIVE / 3.0, f32::NAN]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let mut values = vec![7.0f32; 3];
        for (from, b) in [
            (DType::F16, &all16),
            (DType::BF16, &all16),
            (DType::F32, &f32s),
            (DType::F64, &f64s),
        ] {
            f32s_into(b, from, &mut values).unwrap();
            let want: Vec<u32> = cast(b, from, DType::F32, Rounding::Nearest)
                .unwrap()
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let got: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{from}");
        }
    }
}
