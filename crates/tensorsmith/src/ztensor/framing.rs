//! File framing the zTensor versions share: the magic and minimum size every reader checks
//! first, and the v0.1/v1.1 trailing manifest (CBOR bytes after the last blob, then their
//! length as a little-endian u64; v1.1 adds its magic after that), read and written here.

use crate::error::{ErrorKind, Result};
use crate::ztensor::{OpenOptions, ReadAt};
use std::borrow::Cow;
use std::io::Write;

/// Checks that `r` starts with `magic` and holds at least `min` bytes; returns its length.
pub(crate) fn check_head(
    r: &dyn ReadAt,
    magic: &[u8; 8],
    version: &'static str,
    min: u64,
) -> Result<u64> {
    let len = r.len();
    if len < 8 || r.read(0..8)?[..] != magic[..] {
        return Err(ErrorKind::ZtUnknownMagic.into());
    }
    if len < min {
        return Err(ErrorKind::ZtTooSmall { version, len, min }.into());
    }
    Ok(len)
}

/// Reads the trailing manifest whose length field is the 8 bytes at `len_at` (the manifest
/// ends there and may not reach into the 8-byte magic); returns it and its start.
pub(crate) fn read_trailing_manifest<'r>(
    r: &'r dyn ReadAt,
    len_at: u64,
    opts: &OpenOptions,
) -> Result<(Cow<'r, [u8]>, u64)> {
    let size_field = r.read(len_at..len_at + 8)?;
    let size = u64::from_le_bytes(size_field[..].try_into().expect("8 bytes"));
    if size > opts.max_manifest_len() {
        return Err(ErrorKind::ZtManifestTooLarge {
            len: size,
            limit: opts.max_manifest_len(),
        }
        .into());
    }
    let start = match len_at.checked_sub(size) {
        Some(s) if s >= 8 => s,
        _ => {
            return Err(ErrorKind::ZtManifestOutOfBounds {
                offset: len_at.saturating_sub(size),
                len: size,
                file_len: r.len(),
            }
            .into())
        }
    };
    Ok((r.read(start..len_at)?, start))
}

/// Writes `manifest` and its length field; returns the bytes written.
pub(crate) fn write_trailing_manifest(out: &mut dyn Write, manifest: &[u8]) -> Result<u64> {
    out.write_all(manifest)?;
    out.write_all(&(manifest.len() as u64).to_le_bytes())?;
    Ok(manifest.len() as u64 + 8)
}
