//! GGUF behind the format seam: recognised by its magic, its header read through the byte
//! layer. Tensors are stored raw, so parts need no decoding and there is nothing beyond the
//! header to verify.

use super::read_header;
use crate::bytes::ReadAt;
use crate::error::Result;
use crate::format::{FileFormat, OpenOptions};
use crate::index::TensorIndex;

/// GGUF, versions 1 to 3.
#[derive(Debug, Clone, Copy)]
pub struct Gguf;

impl FileFormat for Gguf {
    fn name(&self) -> &'static str {
        "gguf"
    }

    fn sniff(&self, first: &[u8]) -> bool {
        first.starts_with(b"GGUF")
    }

    fn read_index(&self, bytes: &dyn ReadAt, opts: &OpenOptions) -> Result<TensorIndex> {
        read_header(bytes, opts).map(|h| h.to_index())
    }
}
