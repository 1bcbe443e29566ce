//! The safetensors format: an 8-byte little-endian header length, a JSON header, then tensor
//! bytes back to back. [`read`] validates and opens files; [`write`] produces files that are
//! byte-identical to the Hugging Face reference writer; [`Safetensors`] is the format seam.

mod format;
mod header_parse;
pub mod read;
pub mod write;

pub use format::Safetensors;
pub use read::{parse_bytes, read_index, SafetensorsFile, TensorView};
pub use write::{FilePieces, Piece, SourceRange, TensorData, Writer};
