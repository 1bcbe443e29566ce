//! A part's stored bytes made into its values: decompressed ([`Encoding`]), byte-swapped to
//! little-endian, and checked against its digest on request. Neutral: any format whose index
//! describes its parts this way is decoded here, whatever the byte source.

use crate::bytes::ReadAt;
use crate::dtype::DType;
use crate::error::{ErrorKind, Result};
use crate::index::Digest;
use crate::index::{DigestScope, Encoding, Part};
use crate::{codec, digest};
use std::borrow::Cow;

fn swap_elements(bytes: &[u8], width: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for c in out.chunks_exact_mut(width) {
        c.reverse();
    }
    out
}

/// A part's decoded bytes (little-endian elements), checking the digest first when `verify`
/// is set (a mismatch names both digests as `spell` writes them: the format's own spelling).
/// Borrowed from `r` when the stored bytes are the decoded bytes.
pub fn decode_part<'r>(
    r: &'r dyn ReadAt,
    p: &Part,
    verify: bool,
    spell: fn(&Digest) -> String,
) -> Result<Cow<'r, [u8]>> {
    if let Some(s) = p.shard() {
        return Err(ErrorKind::ZtExternalShard(s.to_string()).into());
    }
    let stored = r.read(p.range.clone())?;
    let digest = p.digest().filter(|_| verify);
    if let Some((d, DigestScope::Stored)) = &digest {
        digest::check(d, &stored, spell)?;
    }
    let decoded = match &p.encoding {
        Encoding::Raw => stored,
        Encoding::Zstd => Cow::Owned(codec::decompress_exact(&stored, p.decoded_len)?),
        Encoding::ZstdSeekable => Cow::Owned(codec::seekable_decode(&stored, p.decoded_len)?),
        Encoding::Other(e) => return Err(ErrorKind::ZtUnknownEncoding(e.to_string()).into()),
    };
    if decoded.len() as u64 != p.decoded_len {
        return Err(ErrorKind::ZtDecodedLength {
            expected: p.decoded_len,
            actual: decoded.len().to_string(),
        }
        .into());
    }
    let decoded = match (p.big_endian, p.dtype.byte_size()) {
        (true, Some(w)) if w > 1 => {
            // Complex numbers swap each half on its own.
            let complex = matches!(p.dtype, DType::C64 | DType::C128);
            let w = if complex { w / 2 } else { w };
            Cow::Owned(swap_elements(&decoded, w))
        }
        _ => decoded,
    };
    if let Some((d, DigestScope::Decoded)) = &digest {
        digest::check(d, &decoded, spell)?;
    }
    Ok(decoded)
}
