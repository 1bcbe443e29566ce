//! zTensor behind the format seam: any version recognised by its magic, its manifest read
//! through the byte layer (so local, remote and in-memory files read alike), and verify:
//! every part decoded with its digest checked, then the layout's data rules.

use crate::bytes::ReadAt;
use crate::error::{ErrorKind, Result};
use crate::format::{FileFormat, TensorCheck};
use crate::index::{Part, TensorIndex, TensorInfo, ZtVersion};
use crate::ztensor::{detect, digest, layout, v01_read, v11_read, v2_read, OpenOptions, Parsed};
use std::borrow::Cow;

/// zTensor v0.1, v1.1 (and 1.2 files) and v2.
#[derive(Debug, Clone, Copy)]
pub struct Ztensor;

/// Detects the version and validates the whole manifest of a file held by `r`.
pub fn parse_with(r: &dyn ReadAt, opts: &OpenOptions) -> Result<(ZtVersion, Parsed)> {
    let head = if r.len() >= 8 {
        r.read(0..8)?
    } else {
        Cow::Borrowed(&[][..])
    };
    let version = detect(&head).ok_or(ErrorKind::ZtUnknownMagic)?;
    let parsed = match version {
        ZtVersion::V0_1 => v01_read::read_index(r, opts)?,
        ZtVersion::V1_1 => v11_read::read_index(r, opts)?,
        ZtVersion::V2 => v2_read::read_index(r, opts)?,
    };
    Ok((version, parsed))
}

/// A part's decoded bytes (decompressed, little-endian), its digest checked when `verify` is
/// set; a mismatch spells the digests as zTensor files do.
pub fn decode_part<'r>(r: &'r dyn ReadAt, p: &Part, verify: bool) -> Result<Cow<'r, [u8]>> {
    crate::decode::decode_part(r, p, verify, digest::format)
}

impl FileFormat for Ztensor {
    fn name(&self) -> &'static str {
        "ztensor"
    }

    fn sniff(&self, first: &[u8]) -> bool {
        detect(first).is_some()
    }

    fn read_index(&self, bytes: &dyn ReadAt, opts: &OpenOptions) -> Result<TensorIndex> {
        parse_with(bytes, opts).map(|(_, p)| p.index)
    }

    fn part<'a>(&self, bytes: &'a dyn ReadAt, part: &Part, verify: bool) -> Result<Cow<'a, [u8]>> {
        decode_part(bytes, part, verify)
    }

    fn verify_tensor(&self, bytes: &dyn ReadAt, t: &TensorInfo) -> TensorCheck {
        let mut c = TensorCheck::default();
        let mut decoded = Vec::with_capacity(t.parts.len());
        for p in &t.parts {
            if p.digest().is_some() {
                c.checked += 1;
            } else {
                c.undigested += 1;
            }
            match decode_part(bytes, p, true) {
                Ok(b) => decoded.push(b),
                Err(e) => {
                    // A digest mismatch still leaves bytes whose data rules can be checked:
                    // report both.
                    let digest = matches!(e.kind(), ErrorKind::DigestMismatch { .. });
                    c.failures.push(e.at_tensor(&t.name));
                    if digest {
                        if let Ok(b) = decode_part(bytes, p, false) {
                            decoded.push(b);
                        }
                    }
                }
            }
        }
        if decoded.len() == t.parts.len() {
            let refs: Vec<&[u8]> = decoded.iter().map(|b| &b[..]).collect();
            if let Err(e) = layout::check_data(t, &refs) {
                c.failures.push(e.at_tensor(&t.name));
            }
        }
        c
    }
}
