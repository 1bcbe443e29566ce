//! The rules a GGUF file can break: one variant each, wrapped in
//! [`crate::ErrorKind::Gguf`]. It lives beside the error type, not in `gguf/`, so that the
//! ground layer owns no format.

/// A broken GGUF rule. Offsets are absolute byte positions in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GgufRule {
    /// The file does not start with the magic `GGUF`.
    #[error("not a GGUF file: magic is {0:02x?}, not \"GGUF\"")]
    BadMagic(
        /// The file's first 4 bytes.
        [u8; 4],
    ),
    /// A big-endian GGUF file: its version reads as a known one only with its bytes
    /// swapped. Only little-endian files are read.
    #[error("big-endian GGUF (version {0} byte-swapped) is not supported")]
    BigEndian(
        /// The version, with its bytes swapped back.
        u32,
    ),
    /// A GGUF version other than 1, 2 and 3.
    #[error("unsupported GGUF version {0} (1, 2 and 3 are known)")]
    UnsupportedVersion(
        /// The version as written in the file.
        u32,
    ),
    /// The file ends inside the header: a field, a string or a table is cut off.
    #[error("file ends inside {what} at byte {offset}: {needed} more bytes needed")]
    Truncated {
        /// What was being read (for example "the version" or "a metadata key").
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// How many bytes past the end of the file it needs.
        needed: u64,
    },
    /// A count (of metadata entries, tensor infos or array items) larger than the rest of the
    /// file could hold even at the smallest size per item: the file is damaged.
    #[error(
        "{what} declares {count} items at byte {offset}, more than the rest of the file can hold"
    )]
    CountPastEnd {
        /// What the count is of (for example "the tensor-info table").
        what: &'static str,
        /// The count as written in the file.
        count: u64,
        /// Where the counted items start.
        offset: u64,
    },
    /// A metadata value (or array element) of a type id GGUF does not define (0 to 12).
    #[error("metadata '{key}': unknown value type {id}")]
    BadValueType {
        /// The metadata key the value belongs to.
        key: String,
        /// The type id as written in the file.
        id: u32,
    },
    /// A string (a metadata key or value, a tensor name) that is not valid UTF-8.
    #[error("{what} at byte {offset} is not valid UTF-8")]
    NotUtf8 {
        /// Which string it is.
        what: &'static str,
        /// Where the string's bytes start.
        offset: u64,
    },
    /// A metadata bool stored as a byte other than 0 and 1.
    #[error("metadata '{key}': bool byte {value} is neither 0 nor 1")]
    BadBool {
        /// The metadata key the value belongs to.
        key: String,
        /// The byte as written in the file.
        value: u8,
    },
    /// A metadata value of arrays within arrays nested deeper than the reader allows.
    #[error("metadata '{key}': arrays nested deeper than {limit}")]
    NestingTooDeep {
        /// The metadata key the value belongs to.
        key: String,
        /// The deepest nesting the reader accepts.
        limit: usize,
    },
    /// A metadata key given twice.
    #[error("metadata key '{0}' appears twice")]
    DuplicateKey(
        /// The key.
        String,
    ),
    /// Two tensors of one name; the error's tensor names it.
    #[error("tensor name appears twice")]
    DuplicateTensor,
    /// A tensor of more dimensions than ggml supports.
    #[error("{dims} dimensions, more than the {max} ggml allows")]
    TooManyDims {
        /// The tensor's number of dimensions.
        dims: u32,
        /// The most ggml allows (4).
        max: u32,
    },
    /// A tensor of a ggml type id this library does not know.
    #[error("unknown ggml type {0}")]
    UnknownGgmlType(
        /// The type id as written in the tensor info.
        u32,
    ),
    /// A tensor of a block-quantized type whose rows (first dimension) are not a whole number
    /// of blocks.
    #[error("{elements} elements of {ggml_type} are not a whole number of {block}-element blocks (first dimension {ne0})")]
    PartialBlock {
        /// The tensor's element count.
        elements: u64,
        /// The tensor's first (fastest-varying) dimension, which must be whole blocks.
        ne0: u64,
        /// The values per block of the type.
        block: u32,
        /// The ggml type's name.
        ggml_type: &'static str,
    },
    /// A tensor whose element count or byte length does not fit in 64 bits.
    #[error("element count or byte length overflows")]
    ShapeOverflow,
    /// A `general.alignment` that is not a nonzero power of two, or not a UINT32 (the one
    /// type gguf-py and llama.cpp read it as).
    #[error("general.alignment must be a UINT32 nonzero power of two, got {0}")]
    BadAlignment(
        /// The value and its type, as written in the file.
        String,
    ),
    /// A tensor whose data offset is not a multiple of the file's alignment.
    #[error("data offset {offset} is not a multiple of the alignment {alignment}")]
    Misaligned {
        /// The tensor's offset as written in its tensor info: from the start of the data
        /// section, not of the file.
        offset: u64,
        /// The file's alignment in bytes (`general.alignment`, else 32).
        alignment: u64,
    },
    /// A tensor whose data runs past the end of the file.
    #[error("data [{start}, {end}) runs past the end of the {file_len}-byte file")]
    DataPastEnd {
        /// Where the tensor's data starts.
        start: u64,
        /// Where its data ends (exclusive).
        end: u64,
        /// The file's length in bytes.
        file_len: u64,
    },
    /// Two tensors whose data partly or wholly share bytes; the error's tensor is the one
    /// later in data order.
    #[error("data [{start}, {end}) overlaps tensor '{other}'")]
    Overlap {
        /// Where the tensor's data starts.
        start: u64,
        /// Where its data ends (exclusive).
        end: u64,
        /// The name of the tensor whose data it overlaps.
        other: String,
    },
}
