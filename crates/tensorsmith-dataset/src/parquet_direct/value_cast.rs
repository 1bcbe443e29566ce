//! Values as Parquet stores them (PLAIN, little-endian) to the bytes of the dataset dtype,
//! with the same bits as the reader path (arrow_values.rs): the same dtype is a copy, floats
//! go through `tensorsmith::cast` (F16/BF16 nearest-even or truncated), integers widen
//! exactly; a finite value beyond the target's range is an error, as on the reader path.
//! Every other pair is left to the reader.

use crate::finite_range::first_overflow;
use tensorsmith::cast::{
    cast, f32_to_bf16_nearest, f32_to_bf16_truncate, f32_to_f16_nearest, f32_to_f16_truncate,
    Rounding,
};
use tensorsmith::dtype::DType;

/// How values of a stored dtype become the target dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ValueCast {
    pub from: DType,
    pub to: DType,
    pub rounding: Rounding,
}

impl ValueCast {
    /// The cast from `from` to `to`, when decoding can do it.
    pub fn new(from: DType, to: DType, rounding: Rounding) -> Option<ValueCast> {
        let float = |d| matches!(d, DType::F64 | DType::F32 | DType::F16 | DType::BF16);
        let ok = from == to
            || (float(from) && float(to))
            || matches!(
                (from, to),
                (DType::I32, DType::I64) | (DType::U32, DType::U64) | (DType::U32, DType::I64)
            );
        ok.then_some(ValueCast { from, to, rounding })
    }

    pub fn is_copy(&self) -> bool {
        self.from == self.to
    }

    /// Bytes of one stored value.
    pub fn stored_width(&self) -> usize {
        self.from.byte_size().expect("whole-byte dtype")
    }

    /// Bytes of one target value.
    pub fn target_width(&self) -> usize {
        self.to.byte_size().expect("whole-byte dtype")
    }

    /// Appends `src` (whole stored values) to `out` as the target dtype. A finite value
    /// beyond the target's range (one that became an infinity) fails with its index in
    /// `src`, as on the reader path (finite_range.rs).
    pub fn append(&self, src: &[u8], out: &mut Vec<u8>) -> Result<(), usize> {
        let start = out.len();
        self.convert(src, out);
        match first_overflow(self.from, src, self.to, &out[start..]) {
            Some(i) => Err(i),
            None => Ok(()),
        }
    }

    fn convert(&self, src: &[u8], out: &mut Vec<u8>) {
        if self.is_copy() {
            out.extend_from_slice(src);
            return;
        }
        match (self.from, self.to) {
            (DType::I32, DType::I64) => {
                for v in src.chunks_exact(4) {
                    let x = i32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                    out.extend_from_slice(&i64::from(x).to_le_bytes());
                }
            }
            (DType::U32, DType::U64 | DType::I64) => {
                for v in src.chunks_exact(4) {
                    out.extend_from_slice(&[v[0], v[1], v[2], v[3], 0, 0, 0, 0]);
                }
            }
            (DType::F32, DType::BF16 | DType::F16) => {
                let narrow = narrow_f32(self.to, self.rounding);
                out.reserve(src.len() / 2);
                for v in src.chunks_exact(4) {
                    let x = f32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                    out.extend_from_slice(&narrow(x).to_le_bytes());
                }
            }
            (from, to) => {
                let c = cast(src, from, to, self.rounding).expect("float casts are checked by new");
                out.extend_from_slice(&c);
            }
        }
    }
}

/// F32 to BF16 / F16 a value at a time, with the bits of `tensorsmith::cast` (tested against
/// it below): its scalar functions, NaNs as NumPy makes them included.
fn narrow_f32(to: DType, rounding: Rounding) -> fn(f32) -> u16 {
    match (to, rounding) {
        (DType::BF16, Rounding::Nearest) => f32_to_bf16_nearest,
        (DType::F16, Rounding::Nearest) => f32_to_f16_nearest,
        (DType::BF16, Rounding::Truncate) => f32_to_bf16_truncate,
        (DType::F16, Rounding::Truncate) => f32_to_f16_truncate,
        _ => unreachable!("only F32 to BF16 or F16"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widenings_and_float_casts_give_the_readers_bits() {
        let c = ValueCast::new(DType::I32, DType::I64, Rounding::Nearest).unwrap();
        let mut out = Vec::new();
        c.append(&(-5i32).to_le_bytes(), &mut out).unwrap();
        assert_eq!(out, (-5i64).to_le_bytes());
        let c = ValueCast::new(DType::U32, DType::I64, Rounding::Nearest).unwrap();
        out.clear();
        c.append(&u32::MAX.to_le_bytes(), &mut out).unwrap();
        assert_eq!(out, i64::from(u32::MAX).to_le_bytes());
        for r in [Rounding::Nearest, Rounding::Truncate] {
            let c = ValueCast::new(DType::F32, DType::BF16, r).unwrap();
            out.clear();
            let x = 1.0f32 + f32::EPSILON * 3.0 * 65536.0;
            c.append(&x.to_le_bytes(), &mut out).unwrap();
            assert_eq!(
                out,
                cast(&x.to_le_bytes(), DType::F32, DType::BF16, r).unwrap()
            );
        }
        // F32 to BF16 / F16 a value at a time: the cast's bits for a spread of every f32 bit
        // pattern (every exponent, ties, subnormals, infinities, NaNs).
        let mut bits: Vec<u32> = (0..=u32::MAX).step_by(2039).collect();
        for e in 0..256u32 {
            for m in [
                0, 1, 0x7fff, 0x8000, 0x8001, 0x17fff, 0x18000, 0xfff, 0x1000, 0x1001, 0x3000,
                0x7f_ffff,
            ] {
                bits.extend([(e << 23) | m, 0x8000_0000 | (e << 23) | m]);
            }
        }
        let src: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        for to in [DType::BF16, DType::F16] {
            for r in [Rounding::Nearest, Rounding::Truncate] {
                let mut out = Vec::new();
                ValueCast::new(DType::F32, to, r)
                    .unwrap()
                    .convert(&src, &mut out);
                assert!(out == cast(&src, DType::F32, to, r).unwrap(), "{to} {r:?}");
            }
        }
        // A finite value that becomes an infinity fails, naming it; infinities stay.
        let c = ValueCast::new(DType::F64, DType::F32, Rounding::Nearest).unwrap();
        let src: Vec<u8> = [f64::INFINITY, 2.0, 1e300]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(c.append(&src, &mut Vec::new()), Err(2));
        assert_eq!(c.append(&src[..16], &mut Vec::new()), Ok(()));
        // Float to integer and integer to float: the reader's.
        assert!(ValueCast::new(DType::F32, DType::I32, Rounding::Nearest).is_none());
        assert!(ValueCast::new(DType::I32, DType::F32, Rounding::Nearest).is_none());
        assert!(ValueCast::new(DType::I64, DType::I32, Rounding::Nearest).is_none());
    }
}
