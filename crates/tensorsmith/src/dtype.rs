//! Every element type the project knows, its size in bits, and the one table of names each
//! format uses for it. No other module spells a format's dtype name: they all come through
//! here, so adding a format means adding a column, not hunting for string literals.

use std::fmt;

/// An element type. The variant order is the safetensors reference's declaration order,
/// which its writer uses (descending) to order tensors: keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[allow(non_camel_case_types)]
pub enum DType {
    /// Boolean, one byte per element (0 or 1).
    BOOL,
    /// 4-bit float (E2M1: 2 exponent bits, 1 mantissa bit), packed two per byte.
    F4,
    /// 6-bit float with 2 exponent and 3 mantissa bits (OCP MX FP6), packed.
    F6_E2M3,
    /// 6-bit float with 3 exponent and 2 mantissa bits (OCP MX FP6), packed.
    F6_E3M2,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// 8-bit float with 5 exponent and 2 mantissa bits (has infinities).
    F8_E5M2,
    /// 8-bit float with 4 exponent and 3 mantissa bits, no infinities (`float8_e4m3fn`).
    F8_E4M3,
    /// 8-bit exponent-only value, a power of two (the OCP MX block scale type).
    F8_E8M0,
    /// 8-bit E4M3 float with no infinities and no negative zero (`float8_e4m3fnuz`).
    F8_E4M3FNUZ,
    /// 8-bit E5M2 float with no infinities and no negative zero (`float8_e5m2fnuz`).
    F8_E5M2FNUZ,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// IEEE 754 half precision, 2 bytes.
    F16,
    /// bfloat16: the top half of an f32 (8 exponent, 7 mantissa bits), 2 bytes.
    BF16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// IEEE 754 single precision, 4 bytes.
    F32,
    /// Complex number as a pair of f32 (real, imaginary), 8 bytes.
    C64,
    /// IEEE 754 double precision, 8 bytes.
    F64,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// Packed signed 4-bit integers (weight-inspect notes); read, never written by default.
    I4,
    /// Packed signed 2-bit integers (weight-inspect notes); read, never written by default.
    I2,
    /// Complex pairs of f64 (zTensor `complex128`); safetensors has no name for it.
    C128,
    /// Packed unsigned 4-bit integers, two per byte, low nibble first (ONNX `uint4`);
    /// safetensors has no name for it.
    U4,
    /// Packed unsigned 2-bit integers, four per byte, lowest bits first (ONNX `uint2`);
    /// safetensors has no name for it.
    U2,
}

