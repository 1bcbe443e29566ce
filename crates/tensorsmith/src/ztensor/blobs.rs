//! Rules every zTensor version applies to the byte ranges a manifest points at: alignment,
//! bounds, and no partial overlap (ranges must be identical or disjoint; empty ones are
//! exempt, as zero-size blobs share the next blob's offset).

use crate::error::{ErrorKind, Result};
use crate::index::TensorInfo;

/// Checks one stored range: aligned, not before `min_offset`, and ending by `limit`.
pub fn check_range(offset: u64, len: u64, align: u64, min_offset: u64, limit: u64) -> Result<()> {
    if offset % align != 0 {
        return Err(ErrorKind::ZtMisaligned { offset, align }.into());
    }
    if offset < min_offset {
        return Err(ErrorKind::ZtBlobInHeader {
            offset,
            min: min_offset,
        }
        .into());
    }
    match offset.checked_add(len) {
        Some(end) if end <= limit => Ok(()),
        _ => Err(ErrorKind::ZtBlobOutOfBounds { offset, len, limit }.into()),
    }
}

/// Rejects partial overlaps among the parts stored in one file: this one (`shard` None, plus
/// `extra`, e.g. the v2 manifest blob) or the named shard. Identical ranges are allowed:
/// they are tied weights.
pub fn check_overlaps(
    tensors: &[TensorInfo],
    shard: Option<&str>,
    extra: &[std::ops::Range<u64>],
) -> Result<()> {
    let mut ranges: Vec<(u64, u64, usize)> = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        for p in &t.parts {
            if p.shard() == shard && p.range.end > p.range.start {
                ranges.push((p.range.start, p.range.end, i));
            }
        }
    }
    for r in extra {
        if r.end > r.start {
            ranges.push((r.start, r.end, usize::MAX));
        }
    }
    ranges.sort_unstable();
    ranges.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    let mut prev: Option<(u64, u64, usize)> = None;
    for r in ranges {
        if let Some(p) = prev {
            if r.0 < p.1 {
                let err = crate::Error::new(ErrorKind::ZtOverlap {
                    a_offset: p.0,
                    a_len: p.1 - p.0,
                    b_offset: r.0,
                    b_len: r.1 - r.0,
                });
                return Err(match tensors.get(r.2) {
                    Some(t) => err.at_tensor(&t.name),
                    None => err,
                });
            }
        }
        if prev.is_none_or(|p| r.1 > p.1) {
            prev = Some(r);
        }
    }
    Ok(())
}

/// Where a tensor's data starts in this file, for ordering tensors by their data: the
/// smallest (start, end) of its local parts (an empty part sorts before the blob it shares
/// an offset with, as writers place it).
pub fn data_order_key(t: &TensorInfo) -> (u64, u64) {
    t.parts
        .iter()
        .filter(|p| p.shard().is_none())
        .map(|p| (p.range.start, p.range.end))
        .min()
        .unwrap_or((u64::MAX, u64::MAX))
}
