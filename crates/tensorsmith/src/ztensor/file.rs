//! An opened zTensor file: the validated index plus access to each part's bytes, decoded
//! (decompressed, byte-swapped to little-endian) and optionally verified. Raw little-endian
//! parts of a mapped file are served zero-copy; decoding and verifying many tensors runs in
//! parallel.

use super::{detect, digest, layout, v01_read, v11_read, v2_read, OpenOptions, Parsed};
use crate::codec;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{DigestScope, Encoding, Part, TensorIndex, TensorInfo, ZtVersion};
use crate::source::Source;
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Random access to a file's bytes: an opened [`Source`] or a byte slice (for tests and
/// fuzzing, every parser runs on `&[u8]`: pass `&bytes` where `bytes: &[u8]`).
pub trait ReadAt: Sync {
    fn len(&self) -> u64;
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>>;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ReadAt for Source {
    fn len(&self) -> u64 {
        Source::len(self)
    }
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        self.bytes(range)
    }
}

impl ReadAt for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        if range.start > range.end || range.end > ReadAt::len(self) {
            return Err(ErrorKind::Truncated {
                needed: range.end,
                available: ReadAt::len(self),
            }
            .into());
        }
        Ok(Cow::Borrowed(
            &self[range.start as usize..range.end as usize],
        ))
    }
}

/// Detects the version and validates the whole manifest of a file held by `r`.
pub fn parse_with(r: &dyn ReadAt, opts: &OpenOptions) -> Result<(ZtVersion, Parsed)> {
    let head = if r.len() >= 8 {
        r.read(0..8)?
    } else {
        Cow::Borrowed(&[][..])
    };
    let version = detect(&head).ok_or(ErrorKind::ZtUnknownMagic)?;
    let parsed = match version {
        ZtVersion::V0_1 => v01_read::read_index(r, opts)?,
        ZtVersion::V1_1 => v11_read::read_index(r, opts)?,
        ZtVersion::V2 => v2_read::read_index(r, opts)?,
    };
    Ok((version, parsed))
}

/// Validates a whole file held in memory.
pub fn parse_bytes(bytes: &[u8], opts: &OpenOptions) -> Result<Parsed> {
    parse_with(&bytes, opts).map(|(_, p)| p)
}

fn swap_elements(bytes: &[u8], width: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for c in out.chunks_exact_mut(width) {
        c.reverse();
    }
    out
}

/// A part's decoded bytes (little-endian elements), checking the digest first when
/// `verify` is set. Borrowed from `r` when the stored bytes are the decoded bytes.
pub fn decode_part<'r>(r: &'r dyn ReadAt, p: &Part, verify: bool) -> Result<Cow<'r, [u8]>> {
    if let Some(s) = p.shard() {
        return Err(ErrorKind::ZtExternalShard(s.to_string()).into());
    }
    let stored = r.read(p.range.clone())?;
    let digest = p.digest().filter(|_| verify);
    if let Some((d, DigestScope::Stored)) = &digest {
        digest::check(d, &stored)?;
    }
    let decoded = match &p.encoding {
        Encoding::Raw => stored,
        Encoding::Zstd => Cow::Owned(codec::decompress_exact(&stored, p.decoded_len)?),
        Encoding::ZstdSeekable => Cow::Owned(codec::seekable_decode(&stored, p.decoded_len)?),
        Encoding::Other(e) => return Err(ErrorKind::ZtUnknownEncoding(e.to_string()).into()),
    };
    if decoded.len() as u64 != p.decoded_len {
        return Err(ErrorKind::ZtDecodedLength {
            expected: p.decoded_len,
            actual: decoded.len().to_string(),
        }
        .into());
    }
    let decoded = match (p.big_endian, p.dtype.byte_size()) {
        (true, Some(w)) if w > 1 => {
            // Complex numbers swap each half on its own.
            let complex = matches!(
                p.dtype,
                crate::dtype::DType::C64 | crate::dtype::DType::C128
            );
            let w = if complex { w / 2 } else { w };
            Cow::Owned(swap_elements(&decoded, w))
        }
        _ => decoded,
    };
    if let Some((d, DigestScope::Decoded)) = &digest {
        digest::check(d, &decoded)?;
    }
    Ok(decoded)
}

/// What [`ZtFile::verify`] found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Parts whose digest was checked.
    pub checked: u64,
    /// Parts without a digest (still decoded and checked against their data rules).
    pub undigested: u64,
    /// Every failure: digest mismatches, corrupt streams, data-rule violations.
    pub failures: Vec<Error>,
}

