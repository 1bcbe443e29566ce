//! The safetensors format: an 8-byte little-endian header length, a JSON header, then tensor
//! bytes back to back. `read.rs` validates and opens files ([`SafetensorsFile`]); `write.rs`
//! produces files that are byte-identical to the Hugging Face reference writer ([`Writer`]);
//! [`Safetensors`] is the format seam.

pub mod digest_record;
mod format;
mod header_parse;
mod read;
mod write;

pub use format::Safetensors;
pub use read::{parse_bytes, read_index, SafetensorsFile, TensorView};
pub use write::{FilePieces, Piece, SourceRange, TensorData, Writer};
