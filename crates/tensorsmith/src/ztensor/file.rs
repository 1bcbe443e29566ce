//! An opened zTensor file: the validated index plus access to each part's bytes, decoded
//! (decompressed, byte-swapped to little-endian) and optionally verified. Raw little-endian
//! parts of a mapped file are served zero-copy; decoding and verifying many tensors runs in
//! parallel.

use crate::bytes::{LocalFile, ReadAt};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{FileFormat, VerifyReport};
use crate::index::{Part, TensorIndex, TensorInfo, ZtVersion};
use crate::ztensor::format::{decode_part, parse_with, Ztensor};
use crate::ztensor::{OpenOptions, Parsed};
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Validates a whole file held in memory.
pub fn parse_bytes(bytes: &[u8], opts: &OpenOptions) -> Result<Parsed> {
    parse_with(&bytes, opts).map(|(_, p)| p)
}

/// Opens and validates a zTensor file of any version, detected from its magic, with the
/// limits and backend of `opts`.
///
/// # Errors
///
/// - [`ErrorKind::Io`] when the file cannot be opened or read.
/// - [`ErrorKind::ZtUnknownMagic`] when the file starts with no zTensor magic.
/// - `ErrorKind::Zt*` variants for the rule the file breaks (each names the file):
///   [`ErrorKind::ZtTooSmall`], [`ErrorKind::ZtFooterMagic`],
///   [`ErrorKind::ZtManifestTooLarge`] (over the options' manifest limit),
///   [`ErrorKind::ZtManifestHash`], [`ErrorKind::ZtSchema`], [`ErrorKind::ZtMisaligned`],
///   [`ErrorKind::ZtOverlap`], [`ErrorKind::ZtLayoutRule`], ...
/// - [`ErrorKind::Cbor`] or [`ErrorKind::CborNotDeterministic`] for a manifest that is not
///   valid (v2: deterministic) CBOR.
pub fn open(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<ZtFile> {
    ZtFile::open_with(path, opts)
}

/// An opened, validated zTensor file.
#[derive(Debug)]
pub struct ZtFile {
    path: PathBuf,
    source: LocalFile,
    version: ZtVersion,
    parsed: Parsed,
    by_name: HashMap<String, usize>,
}

impl ZtFile {
    /// Opens and validates the zTensor file at `path` with default options.
    ///
    /// # Errors
    ///
    /// As [`open`].
    pub fn open(path: impl AsRef<Path>) -> Result<ZtFile> {
        Self::open_with(path, &OpenOptions::new())
    }

    /// Opens and validates the zTensor file at `path` under `opts`.
    ///
    /// # Errors
    ///
    /// As [`open`].
    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<ZtFile> {
        let path = path.as_ref();
        let source = LocalFile::open(path, opts.backend())?;
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

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The on-disk version, detected from the magic.
    pub fn version(&self) -> ZtVersion {
        self.version
    }

    /// The validated index: tensors in the order of their data, with absolute byte ranges.
    pub fn index(&self) -> &TensorIndex {
        &self.parsed.index
    }

    /// The open file, for reading parts' stored bytes at their ranges.
    pub fn source(&self) -> &LocalFile {
        &self.source
    }

    /// The index and the bytes, for callers that keep them apart.
    pub fn into_parts(self) -> (TensorIndex, LocalFile) {
        (self.parsed.index, self.source)
    }

    /// The manifest's own `version` string, where it has one (v1.1: `"1.1.0"`/`"1.2.0"`).
    pub fn manifest_version(&self) -> Option<&str> {
        self.parsed.manifest_version.as_deref()
    }

    /// Where the manifest lies in the file, in bytes.
    pub fn manifest_range(&self) -> Range<u64> {
        self.parsed.manifest_range.clone()
    }

    fn err(&self, e: Error, name: &str) -> Error {
        e.at_tensor(name).in_file(&self.path)
    }

    /// The tensor named `name`; [`ErrorKind::NoSuchTensor`] (naming the file and tensor) when
    /// there is none.
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
            .read(p.range.clone())
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
                ErrorKind::ZtUnsupportedLayout(format!(
                    "{} (read its parts)",
                    t.layout.name(crate::index::LayoutNames::Message)
                ))
                .into(),
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
        let checks: Vec<_> = self
            .parsed
            .index
            .tensors
            .par_iter()
            .map(|t| Ztensor.verify_tensor(&self.source, t).in_file(&self.path))
            .collect();
        VerifyReport::collect(checks)
    }
}
