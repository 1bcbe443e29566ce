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
        if let Some(mut h) = self.digest_hasher(t) {
            let f = self.file_of(t);
            match f.bytes().local_file() {
                // Read into one bounded buffer (`read_exact_at` reads a mapped file's large
                // pieces through the file), not through the map, so a check beside a kernel
                // copy keeps its memory flat whatever the model size.
                Some(_) => {
                    let r = t.data_range();
                    let mut buf = vec![0u8; PIECE.min(r.end - r.start) as usize];
                    let mut off = r.start;
                    while off < r.end {
                        let piece = &mut buf[..(r.end - off).min(PIECE) as usize];
                        f.bytes()
                            .read_exact_at(off, piece)
                            .map_err(|e| f.at(e.at_tensor(&t.name)))?;
                        h.update(piece);
                        off += piece.len() as u64;
                    }
                }
                None => self.for_each_chunk(t, PIECE, |b| {
                    h.update(b);
                    Ok(())
                })?,
            }
            return self.compare_digest(t, h);
        }
        for (i, _) in t
            .parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.digest().is_some())
        {
            self.part_bytes_checked(t, i, true)?;
        }
        Ok(())
    }

    /// A plain tensor's recorded digest and a hasher for it (`None`: not plain, or no digest),
    /// for readers that stream its bytes anyway and check them on the way
    /// ([`Model::compare_digest`] at the end).
    pub fn digest_hasher(&self, t: &TensorInfo) -> Option<Hasher> {
        if !self.is_plain(t) {
            return None;
        }
        let (want, _) = t.parts[0].digest()?;
        Some(Hasher::new(kind_of(&want)))
    }

    /// Checks what `h` (from [`Model::digest_hasher`]) took in against `t`'s recorded digest.
    pub fn compare_digest(&self, t: &TensorInfo, h: Hasher) -> Result<()> {
        let Some((want, _)) = t.parts.first().and_then(|p| p.digest()) else {
            return Ok(());
        };
        let got = h.finish();
        if got != want {
            return Err(self
                .file_of(t)
                .at(crate::Error::from(ErrorKind::DigestMismatch {
                    expected: spell(&want),
                    actual: spell(&got),
                })
                .at_tensor(&t.name)));
        }
        Ok(())
    }

    /// Part `i` of `t` decoded as [`Model::part_bytes`] gives it, checked against its recorded
    /// digest on the way when `verify` is set (one read for both).
    pub fn part_bytes_checked(
        &self,
        t: &TensorInfo,
        i: usize,
        verify: bool,
    ) -> Result<std::borrow::Cow<'_, [u8]>> {
        let f = self.file_of(t);
        f.format()
            .part(f.bytes(), &t.parts[i], verify)
            .map_err(|e| f.at(e.at_tensor(&t.name)))
    }
}
