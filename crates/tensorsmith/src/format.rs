//! The format seam: what every tensor file format implements ([`FileFormat`]), the options
//! every reader takes ([`OpenOptions`]) and what verifying a file finds ([`VerifyReport`]).
//! A format recognises its first bytes, reads its index under limits through the byte layer,
//! gives a part's bytes decoded, and verifies what its index does not cover (digests, data
//! rules). Adding a format is one module implementing this trait plus one line in
//! `formats.rs`.

use crate::bytes::{Backend, ReadAt, StorageOptions};
use crate::decode::decode_part;
use crate::error::{Error, Result};
use crate::index::{Part, TensorIndex, TensorInfo};
use std::borrow::Cow;

/// Bytes handed to [`FileFormat::sniff`]: enough for every magic we know.
pub const SNIFF_LEN: usize = 8;

/// One tensor file format.
pub trait FileFormat: Sync + std::fmt::Debug {
    /// Short name, as [`crate::index::Format::name`] gives it (`"safetensors"`).
    fn name(&self) -> &'static str;

    /// Whether a file starting with `first` (its first [`SNIFF_LEN`] bytes, fewer for a
    /// shorter file) is of this format.
    fn sniff(&self, first: &[u8]) -> bool;

    /// Whether a file of this name is of this format whatever its first bytes (formats with
    /// no magic, such as ONNX's `.onnx`), so that a broken file gets this format's errors.
    fn claims_name(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// Validates the file held by `bytes` and returns its index. Reads only the ranges the
    /// header needs, and allocates nothing beyond what the file's size allows.
    fn read_index(&self, bytes: &dyn ReadAt, opts: &OpenOptions) -> Result<TensorIndex>;

    /// Part `part` decoded (decompressed, little-endian), checking its digest when `verify`
    /// is set. Borrowed from `bytes` when the stored bytes are the values.
    fn part<'a>(&self, bytes: &'a dyn ReadAt, part: &Part, verify: bool) -> Result<Cow<'a, [u8]>> {
        decode_part(bytes, part, verify, crate::digest::spell)
    }

    /// Checks what [`FileFormat::read_index`] left to a full read: digests and data rules of
    /// one tensor. Formats that record neither check nothing.
    fn verify_tensor(&self, bytes: &dyn ReadAt, t: &TensorInfo) -> TensorCheck {
        let _ = bytes;
        TensorCheck {
            undigested: t.parts.len() as u64,
            ..Default::default()
        }
    }

    /// The header as JSON text, for formats whose header is JSON (checked against a schema).
    /// `header_len` is the index's: the bytes before the tensor data.
    fn json_header<'a>(
        &self,
        bytes: &'a dyn ReadAt,
        header_len: u64,
    ) -> Result<Option<Cow<'a, [u8]>>> {
        let _ = (bytes, header_len);
        Ok(None)
    }
}

/// What verifying one tensor found.
#[derive(Debug, Default)]
pub struct TensorCheck {
    /// Parts whose digest was checked.
    pub checked: u64,
    /// Parts without a digest.
    pub undigested: u64,
    /// What failed in this tensor: digest mismatches, corrupt streams, data-rule violations.
    pub failures: Vec<Error>,
}

impl TensorCheck {
    /// The same check, its failures naming `path` (where none names a file yet).
    pub fn in_file(mut self, path: &std::path::Path) -> TensorCheck {
        self.failures = self.failures.into_iter().map(|e| e.in_file(path)).collect();
        self
    }
}

/// What verifying a file or a model found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Parts whose digest was checked.
    pub checked: u64,
    /// Parts without a digest (still decoded and checked against their data rules, where the
    /// format has any).
    pub undigested: u64,
    /// Every failure: digest mismatches, corrupt streams, data-rule violations.
    pub failures: Vec<Error>,
}

impl VerifyReport {
    /// Whether nothing failed (a file with no digests at all is still ok).
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// The sum of per-tensor checks.
    pub fn collect(checks: impl IntoIterator<Item = TensorCheck>) -> VerifyReport {
        let mut r = VerifyReport::default();
        for c in checks {
            r.checked += c.checked;
            r.undigested += c.undigested;
            r.failures.extend(c.failures);
        }
        r
    }
}

/// The safetensors reference's header limit; real checkpoints with a million tensors need
/// more ([`OpenOptions::with_max_header_len`]).
pub const DEFAULT_MAX_HEADER_LEN: u64 = 100_000_000;
/// The zTensor v1.1 spec's manifest limit, used for every version.
pub const DEFAULT_MAX_MANIFEST_LEN: u64 = 1 << 30;
/// Deepest nesting of GGUF arrays inside arrays (each level costs a stack frame).
pub const DEFAULT_MAX_ARRAY_DEPTH: usize = 64;