/// One row per dtype: the dtype, its bit size, its safetensors name.
const TABLE: &[(DType, u32, &str)] = &[
    (DType::BOOL, 8, "BOOL"),
    (DType::F4, 4, "F4"),
    (DType::F6_E2M3, 6, "F6_E2M3"),
    (DType::F6_E3M2, 6, "F6_E3M2"),
    (DType::U8, 8, "U8"),
    (DType::I8, 8, "I8"),
    (DType::F8_E5M2, 8, "F8_E5M2"),
    (DType::F8_E4M3, 8, "F8_E4M3"),
    (DType::F8_E8M0, 8, "F8_E8M0"),
    (DType::F8_E4M3FNUZ, 8, "F8_E4M3FNUZ"),
    (DType::F8_E5M2FNUZ, 8, "F8_E5M2FNUZ"),
    (DType::I16, 16, "I16"),
    (DType::U16, 16, "U16"),
    (DType::F16, 16, "F16"),
    (DType::BF16, 16, "BF16"),
    (DType::I32, 32, "I32"),
    (DType::U32, 32, "U32"),
    (DType::F32, 32, "F32"),
    (DType::C64, 64, "C64"),
    (DType::F64, 64, "F64"),
    (DType::I64, 64, "I64"),
    (DType::U64, 64, "U64"),
    (DType::I4, 4, "I4"),
    (DType::I2, 2, "I2"),
    (DType::C128, 128, "C128"),
    (DType::U4, 4, "U4"),
    (DType::U2, 2, "U2"),
];

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 27] = [
        DType::BOOL,
        DType::F4,
        DType::F6_E2M3,
        DType::F6_E3M2,
        DType::U8,
        DType::I8,
        DType::F8_E5M2,
        DType::F8_E4M3,
        DType::F8_E8M0,
        DType::F8_E4M3FNUZ,
        DType::F8_E5M2FNUZ,
        DType::I16,
        DType::U16,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::F32,
        DType::C64,
        DType::F64,
        DType::I64,
        DType::U64,
        DType::I4,
        DType::I2,
        DType::C128,
        DType::U4,
        DType::U2,
    ];

    fn row(self) -> &'static (DType, u32, &'static str) {
        // The table is in declaration order, so the discriminant is the row.
        &TABLE[self as usize]
    }

    /// Size of one element in bits (4 for F4/I4, 6 for the F6 types, 2 for I2).
    pub fn bits(self) -> u32 {
        self.row().1
    }

    /// Size of one element in bytes, or `None` for sub-byte types.
    pub fn byte_size(self) -> Option<usize> {
        let b = self.bits();
        (b % 8 == 0).then_some((b / 8) as usize)
    }

    /// Bytes taken by `elements` packed elements: `elements * bits / 8`, which must be whole
    /// (sub-byte types are packed with no row padding). `None` on overflow or a partial byte.
    pub fn packed_bytes(self, elements: u64) -> Option<u64> {
        let bits = elements.checked_mul(u64::from(self.bits()))?;
        (bits % 8 == 0).then_some(bits / 8)
    }

    /// The name in a safetensors header (`"F32"`, `"BF16"`, ...).
    pub fn safetensors_name(self) -> &'static str {
        self.row().2
    }

    /// Parses a safetensors header dtype name (case-sensitive). `I4`/`I2` are accepted only
    /// when `packed_ints` is set: the reference rejects them.
    pub fn from_safetensors_name(name: &str, packed_ints: bool) -> Option<DType> {
        let d = TABLE.iter().find(|r| r.2 == name)?.0;
        match d {
            DType::I4 | DType::I2 if !packed_ints => None,
            DType::C128 | DType::U4 | DType::U2 => None,
            _ => Some(d),
        }
    }

    /// Whether the safetensors reference library can read and write this dtype.
    pub fn is_safetensors_reference(self) -> bool {
        !matches!(
            self,
            DType::I4 | DType::I2 | DType::C128 | DType::U4 | DType::U2
        )
    }

    /// Whether safetensors has a name for this dtype at all (C128, U4 and U2 have none).
    pub fn is_safetensors_dtype(self) -> bool {
        !matches!(self, DType::C128 | DType::U4 | DType::U2)
    }

    /// F64, F32, F16 or BF16: the floats [`crate::cast`] converts between (conversions cast
    /// these and copy every other dtype as it is).
    pub fn is_castable_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }

    /// Floating point (including complex and the 4/6/8-bit float formats).
    pub fn is_float(self) -> bool {
        use DType::*;
        matches!(
            self,
            F4 | F6_E2M3
                | F6_E3M2
                | F8_E5M2
                | F8_E4M3
                | F8_E8M0
                | F8_E4M3FNUZ
                | F8_E5M2FNUZ
                | F16
                | BF16
                | F32
                | F64
                | C64
                | C128
        )
    }
}

/// zTensor names, one row per dtype that some zTensor version can store:
/// `(dtype, v0.1 name, v1.1 name, v2 storage dtype, v2 logical type)`. `""` means the version
/// has no name for it. v1.2 files use the v2 logical names in their component `type` field.
const ZTENSOR_TABLE: &[(DType, &str, &str, &str, &str)] = &[
    (DType::F64, "float64", "f64", "f64", ""),
    (DType::F32, "float32", "f32", "f32", ""),
    (DType::F16, "float16", "f16", "f16", ""),
    (DType::BF16, "bfloat16", "bf16", "bf16", ""),
    (DType::I64, "int64", "i64", "i64", ""),
    (DType::I32, "int32", "i32", "i32", ""),
    (DType::I16, "int16", "i16", "i16", ""),
    (DType::I8, "int8", "i8", "i8", ""),
    (DType::U64, "uint64", "u64", "u64", ""),
    (DType::U32, "uint32", "u32", "u32", ""),
    (DType::U16, "uint16", "u16", "u16", ""),
    (DType::U8, "uint8", "u8", "u8", ""),
    (DType::BOOL, "bool", "bool", "u8", "bool"),
    (DType::F8_E4M3, "", "f8_e4m3", "u8", "f8_e4m3fn"),
    (DType::F8_E5M2, "", "f8_e5m2", "u8", "f8_e5m2"),
    (DType::F8_E4M3FNUZ, "", "", "u8", "f8_e4m3fnuz"),
    (DType::F8_E5M2FNUZ, "", "", "u8", "f8_e5m2fnuz"),
    (DType::F8_E8M0, "", "", "u8", "f8_e8m0"),
    (DType::F4, "", "", "u8", "f4_e2m1"),
    (DType::C64, "", "complex64", "f32", "complex64"),
    (DType::C128, "", "complex128", "f64", "complex128"),
];

fn zt_row(
    d: DType,
) -> Option<&'static (
    DType,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
)> {
    ZTENSOR_TABLE.iter().find(|r| r.0 == d)
}

