//! Writing zTensor v2 as the 2.1.2 reference does: magic, blobs at multiples of the
//! placement (4096, or 65536 for canonical files), objects in insertion order (name order
//! when canonical) and each object's parts in name order; identical stored bytes written
//! once and referenced twice; an empty blob takes the current aligned offset without
//! advancing; then the manifest blob (deterministic CBOR) and the 40-byte footer.

use super::cbor::{self, KeyOrder, SortedMap};
use super::digest;
use super::prepared::{pad, place, PreparedObject};
use super::v2_read::{Footer, MAGIC, SEEKABLE};
use crate::error::Result;
use crate::index::{LayoutNames, MetaValue};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

/// `align` is the placement the writer front chose (the options' alignment, or the
/// default for plain or canonical files).
pub(crate) fn write(
    objects: &[PreparedObject<'_>],
    attributes: &BTreeMap<String, MetaValue>,
    align: u64,
    out: &mut dyn Write,
) -> Result<u64> {
    out.write_all(&MAGIC)?;
    let mut pos = MAGIC.len() as u64;
    // Blobs already written, by content hash, to find identical bytes.
    let mut written: HashMap<u64, Vec<(u64, &[u8])>> = HashMap::new();
    let mut objs = SortedMap::new();
    for o in objects {
        let mut order: Vec<usize> = (0..o.parts.len()).collect();
        order.sort_by(|&a, &b| o.parts[a].role.as_bytes().cmp(o.parts[b].role.as_bytes()));
        let mut parts = SortedMap::new();
        for i in order {
            let p = &o.parts[i];
            let bytes: &[u8] = &p.stored;
            let offset = if bytes.is_empty() {
                pos.next_multiple_of(align)
            } else {
                let h = xxhash_rust::xxh3::xxh3_64(bytes);
                let same = written
                    .get(&h)
                    .and_then(|v| v.iter().find(|(_, b)| *b == bytes))
                    .map(|(off, _)| *off);
                match same {
                    Some(off) => off,
                    None => {
                        let off = place(out, &mut pos, align, bytes)?;
                        written.entry(h).or_default().push((off, bytes));
                        off
                    }
                }
            };
            let (storage, logical) = p.dtype.ztensor_v2_names().unwrap_or(("u8", None));
            let ty = logical.or(p.unknown_type.as_deref());
            let mut pm = SortedMap::new();
            pm.put("dtype", |v| cbor::text(v, storage));
            if let Some(ty) = ty {
                pm.put("type", |v| cbor::text(v, ty));
            }
            pm.put("blob", |v| {
                cbor::u64_array(v, &[offset, bytes.len() as u64])
            });
            if p.compressed {
                pm.put("encoding", |v| cbor::text(v, SEEKABLE));
                pm.put("decoded_length", |v| cbor::uint(v, p.decoded_len));
            }
            if let Some(d) = &p.digest {
                pm.put("digest", |v| cbor::text(v, &digest::format(d)));
            }
            parts.put(&p.role, |v| pm.finish(v));
        }
        let mut om = SortedMap::new();
        om.put("shape", |v| cbor::u64_array(v, &o.shape));
        om.put("layout", |v| {
            cbor::text(v, &o.layout.name(LayoutNames::ZtV2))
        });
        if !o.attributes.is_empty() {
            om.put("attributes", |v| {
                cbor::meta_map(v, &o.attributes, KeyOrder::Encoded)
            });
        }
        om.put("parts", |v| parts.finish(v));
        objs.put(&o.name, |v| om.finish(v));
    }
    let mut root = SortedMap::new();
    root.put("objects", |v| objs.finish(v));
    if !attributes.is_empty() {
        root.put("attributes", |v| {
            cbor::meta_map(v, attributes, KeyOrder::Encoded)
        });
    }
    let mut man = Vec::new();
    root.finish(&mut man);
    pad(out, &mut pos, align)?;
    let footer = Footer {
        manifest_offset: pos,
        manifest_length: man.len() as u64,
        manifest_hash: xxhash_rust::xxh3::xxh3_64(&man),
        version: 2,
        reserved: 0,
    };
    out.write_all(&man)?;
    out.write_all(&footer.to_bytes())?;
    Ok(pos + man.len() as u64 + 40)
}
