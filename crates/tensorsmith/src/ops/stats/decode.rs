//! Little-endian element bytes made into the values `stats` measures: floats of 16 bits or
//! fewer widened exactly to F32 (BF16 by a shift, F16 through `half`'s slice conversion, the
//! FP8 types through 256-entry tables), with a count of the values that are subnormal in
//! their own dtype; integers (packed 4- and 2-bit ones included, lowest bits first) widened to
//! i128. Which dtypes are measured, and why the others are not, is decided here.

use crate::dtype::DType;
use half::slice::HalfFloatSliceExt;
use std::sync::OnceLock;

/// How a dtype's values are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Widened to F32 exactly.
    F32(FloatSrc),
    /// Measured as F64.
    F64,
    /// Integers (BOOL as 0/1 bytes).
    Int(DType),
}

/// A float dtype that widens to F32 exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatSrc {
    F32,
    BF16,
    F16,
    /// One of the 8-bit float types, by its table.
    F8(DType),
}

impl FloatSrc {
    /// Bytes per element.
    pub fn width(self) -> usize {
        match self {
            FloatSrc::F32 => 4,
            FloatSrc::BF16 | FloatSrc::F16 => 2,
            FloatSrc::F8(_) => 1,
        }
    }
}

/// How `dtype` is measured, or why it is not.
pub fn kind(dtype: DType) -> Result<Kind, String> {
    use DType::*;
    Ok(match dtype {
        F32 => Kind::F32(FloatSrc::F32),
        BF16 => Kind::F32(FloatSrc::BF16),
        F16 => Kind::F32(FloatSrc::F16),
        F8_E5M2 | F8_E4M3 | F8_E8M0 | F8_E4M3FNUZ | F8_E5M2FNUZ => Kind::F32(FloatSrc::F8(dtype)),
        F64 => Kind::F64,
        BOOL | U8 | I8 | I16 | U16 | I32 | U32 | I64 | U64 | I4 | I2 | U4 | U2 => Kind::Int(dtype),
        C64 | C128 => {
            return Err(format!(
                "{dtype} is complex: min, max and the float classes are not defined for it"
            ))
        }
        F4 | F6_E2M3 | F6_E3M2 => {
            return Err(format!(
                "{dtype} packs sub-byte floats in an order the format does not fix"
            ))
        }
    })
}

/// Widens `bytes` (whole elements of `src`) into `out` (one value per element); returns how
/// many are subnormal in `src` itself.
pub fn decode_f32(src: FloatSrc, bytes: &[u8], out: &mut [f32]) -> u64 {
    debug_assert_eq!(bytes.len(), out.len() * src.width());
    match src {
        FloatSrc::F32 => {
            let mut sub = 0u32;
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                let b = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                let a = b & 0x7fff_ffff;
                sub += u32::from(a.wrapping_sub(1) < 0x007f_ffff);
                *o = f32::from_bits(b);
            }
            u64::from(sub)
        }
        FloatSrc::BF16 => {
            let mut sub = 0u32;
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                let b = u16::from_le_bytes([c[0], c[1]]);
                let a = b & 0x7fff;
                sub += u32::from(a.wrapping_sub(1) < 0x007f);
                *o = f32::from_bits(u32::from(b) << 16);
            }
            u64::from(sub)
        }
        FloatSrc::F16 => {
            let mut bits = [half::f16::ZERO; 1024];
            let mut sub = 0u32;
            for (o, c) in out.chunks_mut(1024).zip(bytes.chunks(2048)) {
                let bits = &mut bits[..o.len()];
                for (h, p) in bits.iter_mut().zip(c.chunks_exact(2)) {
                    let b = u16::from_le_bytes([p[0], p[1]]);
                    sub += u32::from((b & 0x7fff).wrapping_sub(1) < 0x03ff);
                    *h = half::f16::from_bits(b);
                }
                bits.convert_to_f32_slice(o);
            }
            u64::from(sub)
        }
        FloatSrc::F8(d) => {
            let t = f8_table(d);
            let mut sub = 0u32;
            for (o, &b) in out.iter_mut().zip(bytes) {
                *o = t.values[b as usize];
                sub += u32::from(t.subnormal[b as usize]);
            }
            u64::from(sub)
        }
    }
}