fn non_empty(s: &'static str) -> Option<&'static str> {
    (!s.is_empty()).then_some(s)
}

impl DType {
    /// The zTensor v0.1 name (`"float32"`), if v0.1 can store this dtype.
    pub fn ztensor_v01_name(self) -> Option<&'static str> {
        zt_row(self).and_then(|r| non_empty(r.1))
    }

    /// Parses a zTensor v0.1 dtype name (`"float32"`); `None` for a name v0.1 does not have.
    pub fn from_ztensor_v01_name(name: &str) -> Option<DType> {
        ZTENSOR_TABLE
            .iter()
            .find(|r| !r.1.is_empty() && r.1 == name)
            .map(|r| r.0)
    }

    /// The zTensor v1.1 name (`"f32"`, and the spec-only `f8_e4m3`, `complex64`, ...).
    pub fn ztensor_v11_name(self) -> Option<&'static str> {
        zt_row(self).and_then(|r| non_empty(r.2))
    }

    /// Parses a zTensor v1.1 dtype name (`"f32"`, `"complex64"`); `None` for a name v1.1 does
    /// not have.
    pub fn from_ztensor_v11_name(name: &str) -> Option<DType> {
        ZTENSOR_TABLE
            .iter()
            .find(|r| !r.2.is_empty() && r.2 == name)
            .map(|r| r.0)
    }

    /// The zTensor v2 storage dtype and logical type (`("u8", Some("bool"))`).
    pub fn ztensor_v2_names(self) -> Option<(&'static str, Option<&'static str>)> {
        zt_row(self).and_then(|r| non_empty(r.3).map(|s| (s, non_empty(r.4))))
    }

    /// A zTensor v2 storage dtype name (one of the 12 primitives).
    pub fn from_ztensor_v2_storage(name: &str) -> Option<DType> {
        ZTENSOR_TABLE
            .iter()
            .find(|r| r.4.is_empty() && r.3 == name)
            .map(|r| r.0)
    }

    /// A zTensor logical type name (v2 `type`, v1.2 `type`) with the storage dtype it requires.
    pub fn from_ztensor_logical(name: &str) -> Option<(DType, DType)> {
        let row = ZTENSOR_TABLE
            .iter()
            .find(|r| !r.4.is_empty() && r.4 == name)?;
        Some((row.0, DType::from_ztensor_v2_storage(row.3)?))
    }

    /// Bytes of `elements` elements under zTensor v2's size functions: like
    /// [`DType::packed_bytes`], except that `f4_e2m1` rounds up to whole bytes (an odd final
    /// nibble is zero). `None` on overflow or a partial byte.
    pub fn ztensor_v2_bytes(self, elements: u64) -> Option<u64> {
        if self == DType::F4 {
            return Some(elements.div_ceil(2));
        }
        self.packed_bytes(elements)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.safetensors_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_follow_declaration_order() {
        for (i, d) in DType::ALL.iter().enumerate() {
            assert_eq!(TABLE[i].0, *d);
            assert_eq!(*d as usize, i);
        }
    }

    #[test]
    fn names_round_trip_and_are_case_sensitive() {
        for d in DType::ALL.into_iter().filter(|d| d.is_safetensors_dtype()) {
            assert_eq!(
                DType::from_safetensors_name(d.safetensors_name(), true),
                Some(d)
            );
        }
        assert_eq!(DType::from_safetensors_name("f32", true), None);
        assert_eq!(DType::from_safetensors_name("I4", false), None);
        assert_eq!(DType::from_safetensors_name("C128", true), None);
    }

    #[test]
    fn ztensor_names_round_trip() {
        for d in DType::ALL {
            if let Some(n) = d.ztensor_v01_name() {
                assert_eq!(DType::from_ztensor_v01_name(n), Some(d));
            }
            if let Some(n) = d.ztensor_v11_name() {
                assert_eq!(DType::from_ztensor_v11_name(n), Some(d));
            }
            if let Some((s, l)) = d.ztensor_v2_names() {
                match l {
                    None => assert_eq!(DType::from_ztensor_v2_storage(s), Some(d)),
                    Some(l) => {
                        let (ld, sd) = DType::from_ztensor_logical(l).unwrap();
                        assert_eq!(ld, d);
                        assert_eq!(sd.ztensor_v2_names().unwrap().0, s);
                    }
                }
            }
        }
        assert_eq!(DType::from_ztensor_v2_storage("bool"), None);
        assert_eq!(DType::from_ztensor_v11_name("float32"), None);
        assert_eq!(DType::F4.ztensor_v2_bytes(5), Some(3));
    }

    #[test]
    fn sub_byte_packing_requires_whole_bytes() {
        assert_eq!(DType::F4.packed_bytes(3), None);
        assert_eq!(DType::F4.packed_bytes(4), Some(2));
        assert_eq!(DType::F6_E2M3.packed_bytes(4), Some(3));
        assert_eq!(DType::F6_E2M3.packed_bytes(2), None);
        assert_eq!(DType::I2.packed_bytes(4), Some(1));
        assert_eq!(DType::F32.packed_bytes(u64::MAX), None);
        assert_eq!(DType::C64.byte_size(), Some(8));
        assert_eq!(DType::F4.byte_size(), None);
    }
}
