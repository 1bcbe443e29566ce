//! Reading zTensor v0.1 files: `ZTEN0001`, blobs at 64-byte aligned offsets, then a CBOR
//! array of tensor maps (definite or indefinite) and its size as the last 8 bytes. Only
//! dense tensors are defined by the spec; the 0.1.x crate's `sparsecsr`/`sparsecoo` layouts
//! are rejected with a clear error. A missing `layout` means dense (the spec has no such
//! key). Big-endian raw data is flagged on its part and swapped when decoded.

use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{
    DigestScope, Encoding, Format, Layout, LayoutNames, Part, PartExtra, TensorIndex, TensorInfo,
    ZtVersion,
};
use crate::ztensor::cbor::{self, Mode, Value};
use crate::ztensor::fields::{self, req, req_text, req_uint, schema};
use crate::ztensor::{blobs, digest, framing, layout, OpenOptions, Parsed, ReadAt};
use std::borrow::Cow;
use std::collections::HashSet;

/// The 8 bytes that start a v0.1 file.
pub const MAGIC: &[u8; 8] = b"ZTEN0001";
/// Alignment of tensor data: every blob starts at a multiple of 64 bytes.
pub const ALIGN: u64 = 64;
/// Magic, an empty CBOR array, and the size field.
pub const MIN_LEN: u64 = 17;

/// Reads and validates a whole v0.1 file through `r`: magic, the trailing manifest (within
/// the options' manifest limit) and every tensor entry.
pub fn read_index(r: &dyn ReadAt, opts: &OpenOptions) -> Result<Parsed> {
    let len = framing::check_head(r, MAGIC, "0.1", MIN_LEN)?;
    let (manifest, start) = framing::read_trailing_manifest(r, len - 8, opts)?;
    parse_manifest(&manifest, start, len)
}

/// Validates a v0.1 manifest (the CBOR array of tensor entries) that starts at byte `start`
/// of a file of `file_len` bytes: every blob must lie between the magic and the manifest.
pub fn parse_manifest(manifest: &[u8], start: u64, file_len: u64) -> Result<Parsed> {
    let root = cbor::decode(manifest, Mode::Lenient)?;
    let entries = root
        .as_array()
        .ok_or_else(|| schema("the metadata must be a CBOR array"))?;
    let mut tensors = Vec::with_capacity(entries.len());
    let mut names = HashSet::with_capacity(entries.len());
    for e in entries {
        let t = entry(e, start)?;
        if !names.insert(t.name.clone()) {
            return Err(Error::new(ErrorKind::DuplicateKey).at_tensor(&t.name));
        }
        tensors.push(t);
    }
    blobs::check_overlaps(&tensors, None, &[])?;
    tensors.sort_by_key(blobs::data_order_key);
    Ok(Parsed {
        index: TensorIndex {
            format: Format::Ztensor {
                version: ZtVersion::V0_1,
            },
            header_len: 8,
            file_len,
            metadata: Default::default(),
            tensors,
        },
        manifest_version: None,
        manifest_range: start..start + manifest.len() as u64,
    })
}

fn entry(e: &Value<'_>, data_end: u64) -> Result<TensorInfo> {
    fields::map(e, "a tensor entry")?;
    let name = req_text(e, "name", "a tensor entry")?;
    entry_body(name, e, data_end).map_err(|err| err.at_tensor(name))
}

fn entry_body(name: &str, e: &Value<'_>, data_end: u64) -> Result<TensorInfo> {
    let what = "a tensor entry";
    let offset = req_uint(e, "offset", what)?;
    let size = req_uint(e, "size", what)?;
    let dtype_name = req_text(e, "dtype", what)?;
    let dtype = DType::from_ztensor_v01_name(dtype_name)
        .ok_or_else(|| ErrorKind::UnknownDtype(dtype_name.to_string()))?;
    let shape = fields::shape(req(e, "shape", what)?)?;
    let encoding = match req_text(e, "encoding", what)? {
        "raw" => Encoding::Raw,
        "zstd" => Encoding::Zstd,
        other => return Err(ErrorKind::ZtUnknownEncoding(other.to_string()).into()),
    };
    // v0.1 defines dense tensors only (the 0.1.x crate's sparse layouts are refused).
    if let Some(name) = fields::opt_text(e, "layout")? {
        if Layout::from_name(name, LayoutNames::ZtV1) != Layout::Dense {
            return Err(ErrorKind::ZtUnsupportedLayout(name.to_string()).into());
        }
    }
    let big = match fields::opt_text(e, "data_endianness")? {
        None | Some("little") => false,
        Some("big") => true,
        Some(other) => {
            return Err(schema(format!(
                "data_endianness must be 'little' or 'big', not '{other}'"
            )))
        }
    };
    let mut extra = PartExtra::default();
    if let Some(c) = fields::opt_text(e, "checksum")? {
        extra.digest = digest::parse_legacy(c)?.map(|d| (d, DigestScope::Stored));
    }
    blobs::check_range(offset, size, ALIGN, 8, data_end)?;
    let elements: u64 = shape.iter().product();
    let decoded_len = match encoding {
        Encoding::Raw => size,
        _ => dtype
            .packed_bytes(elements)
            .ok_or(ErrorKind::ShapeOverflow)?,
    };
    let t = TensorInfo {
        name: name.to_string(),
        dtype,
        shape,
        layout: Layout::Dense,
        parts: smallvec::smallvec![Part {
            role: Cow::Borrowed("data"),
            dtype,
            range: offset..offset + size,
            // The spec ties data_endianness to raw data; zstd payloads are little-endian.
            big_endian: big && encoding == Encoding::Raw && dtype.bits() > 8,
            encoding,
            decoded_len,
            extra: extra.boxed(),
        }],
        attributes: Default::default(),
    };
    layout::check(&t, ZtVersion::V0_1)?;
    Ok(t)
}