/// Bit pattern `p` of a float dtype of 16 bits or fewer: its value (exact in F32) and
/// whether it is subnormal in that dtype. (F32 is not a pattern type: callers pass BF16, F16
/// or an FP8 type.)
pub fn pattern(src: FloatSrc, p: u32) -> (f32, bool) {
    match src {
        FloatSrc::BF16 => (f32::from_bits(p << 16), (p & 0x7fff).wrapping_sub(1) < 0x7f),
        FloatSrc::F16 => (
            half::f16::from_bits(p as u16).to_f32(),
            (p & 0x7fff).wrapping_sub(1) < 0x3ff,
        ),
        FloatSrc::F8(d) => {
            let t = f8_table(d);
            (t.values[p as usize & 0xff], t.subnormal[p as usize & 0xff])
        }
        FloatSrc::F32 => (f32::from_bits(p), false),
    }
}

/// An 8-bit float type's values and which of them are subnormal.
pub struct F8Table {
    pub values: [f32; 256],
    pub subnormal: [bool; 256],
}

/// Where an 8-bit type keeps NaN (and infinities).
#[derive(Clone, Copy)]
enum Special {
    /// IEEE-like: the top exponent is infinity (mantissa 0) or NaN.
    Ieee,
    /// "FN": no infinities; only the all-ones pattern (either sign) is NaN.
    Fn,
    /// "FNUZ": no infinities, no negative zero; 0x80 is NaN.
    Fnuz,
}

fn build(exp_bits: u32, man_bits: u32, bias: i32, special: Special) -> F8Table {
    let mut t = F8Table {
        values: [0.0; 256],
        subnormal: [false; 256],
    };
    let top = (1u32 << exp_bits) - 1;
    for b in 0..256u32 {
        let sign = if b & 0x80 != 0 { -1.0f64 } else { 1.0 };
        let e = (b >> man_bits) & top;
        let m = b & ((1 << man_bits) - 1);
        let frac = f64::from(m) / f64::from(1u32 << man_bits);
        let v = match special {
            Special::Ieee if e == top => {
                if m == 0 {
                    sign * f64::INFINITY
                } else {
                    f64::NAN
                }
            }
            Special::Fn if e == top && m == (1 << man_bits) - 1 => f64::NAN,
            Special::Fnuz if b == 0x80 => f64::NAN,
            _ if e == 0 => {
                t.subnormal[b as usize] = m != 0;
                sign * frac * 2f64.powi(1 - bias)
            }
            _ => sign * (1.0 + frac) * 2f64.powi(e as i32 - bias),
        };
        t.values[b as usize] = v as f32;
    }
    t
}

fn e8m0() -> F8Table {
    let mut t = F8Table {
        values: [0.0; 256],
        subnormal: [false; 256],
    };
    for b in 0..256usize {
        t.values[b] = if b == 255 {
            f32::NAN
        } else {
            2f64.powi(b as i32 - 127) as f32
        };
    }
    t
}

/// The table of one 8-bit float dtype (panics for any other dtype: callers pass what
/// [`kind`] gave).
pub fn f8_table(d: DType) -> &'static F8Table {
    static T: [OnceLock<F8Table>; 5] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let (i, f): (usize, fn() -> F8Table) = match d {
        DType::F8_E4M3 => (0, || build(4, 3, 7, Special::Fn)),
        DType::F8_E5M2 => (1, || build(5, 2, 15, Special::Ieee)),
        DType::F8_E4M3FNUZ => (2, || build(4, 3, 8, Special::Fnuz)),
        DType::F8_E5M2FNUZ => (3, || build(5, 2, 16, Special::Fnuz)),
        DType::F8_E8M0 => (4, e8m0),
        _ => unreachable!("f8_table of {d}"),
    };
    T[i].get_or_init(f)
}

/// Elements packed in one byte for sub-byte integer dtypes, 1 otherwise.
pub fn per_byte(d: DType) -> usize {
    match d {
        DType::I4 | DType::U4 => 2,
        DType::I2 | DType::U2 => 4,
        _ => 1,
    }
}

/// Bytes per element of an integer dtype (1 for packed ones: a byte holds several).
pub fn int_width(d: DType) -> usize {
    d.byte_size().unwrap_or(1)
}

