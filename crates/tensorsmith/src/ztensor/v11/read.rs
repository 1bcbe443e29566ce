//! Reading zTensor v1.1 (and 1.2) files: `ZTEN1000` at both ends, a CBOR manifest before
//! the 16-byte footer, components at 64-byte aligned offsets. Everything in the manifest is
//! checked (bounds, alignment, overlaps, sizes against shape and dtype) before the index is
//! returned; the reference checks neither overlaps nor short zstd output, this does.

use crate::dtype::DType;
use crate::error::{ErrorKind, Result};
use crate::index::{
    DigestScope, Encoding, Format, Layout, LayoutNames, Part, PartExtra, Parts, TensorIndex,
    TensorInfo, ZtVersion,
};
use crate::ztensor::cbor::{self, Mode, Value};
use crate::ztensor::fields::{self, req, req_text, req_uint, schema};
use crate::ztensor::{blobs, digest, framing, layout, part_type, OpenOptions, Parsed, ReadAt};
use std::borrow::Cow;

/// The 8 bytes that start a v1.1 file, and end it.
pub const MAGIC: &[u8; 8] = b"ZTEN1000";
/// Alignment of components: every one starts at a multiple of 64 bytes.
pub const ALIGN: u64 = 64;
/// Manifest size plus the footer magic.
pub const FOOTER_LEN: u64 = 16;

/// Reads and validates a whole v1.1 (or 1.2) file through `r`: magic at both ends, the
/// manifest before the footer (within the options' manifest limit) and every object in it.
pub fn read_index(r: &dyn ReadAt, opts: &OpenOptions) -> Result<Parsed> {
    let len = framing::check_head(r, MAGIC, "1.1", 8 + FOOTER_LEN)?;
    if &r.read(len - 8..len)?[..] != MAGIC {
        return Err(ErrorKind::ZtFooterMagic { version: "1.1" }.into());
    }
    let (manifest, start) = framing::read_trailing_manifest(r, len - FOOTER_LEN, opts)?;
    parse_manifest(&manifest, start, len)
}

/// Validates a manifest found at `start` in a file of `file_len` bytes.
pub fn parse_manifest(manifest: &[u8], start: u64, file_len: u64) -> Result<Parsed> {
    let root = cbor::decode(manifest, Mode::Lenient)?;
    fields::map(&root, "the manifest")?;
    let version = req_text(&root, "version", "the manifest")?;
    let metadata = fields::attributes(root.get("attributes"))?;
    let objects = fields::map(req(&root, "objects", "the manifest")?, "'objects'")?;
    let mut tensors = Vec::with_capacity(objects.len());
    for (k, o) in objects {
        let name = k
            .as_text()
            .ok_or_else(|| schema("object names must be text"))?;
        tensors.push(object(name, o, start).map_err(|e| e.at_tensor(name))?);
    }
    blobs::check_overlaps(&tensors, None, &[])?;
    tensors.sort_by_key(blobs::data_order_key);
    Ok(Parsed {
        index: TensorIndex {
            format: Format::Ztensor {
                version: ZtVersion::V1_1,
            },
            header_len: 8,
            file_len,
            metadata,
            tensors,
        },
        manifest_version: Some(version.to_string()),
        manifest_range: start..start + manifest.len() as u64,
    })
}

/// Position of a role in the order writers lay parts out: the layout's own order, then
/// the rest (stable).
pub(crate) fn role_rank(layout: &Layout, role: &str) -> usize {
    let roles = match layout {
        Layout::QuantizedGroup => &["packed_weight", "scales", "zeros"][..],
        l => l.roles(),
    };
    roles.iter().position(|r| *r == role).unwrap_or(roles.len())
}

pub(crate) fn order_parts(layout: &Layout, parts: &mut [Part]) {
    parts.sort_by_key(|p| role_rank(layout, &p.role));
}

/// The tensor's element dtype: the part that holds its values.
pub(crate) fn main_dtype(layout: &Layout, parts: &[Part]) -> DType {
    let role = match layout {
        Layout::Dense | Layout::Mx | Layout::Ggml(_) => "data",
        Layout::SparseCsr | Layout::SparseCoo => "values",
        Layout::QuantizedGroup => "scales",
        Layout::Other(_) => "",
    };
    // A layout not known here (an ONNX sparse tensor's `onnx.sparse`, say): its `data` or
    // `values` part, not whichever part sorts first (`indices`, whose dtype is not the
    // tensor's).
    let other = || {
        let by = |r: &str| parts.iter().find(|p| p.role == r);
        matches!(layout, Layout::Other(_)).then(|| by("data").or_else(|| by("values")))?
    };
    parts
        .iter()
        .find(|p| p.role == role)
        .or_else(other)
        .or(parts.first())
        .map_or(DType::U8, |p| p.dtype)
}