impl VerifyReport {
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Opens and validates a zTensor file of any version.
pub fn open(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<ZtFile> {
    ZtFile::open_with(path, opts)
}

/// An opened, validated zTensor file.
#[derive(Debug)]
pub struct ZtFile {
    path: PathBuf,
    source: Source,
    version: ZtVersion,
    parsed: Parsed,
    by_name: HashMap<String, usize>,
}

impl ZtFile {
    pub fn open(path: impl AsRef<Path>) -> Result<ZtFile> {
        Self::open_with(path, &OpenOptions::default())
    }

    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<ZtFile> {
        let path = path.as_ref();
        let source = Source::open(path, opts.backend)?;
        let (version, parsed) = parse_with(&source, opts).map_err(|e| e.in_file(path))?;
        let by_name = parsed.index.by_name();
        Ok(ZtFile {
            path: path.to_path_buf(),
            source,
            version,
            parsed,
            by_name,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn version(&self) -> ZtVersion {
        self.version
    }

    pub fn index(&self) -> &TensorIndex {
        &self.parsed.index
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The index and the bytes, for callers that keep them apart.
    pub fn into_parts(self) -> (TensorIndex, Source) {
        (self.parsed.index, self.source)
    }

    /// The manifest's own `version` string, where it has one (v1.1: `"1.1.0"`/`"1.2.0"`).
    pub fn manifest_version(&self) -> Option<&str> {
        self.parsed.manifest_version.as_deref()
    }

    pub fn manifest_range(&self) -> Range<u64> {
        self.parsed.manifest_range.clone()
    }

    fn err(&self, e: Error, name: &str) -> Error {
        e.at_tensor(name).in_file(&self.path)
    }

    pub fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.by_name
            .get(name)
            .map(|&i| &self.parsed.index.tensors[i])
            .ok_or_else(|| self.err(ErrorKind::NoSuchTensor.into(), name))
    }

    fn part(&self, name: &str, role: &str) -> Result<&Part> {
        self.info(name)?.part(role).ok_or_else(|| {
            self.err(
                ErrorKind::ZtSchema(format!("no part '{role}'")).into(),
                name,
            )
        })
    }

    /// A part's bytes as stored (possibly compressed or big-endian).
    pub fn stored_bytes(&self, name: &str, role: &str) -> Result<Cow<'_, [u8]>> {
        let p = self.part(name, role)?;
        self.source
            .bytes(p.range.clone())
            .map_err(|e| self.err(e, name))
    }

    /// A part's decoded bytes: decompressed, little-endian, exactly `decoded_len` long.
    /// Structural: parts of unknown logical types and layouts are returned as they are.
    pub fn part_bytes(&self, name: &str, role: &str) -> Result<Cow<'_, [u8]>> {
        let p = self.part(name, role)?;
        decode_part(&self.source, p, false).map_err(|e| self.err(e, name))
    }

    /// Like [`ZtFile::part_bytes`], also checking the part's digest if it has one.
    pub fn part_bytes_verified(&self, name: &str, role: &str) -> Result<Cow<'_, [u8]>> {
        let p = self.part(name, role)?;
        decode_part(&self.source, p, true).map_err(|e| self.err(e, name))
    }

    /// A dense tensor's decoded bytes, refusing data whose logical type is unknown (it must
    /// not be read as its storage type).
    pub fn tensor_bytes(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        let t = self.info(name)?;
        if t.layout != crate::index::Layout::Dense {
            return Err(self.err(
                ErrorKind::ZtUnsupportedLayout(format!("{:?} (read its parts)", t.layout)).into(),
                name,
            ));
        }
        if let Some(ty) = t.parts[0].unknown_type() {
            return Err(self.err(ErrorKind::ZtUnknownType(ty.to_string()).into(), name));
        }
        self.part_bytes(name, "data")
    }

    /// Decodes every part of every tensor, in parallel, in index order (each tensor's parts
    /// in `parts` order), checking digests when `verify` is set.
    pub fn read_all(&self, verify: bool) -> Result<Vec<Vec<Cow<'_, [u8]>>>> {
        self.parsed
            .index
            .tensors
            .par_iter()
            .map(|t| {
                t.parts
                    .iter()
                    .map(|p| decode_part(&self.source, p, verify).map_err(|e| self.err(e, &t.name)))
                    .collect()
            })
            .collect()
    }

    /// Decodes every part (in parallel), checks every digest and every data rule (bool
    /// bytes, f4 padding, sparse indices), and reports all failures.
    pub fn verify(&self) -> VerifyReport {
        let results: Vec<(u64, u64, Vec<Error>)> = self
            .parsed
            .index
            .tensors
            .par_iter()
            .map(|t| {
                let (mut checked, mut undigested, mut failures) = (0, 0, Vec::new());
                let mut decoded = Vec::with_capacity(t.parts.len());
                for p in &t.parts {
                    if p.digest().is_some() {
                        checked += 1;
                    } else {
                        undigested += 1;
                    }
                    match decode_part(&self.source, p, true) {
                        Ok(b) => decoded.push(b),
                        Err(e) => {
                            // A digest mismatch still leaves bytes whose data rules can be
                            // checked: report both.
                            let digest = matches!(e.kind(), ErrorKind::DigestMismatch { .. });
                            failures.push(self.err(e, &t.name));
                            if digest {
                                if let Ok(b) = decode_part(&self.source, p, false) {
                                    decoded.push(b);
                                }
                            }
                        }
                    }
                }
                if decoded.len() == t.parts.len() {
                    let refs: Vec<&[u8]> = decoded.iter().map(|b| &b[..]).collect();
                    if let Err(e) = layout::check_data(t, &refs) {
                        failures.push(self.err(e, &t.name));
                    }
                }
                (checked, undigested, failures)
            })
            .collect();
        let mut r = VerifyReport::default();
        for (c, u, f) in results {
            r.checked += c;
            r.undigested += u;
            r.failures.extend(f);
        }
        r
    }
}
