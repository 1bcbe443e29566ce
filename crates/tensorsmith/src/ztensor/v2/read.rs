//! Reading zTensor v2 files: 8-byte magic, blobs at multiples of 4096, a deterministic-CBOR
//! manifest blob, and a 40-byte footer (manifest offset, length, XXH3-64, version, reserved,
//! magic). The validation summary of the v2 spec (§3.6) runs in full before the index is
//! returned: footer, manifest bounds and hash, deterministic CBOR, schema, names, blob
//! alignment and bounds, pairwise identical-or-disjoint blobs, shard references, and the
//! layout size rules.

use crate::error::{ErrorKind, Result};
use crate::index::{
    DigestScope, Encoding, Format, Layout, LayoutNames, MetaValue, Part, PartExtra, Parts,
    TensorIndex, TensorInfo, ZtVersion,
};
use crate::ztensor::cbor::{self, Mode, Value};
use crate::ztensor::fields::{self, req, req_text, schema};
use crate::ztensor::{
    blobs, digest, framing, layout, part_type, v11_read, OpenOptions, Parsed, ReadAt,
};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The 8 bytes that start a v2 file and end its footer (`\x89ZT2\r\n\x1a\n`, PNG-style: a
/// transfer that mangles line endings or the high bit shows).
pub const MAGIC: [u8; 8] = [0x89, b'Z', b'T', b'2', 0x0d, 0x0a, 0x1a, 0x0a];
/// The alignment floor: every blob offset is a multiple of it, and at least it.
pub const ALIGN: u64 = 4096;
/// Canonical placement.
pub const CANONICAL_ALIGN: u64 = 65536;
/// Bytes of the footer at the end of the file.
pub const FOOTER_LEN: u64 = 40;
/// Most dimensions a tensor may have.
pub const MAX_RANK: usize = 64;
/// Longest tensor name, in bytes.
pub const MAX_NAME_LEN: usize = 1024;
/// The manifest's name for the seekable zstd encoding ([`crate::index::Encoding::ZstdSeekable`]).
pub const SEEKABLE: &str = "zt.zstd-seekable/1";

/// The fields of the 40-byte footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Offset of the manifest blob in the file.
    pub manifest_offset: u64,
    /// Length of the manifest blob in bytes; 0 in a data shard, which has no manifest.
    pub manifest_length: u64,
    /// XXH3-64 of the manifest bytes.
    pub manifest_hash: u64,
    /// The format version; 2 for a file this reader accepts.
    pub version: u32,
    /// Reserved; writers put 0 and readers ignore it.
    pub reserved: u32,
}

impl Footer {
    /// Parses the last 40 bytes of a file. Fails with `ZtFooterMagic` when `b` is not 40 bytes
    /// ending in [`MAGIC`]; the fields are not checked here.
    pub fn parse(b: &[u8]) -> Result<Footer> {
        if b.len() != FOOTER_LEN as usize || b[32..] != MAGIC {
            return Err(ErrorKind::ZtFooterMagic { version: "2" }.into());
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Ok(Footer {
            manifest_offset: u64_at(0),
            manifest_length: u64_at(8),
            manifest_hash: u64_at(16),
            version: u32_at(24),
            reserved: u32_at(28),
        })
    }

    /// The 40 footer bytes: the fields little-endian, then [`MAGIC`].
    pub fn to_bytes(self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&self.manifest_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.manifest_length.to_le_bytes());
        b[16..24].copy_from_slice(&self.manifest_hash.to_le_bytes());
        b[24..28].copy_from_slice(&self.version.to_le_bytes());
        b[28..32].copy_from_slice(&self.reserved.to_le_bytes());
        b[32..].copy_from_slice(&MAGIC);
        b
    }
}

