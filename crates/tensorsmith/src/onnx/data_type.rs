//! ONNX `TensorProto.data_type` codes: the dtype each names, the typed field that may carry
//! its values, how many bytes its values take, and weight-inspect's name and size for it.

use crate::dtype::DType;

/// `data_type` 8: strings (in `string_data`), which have no dtype.
pub const STRING: i32 = 8;

/// `(code, dtype)` for every code with a dtype; 8 (string) has none.
const CODES: &[(i32, DType)] = &[
    (1, DType::F32),
    (2, DType::U8),
    (3, DType::I8),
    (4, DType::U16),
    (5, DType::I16),
    (6, DType::I32),
    (7, DType::I64),
    (9, DType::BOOL),
    (10, DType::F16),
    (11, DType::F64),
    (12, DType::U32),
    (13, DType::U64),
    (14, DType::C64),
    (15, DType::C128),
    (16, DType::BF16),
    (17, DType::F8_E4M3),
    (18, DType::F8_E4M3FNUZ),
    (19, DType::F8_E5M2),
    (20, DType::F8_E5M2FNUZ),
    (21, DType::U4),
    (22, DType::I4),
    (23, DType::F4),
    (24, DType::F8_E8M0),
    (25, DType::U2),
    (26, DType::I2),
    (27, DType::F6_E2M3),
    (28, DType::F6_E3M2),
];

/// The dtype of a `data_type` code (`None` for string and unknown codes).
pub fn dtype_of(code: i32) -> Option<DType> {
    CODES.iter().find(|r| r.0 == code).map(|r| r.1)
}

/// The `data_type` code of a dtype.
pub fn code_of(d: DType) -> Option<i32> {
    CODES.iter().find(|r| r.1 == d).map(|r| r.0)
}

/// Bytes taken by `elements` values stored as ONNX stores them: sub-byte types packed, the
/// last byte padded. `None` on overflow.
pub fn stored_bytes(d: DType, elements: u64) -> Option<u64> {
    let bits = elements.checked_mul(u64::from(d.bits()))?;
    Some(bits.div_ceil(8))
}

/// A typed value field of `TensorProto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typed {
    /// `float_data` (field 4): 32-bit floats; carries f32 and complex64 (two entries per value).
    Float,
    /// `int32_data` (field 5): varint int32 entries; carries int32 and every narrower type (bool,
    /// 8/16-bit integers, f16/bf16 and the 8-bit floats as their bits, sub-byte types packed).
    Int32,
    /// `int64_data` (field 7): varint int64 entries; carries int64.
    Int64,
    /// `double_data` (field 10): 64-bit floats; carries f64 and complex128 (two entries per value).
    Double,
    /// `uint64_data` (field 11): varint uint64 entries; carries uint32 and uint64.
    Uint64,
}

impl Typed {
    /// The typed field with this protobuf field number in `TensorProto`, if it is one.
    pub fn of_field(number: u32) -> Option<Typed> {
        Some(match number {
            4 => Typed::Float,
            5 => Typed::Int32,
            7 => Typed::Int64,
            10 => Typed::Double,
            11 => Typed::Uint64,
            _ => return None,
        })
    }

    /// The protobuf field number in `TensorProto`.
    pub fn field(self) -> u32 {
        match self {
            Typed::Float => 4,
            Typed::Int32 => 5,
            Typed::Int64 => 7,
            Typed::Double => 10,
            Typed::Uint64 => 11,
        }
    }

