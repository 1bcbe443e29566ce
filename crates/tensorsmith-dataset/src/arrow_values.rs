//! Element conversion from an Arrow leaf array (a run of numbers) to the bytes of a dataset
//! dtype: same type is a copy; float to float goes through `tensorsmith::cast` (F16/BF16 round
//! to nearest even or truncate); integer to integer is checked (a value that does not fit is
//! an error, never wrapped); integer to float rounds to nearest. Integers never pass through
//! f64 on their way to an integer dtype. Float to integer is refused: it would drop fractions.

use crate::finite_range::{first_overflow, value_text};
use arrow_array::types::*;
use arrow_array::{Array, ArrowPrimitiveType, PrimitiveArray};
use arrow_buffer::ToByteSlice;
use arrow_schema::DataType;
use std::ops::Range;
use tensorsmith::cast::{cast, Rounding};
use tensorsmith::dtype::DType;

/// The dtype of an Arrow number type, if it is one.
pub fn leaf_dtype(t: &DataType) -> Option<DType> {
    Some(match t {
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::UInt8 => DType::U8,
        DataType::UInt16 => DType::U16,
        DataType::UInt32 => DType::U32,
        DataType::UInt64 => DType::U64,
        DataType::Float16 => DType::F16,
        DataType::Float32 => DType::F32,
        DataType::Float64 => DType::F64,
        _ => return None,
    })
}

pub fn is_int(d: DType) -> bool {
    matches!(
        d,
        DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::U64
    )
}

pub fn is_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// Whether values of `from` may be written as `to` (checked per value for integers).
pub fn convertible(from: DType, to: DType) -> Result<(), String> {
    if from == to
        || (is_float(from) && is_float(to))
        || (is_int(from) && (is_int(to) || is_float(to)))
    {
        Ok(())
    } else if is_float(from) && is_int(to) {
        Err(format!(
            "{from} values cannot be written as {to}: it would drop fractions (give a float dtype)"
        ))
    } else {
        Err(format!("{from} values cannot be written as {to}"))
    }
}

/// A value that does not fit: the index of the element in the converted range.
#[derive(Debug)]
pub struct OutOfRange {
    pub element: usize,
    pub value: String,
}

/// Appends elements `range` of `leaf` (a primitive array without nulls in that range) to
/// `out` as `to`.
pub fn append(
    leaf: &dyn Array,
    range: Range<usize>,
    to: DType,
    rounding: Rounding,
    out: &mut Vec<u8>,
) -> Result<(), OutOfRange> {
    macro_rules! go {
        ($t:ty) => {
            append_typed::<$t>(
                leaf.as_any().downcast_ref().expect("leaf type"),
                range,
                to,
                rounding,
                out,
            )
        };
    }
    match leaf.data_type() {
        DataType::Int8 => go!(Int8Type),
        DataType::Int16 => go!(Int16Type),
        DataType::Int32 => go!(Int32Type),
        DataType::Int64 => go!(Int64Type),
        DataType::UInt8 => go!(UInt8Type),
        DataType::UInt16 => go!(UInt16Type),
        DataType::UInt32 => go!(UInt32Type),
        DataType::UInt64 => go!(UInt64Type),
        DataType::Float16 => go!(Float16Type),
        DataType::Float32 => go!(Float32Type),
        DataType::Float64 => go!(Float64Type),
        other => unreachable!("not a leaf type: {other}"),
    }
}

/// A native number as an exact i128 (integers) or f64 (floats).
trait Num: Copy {
    fn int(self) -> Option<i128>;
    fn float(self) -> f64;
}

macro_rules! num_int {
    ($($t:ty),*) => {$(impl Num for $t {
        fn int(self) -> Option<i128> { Some(self as i128) }
        fn float(self) -> f64 { self as f64 }
    })*};
}
num_int!(i8, i16, i32, i64, u8, u16, u32, u64);
impl Num for f32 {
    fn int(self) -> Option<i128> {
        None
    }
    fn float(self) -> f64 {
        f64::from(self)
    }
}
impl Num for f64 {
    fn int(self) -> Option<i128> {
        None
    }
    fn float(self) -> f64 {
        self
    }
}
impl Num for half::f16 {
    fn int(self) -> Option<i128> {
        None
    }
    fn float(self) -> f64 {
        self.to_f64()
    }
}