/// Reads and validates a whole v2 file through `r`: footer, manifest bounds and hash,
/// deterministic CBOR, schema and blob placement, as the module describes.
pub fn read_index(r: &dyn ReadAt, opts: &OpenOptions) -> Result<Parsed> {
    let len = framing::check_head(r, &MAGIC, "2", 8 + FOOTER_LEN)?;
    let footer = Footer::parse(&r.read(len - FOOTER_LEN..len)?)?;
    if footer.version != 2 {
        return Err(ErrorKind::ZtFooterVersion(footer.version).into());
    }
    if footer.manifest_length == 0 {
        return Err(schema(
            "no manifest: this is a data shard, readable only through its root file",
        ));
    }
    if footer.manifest_length > opts.max_manifest_len() {
        return Err(ErrorKind::ZtManifestTooLarge {
            len: footer.manifest_length,
            limit: opts.max_manifest_len(),
        }
        .into());
    }
    let data_end = len - FOOTER_LEN;
    let (off, mlen) = (footer.manifest_offset, footer.manifest_length);
    if off.checked_add(mlen).is_none_or(|e| e > data_end) {
        return Err(ErrorKind::ZtManifestOutOfBounds {
            offset: off,
            len: mlen,
            file_len: len,
        }
        .into());
    }
    blobs::check_range(off, mlen, ALIGN, ALIGN, data_end)?;
    let manifest = r.read(off..off + mlen)?;
    let actual = xxhash_rust::xxh3::xxh3_64(&manifest);
    if actual != footer.manifest_hash {
        return Err(ErrorKind::ZtManifestHash {
            expected: footer.manifest_hash,
            actual,
        }
        .into());
    }
    parse_manifest(&manifest, off, len)
}

/// What a file attribute's name is called in errors: the key other formats call metadata.
pub const FILE_ATTRIBUTE: &str = "file attribute (metadata key)";

/// The name rules of §3.5: non-empty, at most 1024 bytes, no NUL. `what` names the name's
/// kind in the error ("object", "part", "attribute", ...).
pub fn check_name(what: &'static str, name: &str) -> Result<()> {
    let rule = if name.is_empty() {
        "names must not be empty"
    } else if name.len() > MAX_NAME_LEN {
        "names must be at most 1024 bytes"
    } else if name.contains('\0') {
        "names must not contain NUL"
    } else {
        return Ok(());
    };
    Err(ErrorKind::ZtBadName {
        what,
        name: name.to_string(),
        rule,
    }
    .into())
}

/// Shard names (§7.1): 1-64 bytes of `A-Za-z0-9._-`, not starting with `.`.
fn check_shard_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ErrorKind::ZtBadName {
            what: "shard",
            name: name.to_string(),
            rule: "shard names are 1-64 bytes of A-Z a-z 0-9 . _ - and do not start with '.'",
        }
        .into())
    }
}

fn attributes(v: Option<&Value<'_>>, what: &'static str) -> Result<BTreeMap<String, MetaValue>> {
    let a = fields::attributes(v)?;
    for k in a.keys() {
        check_name(what, k)?;
    }
    Ok(a)
}

/// Validates a manifest that sits at `offset` in a file of `file_len` bytes.
pub fn parse_manifest(manifest: &[u8], offset: u64, file_len: u64) -> Result<Parsed> {
    let root = cbor::decode(manifest, Mode::Deterministic)?;
    fields::map(&root, "the manifest")?;
    let mut shards: BTreeMap<String, u64> = BTreeMap::new();
    if let Some(s) = root.get("shards") {
        for (k, v) in fields::map(s, "'shards'")? {
            let name = k
                .as_text()
                .ok_or_else(|| schema("shard names must be text"))?;
            check_shard_name(name)?;
            fields::map(v, "a shard entry")?;
            let size = fields::req_uint(v, "size", "a shard entry")?;
            digest::parse_v2(req_text(v, "digest", "a shard entry")?)?;
            shards.insert(name.to_string(), size);
        }
    }
    let metadata = attributes(root.get("attributes"), FILE_ATTRIBUTE)?;
    let objects = fields::map(req(&root, "objects", "the manifest")?, "'objects'")?;
    let mut tensors = Vec::with_capacity(objects.len());
    for (k, o) in objects {
        let name = k
            .as_text()
            .ok_or_else(|| schema("object names must be text"))?;
        check_name("object", name)?;
        tensors.push(object(name, o, file_len, &shards).map_err(|e| e.at_tensor(name))?);
    }
    let manifest_range = offset..offset + manifest.len() as u64;
    blobs::check_overlaps(&tensors, None, std::slice::from_ref(&manifest_range))?;
    for s in shards.keys() {
        blobs::check_overlaps(&tensors, Some(s), &[])?;
    }
    tensors.sort_by_key(blobs::data_order_key);
    let header_len = tensors
        .iter()
        .flat_map(|t| t.parts.iter())
        .filter(|p| p.shard().is_none())
        .map(|p| p.range.start)
        .min()
        .unwrap_or(offset);
    Ok(Parsed {
        index: TensorIndex {
            format: Format::Ztensor {
                version: ZtVersion::V2,
            },
            header_len,
            file_len,
            metadata,
            tensors,
        },
        manifest_version: None,
        manifest_range,
    })
}

