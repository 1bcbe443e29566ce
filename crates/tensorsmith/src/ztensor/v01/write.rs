//! The zTensor v0.1 manifest, as the 0.1.x reference lays the file out: `ZTEN0001`, each blob at the
//! next multiple of 64 (zero padding; an empty blob still takes its aligned offset), the
//! CBOR array right after the last blob, then its size. Each tensor map is indefinite-length
//! with the reference's key order: name, offset, size, dtype, layout, shape, encoding,
//! data_endianness (raw multi-byte only), checksum.

use crate::error::Result;
use crate::index::{Layout, LayoutNames};
use crate::ztensor::cbor;
use crate::ztensor::digest;
use crate::ztensor::framing;
use crate::ztensor::prepared::PlacedObject;
use std::io::Write;

/// The manifest and its size, after the blobs (the streaming front placed each object's one
/// part at a multiple of 64 after the magic, in order); returns the file's length.
pub(crate) fn finish(objects: &[PlacedObject], out: &mut dyn Write, pos: u64) -> Result<u64> {
    let mut man = Vec::with_capacity(64 + objects.len() * 128);
    cbor::head(&mut man, 4, objects.len() as u64);
    for o in objects {
        let p = &o.parts[0];
        man.push(0xbf);
        cbor::text(&mut man, "name");
        cbor::text(&mut man, &o.name);
        cbor::text(&mut man, "offset");
        cbor::uint(&mut man, p.offset);
        cbor::text(&mut man, "size");
        cbor::uint(&mut man, p.stored_len);
        cbor::text(&mut man, "dtype");
        cbor::text(&mut man, p.dtype.ztensor_v01_name().unwrap_or("uint8"));
        cbor::text(&mut man, "layout");
        cbor::text(&mut man, &Layout::Dense.name(LayoutNames::ZtV1));
        cbor::text(&mut man, "shape");
        cbor::u64_array(&mut man, &o.shape);
        cbor::text(&mut man, "encoding");
        cbor::text(&mut man, if p.compressed { "zstd" } else { "raw" });
        if !p.compressed && p.dtype.bits() > 8 {
            cbor::text(&mut man, "data_endianness");
            cbor::text(&mut man, "little");
        }
        if let Some(d) = &p.digest {
            cbor::text(&mut man, "checksum");
            cbor::text(&mut man, &digest::format(d));
        }
        man.push(0xff);
    }
    Ok(pos + framing::write_trailing_manifest(out, &man)?)
}