    /// The field's name in `onnx.proto` (`float_data`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Typed::Float => "float_data",
            Typed::Int32 => "int32_data",
            Typed::Int64 => "int64_data",
            Typed::Double => "double_data",
            Typed::Uint64 => "uint64_data",
        }
    }

    /// The encoding name a part decoded from this field carries.
    pub fn encoding(self) -> &'static str {
        match self {
            Typed::Float => "onnx.float_data",
            Typed::Int32 => "onnx.int32_data",
            Typed::Int64 => "onnx.int64_data",
            Typed::Double => "onnx.double_data",
            Typed::Uint64 => "onnx.uint64_data",
        }
    }

    /// The field whose [`Typed::encoding`] is `e` (`onnx.float_data`, ...).
    pub fn from_encoding(e: &str) -> Option<Typed> {
        [
            Typed::Float,
            Typed::Int32,
            Typed::Int64,
            Typed::Double,
            Typed::Uint64,
        ]
        .into_iter()
        .find(|t| t.encoding() == e)
    }

    /// Whether values are fixed 4 or 8 bytes on the wire (else varints).
    pub fn fixed_width(self) -> Option<usize> {
        match self {
            Typed::Float => Some(4),
            Typed::Double => Some(8),
            _ => None,
        }
    }

    /// Entries this field holds for `elements` values of `d`, and the bytes each entry
    /// becomes; `None` when the field cannot carry `d`. Complex numbers take two entries;
    /// 4- and 2-bit types one entry per packed byte; 6-bit floats one entry per value, packed
    /// six bits each when decoded (entry bytes 0).
    pub fn layout_for(self, d: DType, elements: u64) -> Option<(u64, usize)> {
        use DType::*;
        let per = |n: u64| Some((elements.checked_mul(n)?, 0usize));
        let entry_bytes = match (self, d) {
            (Typed::Float, F32) => 4,
            (Typed::Float, C64) => return per(2).map(|(n, _)| (n, 4)),
            (Typed::Double, F64) => 8,
            (Typed::Double, C128) => return per(2).map(|(n, _)| (n, 8)),
            (Typed::Int64, I64) => 8,
            (Typed::Uint64, U64) => 8,
            (Typed::Uint64, U32) => 4,
            (Typed::Int32, I32) => 4,
            (Typed::Int32, I16 | U16 | F16 | BF16) => 2,
            (
                Typed::Int32,
                I8 | U8 | BOOL | F8_E4M3 | F8_E4M3FNUZ | F8_E5M2 | F8_E5M2FNUZ | F8_E8M0,
            ) => 1,
            (Typed::Int32, U4 | I4 | F4 | U2 | I2) => return Some((stored_bytes(d, elements)?, 1)),
            // One 6-bit value per entry (as onnx.helper writes them), packed when decoded.
            (Typed::Int32, F6_E2M3 | F6_E3M2) => 0,
            _ => return None,
        };
        Some((elements, entry_bytes))
    }
}

/// weight-inspect's dtype name and element size for a code (its table stops at 16; other
/// codes are `unknown_<code>`, one byte each).
pub fn wi_name_and_size(code: i32) -> (String, u64) {
    let (name, size) = match code {
        1 => ("float32", 4),
        2 => ("uint8", 1),
        3 => ("int8", 1),
        4 => ("uint16", 2),
        5 => ("int16", 2),
        6 => ("int32", 4),
        7 => ("int64", 8),
        8 => ("string", 1),
        9 => ("bool", 1),
        10 => ("float16", 2),
        11 => ("float64", 8),
        12 => ("uint32", 4),
        13 => ("uint64", 8),
        14 => ("complex64", 8),
        15 => ("complex128", 16),
        16 => ("bfloat16", 2),
        _ => return (format!("unknown_{code}"), 1),
    };
    (name.to_string(), size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for (c, d) in CODES {
            assert_eq!(dtype_of(*c), Some(*d));
            assert_eq!(code_of(*d), Some(*c));
        }
        assert_eq!(dtype_of(STRING), None);
        assert_eq!(dtype_of(0), None);
        assert_eq!(dtype_of(29), None);
    }

    #[test]
    fn sub_byte_values_pad_the_last_byte() {
        assert_eq!(stored_bytes(DType::I4, 3), Some(2));
        assert_eq!(stored_bytes(DType::U2, 5), Some(2));
        assert_eq!(stored_bytes(DType::F32, u64::MAX), None);
        assert_eq!(Typed::Int32.layout_for(DType::U4, 3), Some((2, 1)));
        assert_eq!(Typed::Float.layout_for(DType::C64, 3), Some((6, 4)));
        assert_eq!(Typed::Float.layout_for(DType::I8, 3), None);
    }
}
