//! Safetensors behind the format seam. It has no magic, so it claims every file: the
//! registry asks it last, and its reader says precisely why a file is not safetensors.
//! Tensors are raw and undigested, so there is nothing to verify beyond the header.

use super::read::{read_index, N_LEN};
use crate::bytes::ReadAt;
use crate::error::Result;
use crate::format::{FileFormat, OpenOptions};
use crate::index::TensorIndex;
use std::borrow::Cow;

/// Safetensors (Hugging Face).
#[derive(Debug, Clone, Copy)]
pub struct Safetensors;

impl FileFormat for Safetensors {
    fn name(&self) -> &'static str {
        "safetensors"
    }

    fn sniff(&self, _first: &[u8]) -> bool {
        true
    }

    fn read_index(&self, bytes: &dyn ReadAt, opts: &OpenOptions) -> Result<TensorIndex> {
        read_index(bytes, opts)
    }

    fn json_header<'a>(
        &self,
        bytes: &'a dyn ReadAt,
        header_len: u64,
    ) -> Result<Option<Cow<'a, [u8]>>> {
        bytes.read(N_LEN..header_len).map(Some)
    }
}