/// How to open a file: the backend for local files, the settings of object stores and the
/// Hub, and the limits every reader enforces.
/// Built from [`OpenOptions::new`] (safe defaults) with `with_*` methods.
///
/// ```
/// use tensorsmith::{bytes::Backend, OpenOptions};
/// let opts = OpenOptions::new().with_backend(Backend::Pread).with_max_header_len(1 << 30);
/// assert_eq!(opts.max_header_len(), 1 << 30);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenOptions {
    backend: Backend,
    max_header_len: Option<u64>,
    max_manifest_len: Option<u64>,
    max_array_depth: Option<usize>,
    packed_ints: bool,
    part_only: bool,
    storage: StorageOptions,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            backend: Backend::Mmap,
            max_header_len: None,
            max_manifest_len: None,
            max_array_depth: None,
            packed_ints: true,
            part_only: false,
            storage: StorageOptions::new(),
        }
    }
}

impl OpenOptions {
    /// Memory-mapped local files, default limits, packed `I4`/`I2` dtypes accepted.
    pub fn new() -> Self {
        Self::default()
    }

    /// How local files are read (map or pread); remote files ignore it.
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Largest header accepted, in bytes: the safetensors JSON header (default
    /// [`DEFAULT_MAX_HEADER_LEN`]) and an ONNX graph (the protobuf bytes outside the weights;
    /// default 2 GiB); once set, also the zTensor manifest (unless
    /// [`with_max_manifest_len`](Self::with_max_manifest_len) sets that) and the GGUF header
    /// (metadata and tensor infos, up to the data), which otherwise have limits of their own.
    pub fn with_max_header_len(mut self, n: u64) -> Self {
        self.max_header_len = Some(n);
        self
    }

    /// Largest zTensor manifest accepted, in bytes.
    pub fn with_max_manifest_len(mut self, n: u64) -> Self {
        self.max_manifest_len = Some(n);
        self
    }

    /// Deepest GGUF array nesting accepted.
    pub fn with_max_array_depth(mut self, n: usize) -> Self {
        self.max_array_depth = Some(n);
        self
    }

    /// Whether the packed `I4`/`I2` safetensors dtypes of the weight-inspect notes are
    /// accepted (the reference rejects them).
    pub fn with_packed_ints(mut self, yes: bool) -> Self {
        self.packed_ints = yes;
        self
    }

    /// Whether one part of a split GGUF model is read alone. By default a part opens the
    /// whole model (every part it names), and a part that cannot is refused.
    pub fn with_part_only(mut self, yes: bool) -> Self {
        self.part_only = yes;
        self
    }

    /// Settings for `s3://` and `hf://` URLs (credentials, endpoint, region): the CLI's
    /// `--storage-option`s, Python's `storage_options`. Unset ones come from the environment.
    pub fn with_storage_options(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// The settings for `s3://` and `hf://` URLs.
    pub fn storage_options(&self) -> &StorageOptions {
        &self.storage
    }

    /// Whether one part of a split GGUF model is read alone instead of the whole model.
    pub fn part_only(&self) -> bool {
        self.part_only
    }

    /// How local files are read (map or pread).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The safetensors header limit in bytes: the one set, else [`DEFAULT_MAX_HEADER_LEN`].
    pub fn max_header_len(&self) -> u64 {
        self.max_header_len.unwrap_or(DEFAULT_MAX_HEADER_LEN)
    }

    /// The header limit set by [`OpenOptions::with_max_header_len`], else a format's own
    /// default (ONNX: 2 GiB of graph).
    pub fn max_header_len_or(&self, default: u64) -> u64 {
        self.max_header_len.unwrap_or(default)
    }

    /// The zTensor manifest limit in bytes: the manifest limit set, else the header limit set,
    /// else [`DEFAULT_MAX_MANIFEST_LEN`].
    pub fn max_manifest_len(&self) -> u64 {
        self.max_manifest_len
            .or(self.max_header_len)
            .unwrap_or(DEFAULT_MAX_MANIFEST_LEN)
    }

    /// The GGUF header limit: none unless [`with_max_header_len`](Self::with_max_header_len)
    /// set one (GGUF counts are checked against the file before anything is allocated).
    pub fn max_gguf_header_len(&self) -> Option<u64> {
        self.max_header_len
    }

    /// The deepest GGUF array nesting accepted: the one set, else [`DEFAULT_MAX_ARRAY_DEPTH`].
    pub fn max_array_depth(&self) -> usize {
        self.max_array_depth.unwrap_or(DEFAULT_MAX_ARRAY_DEPTH)
    }

    /// Whether the packed `I4`/`I2` safetensors dtypes are accepted (by default they are).
    pub fn packed_ints(&self) -> bool {
        self.packed_ints
    }
}
