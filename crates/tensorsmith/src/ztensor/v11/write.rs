//! The zTensor v1.1 manifest, in a file laid out as the 1.1.1 reference does: `ZTEN1000`, blobs in insertion order
//! at multiples of 64 (an object's parts in its layout's order: values, indices, indptr for
//! CSR), the manifest right after the last blob, its size, and the magic again. Manifest
//! keys in the reference's order: root `version, attributes?, objects`; object `shape,
//! format, attributes?, components`; component `dtype, offset, length, encoding?, digest?`;
//! `objects`, `components` and attribute maps in byte-wise key order. A compressed part of
//! a non-dense object also gets 1.2's `uncompressed_length` (after `length`; 1.1.1 ignores
//! it): without it a reader cannot know the decoded size of, say, CSR values before
//! inflating them.

use crate::error::Result;
use crate::index::{Layout, LayoutNames, MetaValue};
use crate::ztensor::cbor::{self, KeyOrder};
use crate::ztensor::digest;
use crate::ztensor::framing;
use crate::ztensor::prepared::PlacedObject;
use crate::ztensor::v11::read::{role_rank, MAGIC};
use std::collections::BTreeMap;
use std::io::Write;

/// The order an object's parts take in the file: the layout's (values, indices, indptr).
pub(crate) fn part_order(layout: &Layout, roles: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..roles.len()).collect();
    order.sort_by_key(|&i| role_rank(layout, roles[i]));
    order
}

/// The manifest, its size and the magic again, after the blobs (placed by the streaming
/// front at multiples of 64 in [`part_order`]); returns the file's length.
pub(crate) fn finish(
    objects: &[PlacedObject],
    attributes: &BTreeMap<String, MetaValue>,
    out: &mut dyn Write,
    pos: u64,
) -> Result<u64> {
    // (name, encoded object map), to be sorted by name.
    let mut encoded: Vec<(&str, Vec<u8>)> = Vec::with_capacity(objects.len());
    for o in objects {
        let mut comps: Vec<(&str, Vec<u8>)> = Vec::with_capacity(o.parts.len());
        for p in &o.parts {
            let mut c = Vec::with_capacity(96);
            let sized = p.compressed && o.layout != Layout::Dense;
            let n = 3
                + usize::from(sized)
                + usize::from(p.compressed)
                + usize::from(p.digest.is_some());
            cbor::head(&mut c, 5, n as u64);
            cbor::text(&mut c, "dtype");
            cbor::text(&mut c, p.dtype.ztensor_v11_name().unwrap_or("u8"));
            cbor::text(&mut c, "offset");
            cbor::uint(&mut c, p.offset);
            cbor::text(&mut c, "length");
            cbor::uint(&mut c, p.stored_len);
            if sized {
                cbor::text(&mut c, "uncompressed_length");
                cbor::uint(&mut c, p.decoded_len);
            }
            if p.compressed {
                cbor::text(&mut c, "encoding");
                cbor::text(&mut c, "zstd");
            }
            if let Some(d) = &p.digest {
                cbor::text(&mut c, "digest");
                cbor::text(&mut c, &digest::format(d));
            }
            comps.push((&p.role, c));
        }
        comps.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut m = Vec::with_capacity(128);
        cbor::head(&mut m, 5, 3 + u64::from(!o.attributes.is_empty()));
        cbor::text(&mut m, "shape");
        cbor::u64_array(&mut m, &o.shape);
        cbor::text(&mut m, "format");
        cbor::text(&mut m, &o.layout.name(LayoutNames::ZtV1));
        if !o.attributes.is_empty() {
            cbor::text(&mut m, "attributes");
            cbor::meta_map(&mut m, &o.attributes, KeyOrder::Text);
        }
        cbor::text(&mut m, "components");
        cbor::head(&mut m, 5, comps.len() as u64);
        for (role, c) in comps {
            cbor::text(&mut m, role);
            m.extend_from_slice(&c);
        }
        encoded.push((&o.name, m));
    }
    encoded.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut man = Vec::with_capacity(
        64 + encoded
            .iter()
            .map(|e| e.1.len() + e.0.len() + 4)
            .sum::<usize>(),
    );
    cbor::head(&mut man, 5, 2 + u64::from(!attributes.is_empty()));
    cbor::text(&mut man, "version");
    cbor::text(&mut man, "1.1.0");
    if !attributes.is_empty() {
        cbor::text(&mut man, "attributes");
        cbor::meta_map(&mut man, attributes, KeyOrder::Text);
    }
    cbor::text(&mut man, "objects");
    cbor::head(&mut man, 5, encoded.len() as u64);
    for (name, m) in encoded {
        cbor::text(&mut man, name);
        man.extend_from_slice(&m);
    }
    let n = framing::write_trailing_manifest(out, &man)?;
    out.write_all(MAGIC)?;
    Ok(pos + n + MAGIC.len() as u64)
}