fn append_typed<T: ArrowPrimitiveType>(
    a: &PrimitiveArray<T>,
    range: Range<usize>,
    to: DType,
    rounding: Rounding,
    out: &mut Vec<u8>,
) -> Result<(), OutOfRange>
where
    T::Native: Num,
{
    let from = leaf_dtype(a.data_type()).expect("leaf type");
    let vals = &a.values()[range];
    if from == to {
        out.extend_from_slice(vals.to_byte_slice());
        return Ok(());
    }
    if is_float(from) {
        // float to float (float to integer is refused before any data is read)
        let c = cast(vals.to_byte_slice(), from, to, rounding).expect("float cast");
        check_finite(from, vals.to_byte_slice(), to, &c)?;
        out.extend_from_slice(&c);
        return Ok(());
    }
    if is_float(to) {
        let start = out.len();
        match to {
            DType::F64 => vals
                .iter()
                .for_each(|v| out.extend_from_slice(&v.float().to_le_bytes())),
            // i64 → f32 directly: one rounding, to nearest even
            DType::F32 => vals
                .iter()
                .for_each(|v| out.extend_from_slice(&(v.int().expect("int") as f32).to_le_bytes())),
            _ => {
                let wide: Vec<u8> = vals.iter().flat_map(|v| v.float().to_le_bytes()).collect();
                out.extend_from_slice(&cast(&wide, DType::F64, to, rounding).expect("float cast"));
            }
        }
        return check_finite(from, vals.to_byte_slice(), to, &out[start..]);
    }
    let (lo, hi): (i128, i128) = match to {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        _ => unreachable!("checked by convertible"),
    };
    let size = to.byte_size().expect("whole bytes");
    out.reserve(vals.len() * size);
    for (i, v) in vals.iter().enumerate() {
        let x = v.int().expect("int");
        if x < lo || x > hi {
            return Err(OutOfRange {
                element: i,
                value: x.to_string(),
            });
        }
        out.extend_from_slice(&x.to_le_bytes()[..size]);
    }
    Ok(())
}

/// A finite value that became an infinity (beyond `to`'s range) is out of range
/// (finite_range.rs).
fn check_finite(from: DType, src: &[u8], to: DType, out: &[u8]) -> Result<(), OutOfRange> {
    match first_overflow(from, src, to, out) {
        Some(element) => Err(OutOfRange {
            element,
            value: value_text(from, src, element),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float32Array, Int64Array, UInt16Array};

    fn conv(a: &dyn Array, to: DType) -> Result<Vec<u8>, OutOfRange> {
        let mut out = Vec::new();
        append(a, 0..a.len(), to, Rounding::Nearest, &mut out)?;
        Ok(out)
    }

    #[test]
    fn integers_convert_exactly_or_fail() {
        let big = Int64Array::from(vec![(1i64 << 53) + 1, -1]);
        // through f64 this would be 2^53
        assert_eq!(
            conv(&big, DType::I64).unwrap()[..8],
            ((1i64 << 53) + 1).to_le_bytes()
        );
        let e = conv(&big, DType::U64).unwrap_err();
        assert_eq!((e.element, e.value.as_str()), (1, "-1"));
        let ok = Int64Array::from(vec![0, 255]);
        assert_eq!(conv(&ok, DType::U8).unwrap(), vec![0, 255]);
        assert_eq!(
            conv(&Int64Array::from(vec![256]), DType::U8)
                .unwrap_err()
                .element,
            0
        );
        assert_eq!(
            conv(&UInt16Array::from(vec![7]), DType::I32).unwrap(),
            7i32.to_le_bytes()
        );
    }

    #[test]
    fn floats_round_to_nearest_or_truncate() {
        // 1 + 2^-11 + 2^-12 is above the halfway point between two f16 values
        let x = 1.0f32 + 2f32.powi(-11) + 2f32.powi(-12);
        let a = Float32Array::from(vec![x]);
        let nearest = u16::from_le_bytes(conv(&a, DType::F16).unwrap().try_into().unwrap());
        assert_eq!(nearest, half::f16::from_f32(x).to_bits());
        let mut t = Vec::new();
        append(&a, 0..1, DType::F16, Rounding::Truncate, &mut t).unwrap();
        assert_eq!(
            u16::from_le_bytes(t.try_into().unwrap()),
            half::f16::from_f32(1.0).to_bits()
        );
        assert!(convertible(DType::F32, DType::I32)
            .unwrap_err()
            .contains("fractions"));
    }

    #[test]
    fn finite_values_beyond_a_float_dtype_fail_and_infinities_stay() {
        use arrow_array::{Float64Array, Int32Array};
        let e = conv(&Int32Array::from(vec![1, 70000]), DType::F16).unwrap_err();
        assert_eq!((e.element, e.value.as_str()), (1, "70000"));
        let e = conv(&Float64Array::from(vec![0.5, 1e300]), DType::F32).unwrap_err();
        assert_eq!((e.element, e.value.as_str()), (1, "1e300"));
        let e = conv(&Float32Array::from(vec![1e30]), DType::BF16);
        assert!(e.is_ok(), "BF16 holds 1e30");
        let e = conv(&Float32Array::from(vec![1e30]), DType::F16).unwrap_err();
        assert_eq!(e.element, 0);
        let inf = Float64Array::from(vec![f64::INFINITY, f64::NAN, -f64::INFINITY]);
        let out = conv(&inf, DType::F32).unwrap();
        assert!(f32::from_le_bytes(out[..4].try_into().unwrap()).is_infinite());
        assert!(f32::from_le_bytes(out[4..8].try_into().unwrap()).is_nan());
        assert!(conv(&Int64Array::from(vec![65504]), DType::F16).is_ok());
    }
}