fn object(
    name: &str,
    o: &Value<'_>,
    file_len: u64,
    shards: &BTreeMap<String, u64>,
) -> Result<TensorInfo> {
    fields::map(o, "an object")?;
    let shape = fields::shape(req(o, "shape", "the object")?)?;
    if shape.len() > MAX_RANK {
        return Err(schema(format!("rank {} exceeds 64", shape.len())));
    }
    let layout = Layout::from_name(req_text(o, "layout", "the object")?, LayoutNames::ZtV2);
    let attributes = attributes(o.get("attributes"), "attribute")?;
    let pm = fields::map(req(o, "parts", "the object")?, "'parts'")?;
    if pm.is_empty() {
        return Err(schema("object has no parts"));
    }
    let mut parts: Vec<Part> = Vec::with_capacity(pm.len());
    for (k, p) in pm {
        let role = k
            .as_text()
            .ok_or_else(|| schema("part names must be text"))?;
        check_name("part", role)?;
        parts.push(part(role, p, file_len, shards)?);
    }
    // The reference writer lays parts out in ascending name order; keep that order.
    parts.sort_by(|a, b| a.role.as_bytes().cmp(b.role.as_bytes()));
    let t = TensorInfo {
        name: name.to_string(),
        dtype: v11_read::main_dtype(&layout, &parts),
        shape,
        layout,
        parts: Parts::from_vec(parts),
        attributes: attributes.into(),
    };
    layout::check(&t, ZtVersion::V2)?;
    Ok(t)
}

fn part(role: &str, p: &Value<'_>, file_len: u64, shards: &BTreeMap<String, u64>) -> Result<Part> {
    fields::map(p, "a part")?;
    let (dtype, unknown_type) = part_type::read(p, "a part", ZtVersion::V2)?;
    let mut extra = PartExtra {
        unknown_type,
        ..Default::default()
    };
    let blob = req(p, "blob", "a part")?
        .as_array()
        .ok_or_else(|| schema("'blob' must be an array"))?;
    if blob.len() != 2 {
        return Err(schema("'blob' must have 2 elements"));
    }
    let offset = fields::uint(&blob[0], "blob")?;
    let length = fields::uint(&blob[1], "blob")?;
    let limit = match fields::opt_text(p, "shard")? {
        None => file_len - FOOTER_LEN,
        Some(s) => {
            let size = *shards
                .get(s)
                .ok_or_else(|| ErrorKind::ZtShardRef(s.to_string()))?;
            extra.shard = Some(s.to_string());
            size.saturating_sub(FOOTER_LEN)
        }
    };
    let encoding = match fields::opt_text(p, "encoding")? {
        None => Encoding::Raw,
        Some(SEEKABLE) => Encoding::ZstdSeekable,
        Some(other) => Encoding::Other(other.into()),
    };
    let decoded = fields::opt_uint(p, "decoded_length")?;
    let decoded_len = match (&encoding, decoded) {
        (Encoding::Raw, None) => length,
        (Encoding::Raw, Some(_)) | (_, None) => {
            return Err(schema(
                "'decoded_length' is required iff 'encoding' is present",
            ))
        }
        (_, Some(d)) => d,
    };
    if let Some(d) = fields::opt_text(p, "digest")? {
        extra.digest = Some((digest::parse_v2(d)?, DigestScope::Decoded));
    }
    blobs::check_range(offset, length, ALIGN, ALIGN, limit)?;
    Ok(Part {
        role: Cow::Owned(role.to_string()),
        dtype,
        range: offset..offset + length,
        encoding,
        decoded_len,
        big_endian: false,
        extra: extra.boxed(),
    })
}
