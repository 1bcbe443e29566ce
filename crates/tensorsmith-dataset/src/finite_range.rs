//! The rule for a value its target dtype cannot hold: a finite input value that converts to an
//! infinity (beyond the target's finite range, after rounding) is an error, as an integer out
//! of an integer dtype's range is. A NaN or infinity already in the input stays what it is.
//! Used by every conversion into a float dtype: the Parquet reader path (arrow_values.rs),
//! the tensor struct (column.rs) and pages decoded straight into shards (parquet_direct).

use tensorsmith::dtype::DType;

/// Whether some finite value of `from` converts to an infinity in `to`.
pub(crate) fn can_overflow(from: DType, to: DType) -> bool {
    match to {
        DType::F16 => from != DType::F16,
        DType::BF16 => matches!(from, DType::F32 | DType::F64),
        DType::F32 => from == DType::F64,
        _ => false,
    }
}

/// The first element of `src` (little-endian `from`) that is finite while its conversion in
/// `out` (little-endian `to`, element for element) is infinite.
pub(crate) fn first_overflow(from: DType, src: &[u8], to: DType, out: &[u8]) -> Option<usize> {
    if !can_overflow(from, to) {
        return None;
    }
    out.chunks_exact(width(to))
        .zip(src.chunks_exact(width(from)))
        .position(|(o, i)| is_infinite(to, o) && !is_infinite_or_nan(from, i))
}

/// Element `i` of `src` (little-endian `from`) as text, for an error message.
pub(crate) fn value_text(from: DType, src: &[u8], i: usize) -> String {
    let w = width(from);
    let b = &src[i * w..(i + 1) * w];
    let mut le = [0u8; 8];
    le[..w].copy_from_slice(b);
    let u = u64::from_le_bytes(le);
    match from {
        // Debug: 1e300, not three hundred digits.
        DType::F64 => format!("{:?}", f64::from_bits(u)),
        DType::F32 => format!("{:?}", f32::from_bits(u as u32)),
        DType::F16 => format!("{:?}", half::f16::from_bits(u as u16).to_f32()),
        DType::BF16 => format!("{:?}", half::bf16::from_bits(u as u16).to_f32()),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => u.to_string(),
        // Sign-extend the `w` bytes.
        _ => (((u << (64 - 8 * w)) as i64) >> (64 - 8 * w)).to_string(),
    }
}

fn width(d: DType) -> usize {
    d.byte_size().expect("whole-byte dtype")
}

/// Whether the float `b` (of `d`) is infinite; integers never are.
fn is_infinite(d: DType, b: &[u8]) -> bool {
    match d {
        DType::F16 => u16::from_le_bytes([b[0], b[1]]) & 0x7fff == 0x7c00,
        DType::BF16 => u16::from_le_bytes([b[0], b[1]]) & 0x7fff == 0x7f80,
        DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_infinite(),
        DType::F64 => f64::from_le_bytes(b.try_into().expect("8 bytes")).is_infinite(),
        _ => false,
    }
}

/// Whether the float `b` (of `d`) is not finite; integers always are finite.
fn is_infinite_or_nan(d: DType, b: &[u8]) -> bool {
    match d {
        DType::F16 => u16::from_le_bytes([b[0], b[1]]) & 0x7c00 == 0x7c00,
        DType::BF16 => u16::from_le_bytes([b[0], b[1]]) & 0x7f80 == 0x7f80,
        DType::F32 => !f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite(),
        DType::F64 => !f64::from_le_bytes(b.try_into().expect("8 bytes")).is_finite(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorsmith::cast::{cast, Rounding};

    fn bytes64(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn finite_values_that_become_infinite_are_found_and_infinities_kept() {
        let src = bytes64(&[f64::INFINITY, f64::NAN, 1.0, 1e300]);
        for (to, r) in [
            (DType::F32, Rounding::Nearest),
            (DType::F16, Rounding::Truncate),
            (DType::BF16, Rounding::Nearest),
        ] {
            let out = cast(&src, DType::F64, to, r).unwrap();
            assert_eq!(first_overflow(DType::F64, &src, to, &out), Some(3), "{to}");
            let out = cast(&src[..24], DType::F64, to, r).unwrap();
            assert_eq!(first_overflow(DType::F64, &src[..24], to, &out), None);
        }
        // 65519 rounds down to F16's largest, 65520 up to infinity.
        let src = bytes64(&[65519.0, 65520.0]);
        let out = cast(&src, DType::F64, DType::F16, Rounding::Nearest).unwrap();
        assert_eq!(first_overflow(DType::F64, &src, DType::F16, &out), Some(1));
        assert_eq!(value_text(DType::F64, &src, 1), "65520.0");
        assert_eq!(value_text(DType::F64, &bytes64(&[1e300]), 0), "1e300");
        assert!(!can_overflow(DType::F16, DType::BF16));
        assert!(!can_overflow(DType::F32, DType::F64));
        assert!(can_overflow(DType::I32, DType::F16));
        assert_eq!(value_text(DType::I16, &(-7i16).to_le_bytes(), 0), "-7");
        assert_eq!(value_text(DType::U32, &70000u32.to_le_bytes(), 0), "70000");
    }
}
