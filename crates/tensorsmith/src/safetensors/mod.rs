//! The safetensors format: an 8-byte little-endian header length, a JSON header, then tensor
//! bytes back to back. [`read`] validates and opens files; [`write`] produces files that are
//! byte-identical to the Hugging Face reference writer.

mod header_parse;
pub mod read;
pub mod write;

pub use read::{
    open_remote, parse_bytes, ReadOptions, SafetensorsFile, TensorView, DEFAULT_MAX_HEADER_LEN,
};
pub use write::{FilePieces, Piece, SourceRange, TensorData, Writer};