/// Appends the first `limit` integers of `bytes` (whole elements of `d`) to `out`.
pub fn decode_int(d: DType, bytes: &[u8], limit: usize, out: &mut Vec<i128>) {
    use DType::*;
    let start = out.len();
    macro_rules! le {
        ($t:ty, $n:expr) => {
            out.extend(
                bytes
                    .chunks_exact($n)
                    .map(|c| i128::from(<$t>::from_le_bytes(c.try_into().expect("whole")))),
            )
        };
    }
    match d {
        BOOL | U8 => out.extend(bytes.iter().map(|&b| i128::from(b))),
        I8 => out.extend(bytes.iter().map(|&b| i128::from(b as i8))),
        I16 => le!(i16, 2),
        U16 => le!(u16, 2),
        I32 => le!(i32, 4),
        U32 => le!(u32, 4),
        I64 => le!(i64, 8),
        U64 => le!(u64, 8),
        I4 | U4 | I2 | U2 => {
            let bits = 8 / per_byte(d) as u32;
            let mask = (1u8 << bits) - 1;
            let signed = matches!(d, I4 | I2);
            for &b in bytes {
                for k in 0..per_byte(d) as u32 {
                    let v = (b >> (k * bits)) & mask;
                    let v = if signed && v >> (bits - 1) == 1 {
                        i128::from(v) - (1i128 << bits)
                    } else {
                        i128::from(v)
                    };
                    out.push(v);
                }
            }
        }
        _ => {}
    }
    out.truncate(start + limit);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_tables_hold_the_known_values() {
        let e4 = f8_table(DType::F8_E4M3);
        assert_eq!(e4.values[0x7e], 448.0);
        assert!(e4.values[0x7f].is_nan() && e4.values[0xff].is_nan());
        assert_eq!(e4.values[0x01], 2f32.powi(-9));
        assert!(e4.subnormal[0x01] && e4.subnormal[0x87] && !e4.subnormal[0x08]);
        assert_eq!(e4.values[0x80], -0.0);
        let e5 = f8_table(DType::F8_E5M2);
        assert_eq!(e5.values[0x7b], 57344.0);
        assert_eq!(e5.values[0x7c], f32::INFINITY);
        assert_eq!(e5.values[0xfc], f32::NEG_INFINITY);
        assert!(e5.values[0x7d].is_nan());
        // E5M2 is the top byte of F16.
        for b in 0..=255u16 {
            let h = half::f16::from_bits(b << 8).to_f32();
            let v = e5.values[b as usize];
            assert!(h == v || (h.is_nan() && v.is_nan()), "{b:#x}");
        }
        let fnuz = f8_table(DType::F8_E4M3FNUZ);
        assert!(fnuz.values[0x80].is_nan());
        assert_eq!(fnuz.values[0x7f], 240.0);
        assert_eq!(f8_table(DType::F8_E5M2FNUZ).values[0x7f], 57344.0);
        let m = f8_table(DType::F8_E8M0);
        assert_eq!((m.values[127], m.values[0]), (1.0, 2f32.powi(-127)));
        assert!(m.values[255].is_nan());
    }

    #[test]
    fn widening_counts_subnormals_in_the_source_dtype() {
        let mut out = [0f32; 4];
        // F16: 0x0001 and 0x83ff subnormal, 0x0400 normal, zero not.
        let b: Vec<u8> = [0x0001u16, 0x83ff, 0x0400, 0x0000]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(decode_f32(FloatSrc::F16, &b, &mut out), 2);
        assert_eq!(out[0], 2f32.powi(-24));
        let b: Vec<u8> = [0x0001u16, 0x8080, 0x007f, 0x8000]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(decode_f32(FloatSrc::BF16, &b, &mut out), 2);
        assert_eq!(out[1], -2f32.powi(-126));
        let b: Vec<u8> = [1u32, 0x8000_0000, 0x0080_0000, 0x807f_ffff]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(decode_f32(FloatSrc::F32, &b, &mut out), 2);
    }

    #[test]
    fn packed_integers_lowest_bits_first() {
        let mut v = Vec::new();
        decode_int(DType::I4, &[0x8f, 0x71], 3, &mut v);
        assert_eq!(v, vec![-1, -8, 1]);
        v.clear();
        decode_int(DType::U2, &[0b1110_0100], 4, &mut v);
        assert_eq!(v, vec![0, 1, 2, 3]);
        v.clear();
        decode_int(DType::U64, &u64::MAX.to_le_bytes(), 1, &mut v);
        assert_eq!(v, vec![i128::from(u64::MAX)]);
        assert!(kind(DType::C64).is_err() && kind(DType::F4).is_err());
    }
}
