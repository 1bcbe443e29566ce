//! The zTensor v2 manifest and footer, in a file laid out as the 2.1.2 reference does: magic, blobs at multiples of the
//! placement (4096, or 65536 for canonical files), objects in insertion order (name order
//! when canonical) and each object's parts in name order; identical stored bytes written
//! once and referenced twice; an empty blob takes the current aligned offset without
//! advancing; then the manifest blob (deterministic CBOR) and the 40-byte footer.

use crate::error::Result;
use crate::index::{LayoutNames, MetaValue};
use crate::ztensor::cbor::{self, KeyOrder, SortedMap};
use crate::ztensor::digest;
use crate::ztensor::prepared::{pad, PlacedObject};
use crate::ztensor::v2::read::{Footer, SEEKABLE};
use std::collections::BTreeMap;
use std::io::Write;

/// The order an object's parts take in the file: by name.
pub(crate) fn part_order(roles: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..roles.len()).collect();
    order.sort_by(|&a, &b| roles[a].as_bytes().cmp(roles[b].as_bytes()));
    order
}

/// The manifest blob at the next multiple of `align` after `pos` (the end of the blobs the
/// streaming front placed) and the footer; returns the file's length.
pub(crate) fn finish(
    objects: &[PlacedObject],
    attributes: &BTreeMap<String, MetaValue>,
    align: u64,
    out: &mut dyn Write,
    mut pos: u64,
) -> Result<u64> {
    let man = manifest(objects, attributes);
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

/// The deterministic CBOR manifest of `objects` (in their order) and the file attributes.
pub(crate) fn manifest(
    objects: &[PlacedObject],
    attributes: &BTreeMap<String, MetaValue>,
) -> Vec<u8> {
    let mut objs = SortedMap::new();
    for o in objects {
        let mut parts = SortedMap::new();
        for p in &o.parts {
            let (storage, logical) = p.dtype.ztensor_v2_names().unwrap_or(("u8", None));
            let ty = logical.or(p.unknown_type.as_deref());
            let mut pm = SortedMap::new();
            pm.put("dtype", |v| cbor::text(v, storage));
            if let Some(ty) = ty {
                pm.put("type", |v| cbor::text(v, ty));
            }
            pm.put("blob", |v| cbor::u64_array(v, &[p.offset, p.stored_len]));
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
    man
}
