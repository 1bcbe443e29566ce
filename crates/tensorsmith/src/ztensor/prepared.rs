//! What the streaming front hands each version's manifest writer once the parts are in the
//! file: every part's placement (offset, stored length), encoding and digest, with no bytes.
//! It sits below `write.rs`, `stream.rs` and the `v*_write.rs` files so that they import it,
//! not each other.

use crate::dtype::DType;
use crate::error::Result;
use crate::index::{Digest, Layout, MetaValue, Shape};
use std::collections::BTreeMap;
use std::io::Write;

/// A part already in the file.
pub(crate) struct Placed {
    pub role: String,
    pub dtype: DType,
    pub unknown_type: Option<String>,
    pub offset: u64,
    pub stored_len: u64,
    pub compressed: bool,
    pub decoded_len: u64,
    pub digest: Option<Digest>,
}

pub(crate) struct PlacedObject {
    pub name: String,
    pub shape: Shape,
    pub layout: Layout,
    pub attributes: BTreeMap<String, MetaValue>,
    /// In the order the object was given (the version writers sort as they need).
    pub parts: Vec<Placed>,
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
