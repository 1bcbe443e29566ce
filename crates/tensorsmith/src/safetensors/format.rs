//! Safetensors behind the format seam. It has no magic, so it claims every file: the
//! registry asks it last, and its reader says precisely why a file is not safetensors.
//! Tensors are raw; files written with digests (`digest_record`) have each tensor's bytes
//! checked by `verify`, others nothing beyond the header.

use super::digest_record;
use super::read::{read_index, N_LEN};
use crate::bytes::ReadAt;
use crate::digest::{compute, kind_of, spell};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{FileFormat, OpenOptions, TensorCheck};
use crate::index::{TensorIndex, TensorInfo};
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
        let mut index = read_index(bytes, opts)?;
        digest_record::attach(&mut index);
        Ok(index)
    }

    /// The tensor's bytes against the digest the file records for it, if any; a mismatch
    /// names the tensor and its byte range in the file.
    fn verify_tensor(&self, bytes: &dyn ReadAt, t: &TensorInfo) -> TensorCheck {
        let mut c = TensorCheck::default();
        for p in &t.parts {
            let Some((want, _)) = p.digest() else {
                c.undigested += 1;
                continue;
            };
            c.checked += 1;
            let got = bytes
                .read(p.range.clone())
                .map(|b| compute(kind_of(&want), &b));
            match got {
                Ok(got) if got == want => {}
                Ok(got) => c.failures.push(
                    Error::new(ErrorKind::RangeDigestMismatch {
                        start: p.range.start,
                        end: p.range.end,
                        expected: spell(&want),
                        actual: spell(&got),
                    })
                    .at_tensor(&t.name),
                ),
                Err(e) => c.failures.push(e.at_tensor(&t.name)),
            }
        }
        c
    }

    fn json_header<'a>(
        &self,
        bytes: &'a dyn ReadAt,
        header_len: u64,
    ) -> Result<Option<Cow<'a, [u8]>>> {
        bytes.read(N_LEN..header_len).map(Some)
    }
}
