//! GGUF metadata values. Arrays keep their elements typed and packed (`Vec<u8>` for a u8
//! array, `Vec<String>` for strings), so the memory a file's metadata takes stays within a
//! small multiple of the bytes it occupies in the file.

use crate::index::MetaValue;

/// The 13 value types of GGUF, by their ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// Unsigned 8-bit integer (`UINT8`).
    U8 = 0,
    /// Signed 8-bit integer (`INT8`).
    I8 = 1,
    /// Unsigned 16-bit integer (`UINT16`).
    U16 = 2,
    /// Signed 16-bit integer (`INT16`).
    I16 = 3,
    /// Unsigned 32-bit integer (`UINT32`).
    U32 = 4,
    /// Signed 32-bit integer (`INT32`).
    I32 = 5,
    /// IEEE 754 single precision float (`FLOAT32`).
    F32 = 6,
    /// Boolean stored as one byte, 0 or 1 (`BOOL`).
    Bool = 7,
    /// Length-prefixed UTF-8 string (`STRING`).
    String = 8,
    /// Typed array: an element type, a count, then the elements (`ARRAY`).
    Array = 9,
    /// Unsigned 64-bit integer (`UINT64`).
    U64 = 10,
    /// Signed 64-bit integer (`INT64`).
    I64 = 11,
    /// IEEE 754 double precision float (`FLOAT64`).
    F64 = 12,
}

impl ValueType {
    /// The type with this id as a GGUF file stores it (0 to 12), or `None` for an unknown id.
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The `gguf` package's name for the type.
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "UINT8",
            I8 => "INT8",
            U16 => "UINT16",
            I16 => "INT16",
            U32 => "UINT32",
            I32 => "INT32",
            F32 => "FLOAT32",
            Bool => "BOOL",
            String => "STRING",
            Array => "ARRAY",
            U64 => "UINT64",
            I64 => "INT64",
            F64 => "FLOAT64",
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// A `UINT8` value.
    U8(u8),
    /// An `INT8` value.
    I8(i8),
    /// A `UINT16` value.
    U16(u16),
    /// An `INT16` value.
    I16(i16),
    /// A `UINT32` value.
    U32(u32),
    /// An `INT32` value.
    I32(i32),
    /// A `FLOAT32` value.
    F32(f32),
    /// A `BOOL` value.
    Bool(bool),
    /// A `STRING` value (always valid UTF-8).
    String(String),
    /// An `ARRAY` value, its elements packed by type.
    Array(Array),
    /// A `UINT64` value.
    U64(u64),
    /// An `INT64` value.
    I64(i64),
    /// A `FLOAT64` value.
    F64(f64),
}

/// An array value: its elements, packed by type.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    /// An array of `UINT8`.
    U8(Vec<u8>),
    /// An array of `INT8`.
    I8(Vec<i8>),
    /// An array of `UINT16`.
    U16(Vec<u16>),
    /// An array of `INT16`.
    I16(Vec<i16>),
    /// An array of `UINT32`.
    U32(Vec<u32>),
    /// An array of `INT32`.
    I32(Vec<i32>),
    /// An array of `FLOAT32`.
    F32(Vec<f32>),
    /// An array of `BOOL`.
    Bool(Vec<bool>),
    /// An array of `STRING` (a tokenizer vocabulary, for one).
    String(Vec<String>),
    /// An array of arrays, each typed on its own.
    Array(Vec<Array>),
    /// An array of `UINT64`.
    U64(Vec<u64>),
    /// An array of `INT64`.
    I64(Vec<i64>),
    /// An array of `FLOAT64`.
    F64(Vec<f64>),
}

impl GgufValue {
    /// The GGUF type of this value (`Array` for any array).
    pub fn value_type(&self) -> ValueType {
        match self {
            GgufValue::U8(_) => ValueType::U8,
            GgufValue::I8(_) => ValueType::I8,
            GgufValue::U16(_) => ValueType::U16,
            GgufValue::I16(_) => ValueType::I16,
            GgufValue::U32(_) => ValueType::U32,
            GgufValue::I32(_) => ValueType::I32,
            GgufValue::F32(_) => ValueType::F32,
            GgufValue::Bool(_) => ValueType::Bool,
            GgufValue::String(_) => ValueType::String,
            GgufValue::Array(_) => ValueType::Array,
            GgufValue::U64(_) => ValueType::U64,
            GgufValue::I64(_) => ValueType::I64,
            GgufValue::F64(_) => ValueType::F64,
        }
    }

