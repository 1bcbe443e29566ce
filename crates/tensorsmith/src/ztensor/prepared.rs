//! What the writer front hands each version's writer: parts already compressed and
//! digested, ready to be placed, and the placement every version does (zero padding to the
//! next aligned offset, then the blob). It sits below `write.rs` and the `v*_write.rs`
//! files so that they import it, not each other.

use crate::dtype::DType;
use crate::error::Result;
use crate::index::{Digest, Layout, MetaValue, Shape};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;

/// A part ready to be laid out: stored bytes, how they are encoded, and the digest.
pub(crate) struct Prepared<'a> {
    pub role: String,
    pub dtype: DType,
    pub unknown_type: Option<String>,
    pub stored: Cow<'a, [u8]>,
    pub compressed: bool,
    pub decoded_len: u64,
    pub digest: Option<Digest>,
}

pub(crate) struct PreparedObject<'a> {
    pub name: String,
    pub shape: Shape,
    pub layout: Layout,
    pub attributes: BTreeMap<String, MetaValue>,
    pub parts: Vec<Prepared<'a>>,
}

/// Zero bytes up to the next multiple of `align` after `pos`.
pub(crate) fn pad(out: &mut dyn Write, pos: &mut u64, align: u64) -> Result<()> {
    let target = pos.next_multiple_of(align);
    const ZEROS: [u8; 4096] = [0; 4096];
    while *pos < target {
        let n = ((target - *pos) as usize).min(ZEROS.len());
        out.write_all(&ZEROS[..n])?;
        *pos += n as u64;
    }
    Ok(())
}

/// Writes `bytes` at the next multiple of `align` after `pos` (zero padding before it);
/// returns the offset it starts at.
pub(crate) fn place(out: &mut dyn Write, pos: &mut u64, align: u64, bytes: &[u8]) -> Result<u64> {
    pad(out, pos, align)?;
    let offset = *pos;
    out.write_all(bytes)?;
    *pos += bytes.len() as u64;
    Ok(offset)
}
