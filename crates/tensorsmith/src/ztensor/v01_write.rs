//! Writing zTensor v0.1 as the 0.1.x reference lays it out: `ZTEN0001`, each blob at the
//! next multiple of 64 (zero padding; an empty blob still takes its aligned offset), the
//! CBOR array right after the last blob, then its size. Each tensor map is indefinite-length
//! with the reference's key order: name, offset, size, dtype, layout, shape, encoding,
//! data_endianness (raw multi-byte only), checksum.

use super::cbor;
use super::digest;
use super::framing;
use super::prepared::{place, PreparedObject};
use super::v01_read::{ALIGN, MAGIC};
use crate::error::Result;
use crate::index::{Layout, LayoutNames};
use std::io::Write;

pub(crate) fn write(objects: &[PreparedObject<'_>], out: &mut dyn Write) -> Result<u64> {
    out.write_all(MAGIC)?;
    let mut pos = MAGIC.len() as u64;
    let mut man = Vec::with_capacity(64 + objects.len() * 128);
    cbor::head(&mut man, 4, objects.len() as u64);
    for o in objects {
        let p = &o.parts[0];
        let offset = place(out, &mut pos, ALIGN, &p.stored)?;
        man.push(0xbf);
        cbor::text(&mut man, "name");
        cbor::text(&mut man, &o.name);
        cbor::text(&mut man, "offset");
        cbor::uint(&mut man, offset);
        cbor::text(&mut man, "size");
        cbor::uint(&mut man, p.stored.len() as u64);
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