    /// An unsigned integer value of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as messages show it: its type's gguf-py name and the value (`UINT32 48`,
    /// `STRING "x"`, `ARRAY of 3 INT32`), never Rust's debug text.
    pub fn describe(&self) -> String {
        let ty = self.value_type().name();
        match self {
            GgufValue::U8(v) => format!("{ty} {v}"),
            GgufValue::I8(v) => format!("{ty} {v}"),
            GgufValue::U16(v) => format!("{ty} {v}"),
            GgufValue::I16(v) => format!("{ty} {v}"),
            GgufValue::U32(v) => format!("{ty} {v}"),
            GgufValue::I32(v) => format!("{ty} {v}"),
            GgufValue::U64(v) => format!("{ty} {v}"),
            GgufValue::I64(v) => format!("{ty} {v}"),
            GgufValue::F32(v) => format!("{ty} {v}"),
            GgufValue::F64(v) => format!("{ty} {v}"),
            GgufValue::Bool(v) => format!("{ty} {v}"),
            GgufValue::String(s) => format!("{ty} {s:?}"),
            GgufValue::Array(a) => format!("{ty} of {} {}", a.len(), a.element_type().name()),
        }
    }

    /// The text of a `STRING` value; `None` for any other type.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The neutral form (integers widen to i64/u64, floats keep their width).
    pub fn to_meta(&self) -> MetaValue {
        match self {
            GgufValue::U8(v) => MetaValue::UInt((*v).into()),
            GgufValue::U16(v) => MetaValue::UInt((*v).into()),
            GgufValue::U32(v) => MetaValue::UInt((*v).into()),
            GgufValue::U64(v) => MetaValue::UInt(*v),
            GgufValue::I8(v) => MetaValue::Int((*v).into()),
            GgufValue::I16(v) => MetaValue::Int((*v).into()),
            GgufValue::I32(v) => MetaValue::Int((*v).into()),
            GgufValue::I64(v) => MetaValue::Int(*v),
            GgufValue::F32(v) => MetaValue::F32(*v),
            GgufValue::F64(v) => MetaValue::F64(*v),
            GgufValue::Bool(v) => MetaValue::Bool(*v),
            GgufValue::String(s) => MetaValue::Str(s.clone()),
            GgufValue::Array(a) => a.to_meta(),
        }
    }
}

impl Array {
    /// Number of elements (of a nested array: the number of inner arrays).
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The type of the elements.
    pub fn element_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// The neutral form: a [`MetaValue::Array`] of the elements, each converted as
    /// [`GgufValue::to_meta`] converts a single value.
    pub fn to_meta(&self) -> MetaValue {
        fn all<T: Copy>(v: &[T], f: impl Fn(T) -> MetaValue) -> MetaValue {
            MetaValue::Array(v.iter().map(|&x| f(x)).collect())
        }
        match self {
            Array::U8(v) => all(v, |x| MetaValue::UInt(x.into())),
            Array::U16(v) => all(v, |x| MetaValue::UInt(x.into())),
            Array::U32(v) => all(v, |x| MetaValue::UInt(x.into())),
            Array::U64(v) => all(v, MetaValue::UInt),
            Array::I8(v) => all(v, |x| MetaValue::Int(x.into())),
            Array::I16(v) => all(v, |x| MetaValue::Int(x.into())),
            Array::I32(v) => all(v, |x| MetaValue::Int(x.into())),
            Array::I64(v) => all(v, MetaValue::Int),
            Array::F32(v) => all(v, MetaValue::F32),
            Array::F64(v) => all(v, MetaValue::F64),
            Array::Bool(v) => all(v, MetaValue::Bool),
            Array::String(v) => MetaValue::Array(v.iter().cloned().map(MetaValue::Str).collect()),
            Array::Array(v) => MetaValue::Array(v.iter().map(Array::to_meta).collect()),
        }
    }
}
