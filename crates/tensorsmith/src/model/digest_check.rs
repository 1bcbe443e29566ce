//! A tensor checked against the digests its file records (safetensors' `tensorsmith.digest`,
//! zTensor's per-component checksums), for readers and writers that take the whole tensor
//! anyway: `convert` (beside its copy), `hash --content`, a full `get_tensor`. Plain tensors
//! are hashed in bounded pieces; others are decoded with their check, as a read decodes them.

use super::Model;
use crate::digest::{kind_of, spell, Hasher};
use crate::error::{ErrorKind, Result};
use crate::index::TensorInfo;

/// Pieces a plain tensor is hashed in (memory stays bounded whatever its size).
const PIECE: u64 = 16 << 20;

impl Model {
    /// Whether any part of `t` records a digest.
    pub fn has_digest(&self, t: &TensorInfo) -> bool {
        t.parts.iter().any(|p| p.digest().is_some())
    }

    /// Checks every part of `t` that records a digest; a mismatch is an error naming the
    /// file, the tensor and both digests.
    pub fn check_digests(&self, t: &TensorInfo) -> Result<()> {
        if !self.has_digest(t) {
            return Ok(());
        }
        let f = self.file_of(t);
        if self.is_plain(t) {
            let (want, _) = t.parts[0].digest().expect("has a digest");
            let mut h = Hasher::new(kind_of(&want));
            self.for_each_chunk(t, PIECE, |b| {
                h.update(b);
                Ok(())
            })?;
            let got = h.finish();
            if got != want {
                return Err(f.at(crate::Error::from(ErrorKind::DigestMismatch {
                    expected: spell(&want),
                    actual: spell(&got),
                })
                .at_tensor(&t.name)));
            }
            return Ok(());
        }
        for p in t.parts.iter().filter(|p| p.digest().is_some()) {
            f.format()
                .part(f.bytes(), p, true)
                .map_err(|e| f.at(e.at_tensor(&t.name)))?;
        }
        Ok(())
    }
}