fn object(name: &str, o: &Value<'_>, data_end: u64) -> Result<TensorInfo> {
    fields::map(o, "an object")?;
    let shape = fields::shape(req(o, "shape", "the object")?)?;
    let layout = Layout::from_name(req_text(o, "format", "the object")?, LayoutNames::ZtV1);
    let attributes = fields::attributes(o.get("attributes"))?;
    let comps = fields::map(req(o, "components", "the object")?, "'components'")?;
    let mut parts: Vec<Part> = Vec::with_capacity(comps.len());
    let mut unknown_len: Vec<String> = Vec::new();
    for (k, c) in comps {
        let role = k
            .as_text()
            .ok_or_else(|| schema("component roles must be text"))?;
        let (part, known) = component(role, c, data_end)?;
        if !known {
            unknown_len.push(role.to_string());
        }
        parts.push(part);
    }
    order_parts(&layout, &mut parts);
    let mut t = TensorInfo {
        name: name.to_string(),
        dtype: main_dtype(&layout, &parts),
        shape,
        layout,
        parts: Parts::from_vec(parts),
        attributes: attributes.into(),
    };
    resolve_lengths(&mut t, &unknown_len)?;
    layout::check(&t, ZtVersion::V1_1)?;
    Ok(t)
}

/// Parses a component; the bool says whether its decoded length is known (a zstd component
/// without 1.2's `uncompressed_length` is sized from its layout afterwards).
fn component(role: &str, c: &Value<'_>, data_end: u64) -> Result<(Part, bool)> {
    fields::map(c, "a component")?;
    let (dtype, unknown_type) = part_type::read(c, "a component", ZtVersion::V1_1)?;
    let mut extra = PartExtra {
        unknown_type,
        ..Default::default()
    };
    let offset = req_uint(c, "offset", "a component")?;
    let length = req_uint(c, "length", "a component")?;
    let encoding = match fields::opt_text(c, "encoding")? {
        None | Some("raw") => Encoding::Raw,
        Some("zstd") => Encoding::Zstd,
        Some(other) => return Err(ErrorKind::ZtUnknownEncoding(other.to_string()).into()),
    };
    if let Some(d) = fields::opt_text(c, "digest")? {
        extra.digest = digest::parse_legacy(d)?.map(|d| (d, DigestScope::Stored));
    }
    let uncompressed = fields::opt_uint(c, "uncompressed_length")?;
    blobs::check_range(offset, length, ALIGN, 8, data_end)?;
    let (decoded_len, known) = match (&encoding, uncompressed) {
        (Encoding::Raw, Some(u)) if u != length => {
            return Err(ErrorKind::SizeMismatch {
                expected: u,
                actual: length,
            }
            .into())
        }
        (Encoding::Raw, _) => (length, true),
        (_, Some(u)) => (u, true),
        (_, None) => (0, false),
    };
    Ok((
        Part {
            role: Cow::Owned(role.to_string()),
            dtype,
            range: offset..offset + length,
            encoding,
            decoded_len,
            big_endian: false,
            extra: extra.boxed(),
        },
        known,
    ))
}

fn count_of(p: &Part) -> Option<u64> {
    let w = u64::from(p.dtype.bits() / 8);
    (w > 0 && p.decoded_len % w == 0).then(|| p.decoded_len / w)
}

/// Fills in decoded lengths of zstd components from the layout: the size every decoder
/// must then meet exactly. A size that cannot be derived is an error rather than a guess.
fn resolve_lengths(t: &mut TensorInfo, unknown: &[String]) -> Result<()> {
    if unknown.is_empty() {
        return Ok(());
    }
    let is_unknown = |role: &str| unknown.iter().any(|u| u == role);
    let known_count = |t: &TensorInfo, role: &str, per: u64| -> Option<u64> {
        if is_unknown(role) {
            return None;
        }
        t.part(role).and_then(count_of).map(|c| c / per.max(1))
    };
    let elements: u64 = t.shape.iter().product();
    let ndim = t.shape.len() as u64;
    let nnz = match t.layout {
        Layout::SparseCsr => known_count(t, "indices", 1).or_else(|| known_count(t, "values", 1)),
        Layout::SparseCoo => known_count(t, "coords", ndim).or_else(|| known_count(t, "values", 1)),
        _ => None,
    };
    let rows = t.shape.first().copied().unwrap_or(0);
    for p in t.parts.iter_mut() {
        if !is_unknown(&p.role) {
            continue;
        }
        let count = match (&t.layout, p.role.as_ref()) {
            (Layout::Dense, "data") => Some(elements),
            (Layout::SparseCsr, "indptr") => rows.checked_add(1),
            (Layout::SparseCsr, "indices" | "values") | (Layout::SparseCoo, "values") => nnz,
            (Layout::SparseCoo, "coords") => nnz.and_then(|n| n.checked_mul(ndim)),
            _ => None,
        };
        p.decoded_len = count
            .and_then(|n| p.dtype.ztensor_v2_bytes(n))
            .ok_or_else(|| {
                schema(format!(
                    "the decoded size of zstd component '{}' cannot be derived (no uncompressed_length)",
                    p.role
                ))
            })?;
    }
    Ok(())
}
