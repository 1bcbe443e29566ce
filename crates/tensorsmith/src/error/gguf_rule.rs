//! The rules a GGUF file can break: one variant each, wrapped in
//! [`crate::ErrorKind::Gguf`]. It lives beside the error type, not in `gguf/`, so that the
//! ground layer owns no format.

/// A broken GGUF rule. Offsets are absolute byte positions in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GgufRule {
    #[error("not a GGUF file: magic is {0:02x?}, not \"GGUF\"")]
    BadMagic([u8; 4]),
    #[error("big-endian GGUF (version {0} byte-swapped) is not supported")]
    BigEndian(u32),
    #[error("unsupported GGUF version {0} (1, 2 and 3 are known)")]
    UnsupportedVersion(u32),
    #[error("file ends inside {what} at byte {offset}: {needed} more bytes needed")]
    Truncated {
        what: &'static str,
        offset: u64,
        needed: u64,
    },
    #[error(
        "{what} declares {count} items at byte {offset}, more than the rest of the file can hold"
    )]
    CountPastEnd {
        what: &'static str,
        count: u64,
        offset: u64,
    },
    #[error("metadata '{key}': unknown value type {id}")]
    BadValueType { key: String, id: u32 },
    #[error("{what} at byte {offset} is not valid UTF-8")]
    NotUtf8 { what: &'static str, offset: u64 },
    #[error("metadata '{key}': bool byte {value} is neither 0 nor 1")]
    BadBool { key: String, value: u8 },
    #[error("metadata '{key}': arrays nested deeper than {limit}")]
    NestingTooDeep { key: String, limit: usize },
    #[error("metadata key '{0}' appears twice")]
    DuplicateKey(String),
    #[error("tensor name appears twice")]
    DuplicateTensor,
    #[error("{dims} dimensions, more than the {max} ggml allows")]
    TooManyDims { dims: u32, max: u32 },
    #[error("unknown ggml type {0}")]
    UnknownGgmlType(u32),
    #[error("{elements} elements of {ggml_type} are not a whole number of {block}-element blocks (first dimension {ne0})")]
    PartialBlock {
        elements: u64,
        ne0: u64,
        block: u32,
        ggml_type: &'static str,
    },
    #[error("element count or byte length overflows")]
    ShapeOverflow,
    #[error("general.alignment must be a nonzero power of two of an unsigned type, got {0}")]
    BadAlignment(String),
    #[error("data offset {offset} is not a multiple of the alignment {alignment}")]
    Misaligned { offset: u64, alignment: u64 },
    #[error("data [{start}, {end}) runs past the end of the {file_len}-byte file")]
    DataPastEnd { start: u64, end: u64, file_len: u64 },
    #[error("data [{start}, {end}) overlaps tensor '{other}'")]
    Overlap { start: u64, end: u64, other: String },
}
