//! The library's one error type: a kind that names the rule that failed, plus where it
//! failed (file, tensor). Display reads `FILE: tensor 'NAME': RULE`. Every format's rules are
//! variants here or enums beside this file (`gguf_rule.rs`), so the error type imports no
//! format module.

mod gguf_rule;
mod onnx_rule;

pub use gguf_rule::GgufRule;
pub use onnx_rule::OnnxRule;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What went wrong. Each rejection rule of each format has its own variant, so callers and
/// tests can tell them apart without matching on message text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),

    // --- safetensors framing
    #[error("file is {len} bytes, smaller than the 8-byte header length")]
    FileTooSmall { len: u64 },
    #[error("header length {len} exceeds the limit of {limit} bytes")]
    HeaderTooLarge { len: u64, limit: u64 },
    /// No format claims the file: it has no magic of GGUF or zTensor, and as safetensors its
    /// first 8 bytes give a header length no safetensors file can have (4 GiB or more).
    #[error(
        "not a tensor file: neither safetensors, GGUF, zTensor nor ONNX; it starts with {first}"
    )]
    NotATensorFile { first: String },
    #[error("header of {header_len} bytes runs past the end of the {file_len}-byte file")]
    HeaderPastEnd { header_len: u64, file_len: u64 },
    #[error("header is not valid UTF-8 (at header byte {offset})")]
    HeaderNotUtf8 { offset: usize },
    #[error("header has NUL padding at header byte {offset} (pad with spaces)")]
    HeaderNulPadding { offset: usize },
    #[error("header is not valid JSON: {msg} (at header byte {offset})")]
    HeaderJson { msg: String, offset: usize },
    #[error("header is not a JSON object")]
    HeaderNotObject,
    #[error("key appears twice in the header")]
    DuplicateKey,
    #[error("__metadata__ must be an object whose values are all strings: {msg}")]
    BadMetadata { msg: String },
    #[error("tensor entry is not an object")]
    TensorNotObject,
    #[error("field '{field}' is missing")]
    MissingField { field: &'static str },
    #[error("field '{field}' appears twice")]
    DuplicateField { field: &'static str },
    #[error("field '{field}' must be {expected}")]
    BadField {
        field: &'static str,
        expected: &'static str,
    },
    #[error("unknown dtype '{0}'")]
    UnknownDtype(String),
    #[error("number of elements times bits overflows")]
    ShapeOverflow,
    #[error("{elements} elements of {dtype} do not fill a whole number of bytes")]
    PartialByte { elements: u64, dtype: String },
    #[error("data_offsets [{begin}, {end}] end before they begin")]
    OffsetsReversed { begin: u64, end: u64 },
    #[error("byte length {actual} does not match shape and dtype, which need {expected}")]
    SizeMismatch { expected: u64, actual: u64 },
    #[error("hole in the data: tensor begins at {begin} but the previous one ended at {expected}")]
    Hole { begin: u64, expected: u64 },
    #[error("overlap: tensor begins at {begin} but the previous one ends at {expected}")]
    Overlap { begin: u64, expected: u64 },
    #[error("{extra} trailing bytes after the last tensor")]
    TrailingBytes { extra: u64 },
    #[error("file is truncated: tensor data needs {needed} bytes but {available} remain")]
    Truncated { needed: u64, available: u64 },

    // --- sharded checkpoints
    #[error("bad shard index: {0}")]
    BadShardIndex(String),
    /// A split GGUF model whose parts do not make one whole (a part missing, numbered twice,
    /// counts that disagree, a tensor in two parts), or a part read alone by default.
    #[error("split GGUF: {0}")]
    BadSplit(String),

    // --- remote files
    #[error("HTTP: {0}")]
    Http(String),
    /// A remote object replaced between two reads of one open: its validator (`ETag`,
    /// `Last-Modified`) or its length is not the one pinned when it was opened, or the server
    /// refused a read conditional on it (412). Reading on would mix two versions.
    #[error("changed during the read: {what} was {pinned} when opened, now {now} (every read of one open must come from the version first seen)")]
    ChangedDuringRead {
        what: &'static str,
        pinned: String,
        now: String,
    },

    /// A storage option (`--storage-option`, `storage_options=`) that is unknown or whose value
    /// is not valid; or a store setting (a profile, an endpoint) that cannot be used.
    #[error("storage option: {0}")]
    BadStorageOption(String),
    /// An object store's bucket that does not exist.
    #[error("no such bucket '{0}'")]
    NoSuchBucket(String),
    /// An object, a Hub repository, revision or file that does not exist.
    #[error("not found: {0}")]
    RemoteNotFound(String),
    /// The store or the Hub refused the credentials (403), or wants some (401).
    #[error("access denied: {0}")]
    AccessDenied(String),
    /// The endpoint could not be reached: a refused connection, an unknown host, a timeout.
    #[error("cannot reach the endpoint: {0}")]
    Unreachable(String),
    /// A conditional write the store refused (412, or S3's 409 `ConditionalRequestConflict`):
    /// the object exists where it was to be created only (`If-None-Match: *`), or is no longer
    /// the version it was to replace (`If-Match`). Another writer got there first.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),

    // --- GGUF: one variant per rule, in its own enum
    #[error("{0}")]
    Gguf(#[from] GgufRule),
    // --- ONNX: one variant per rule, in its own enum
    #[error("{0}")]
    Onnx(#[from] OnnxRule),
    // --- zTensor framing (all versions)
    #[error("not a zTensor file: the first 8 bytes match no known zTensor magic")]
    ZtUnknownMagic,
    #[error("zTensor v{version}: file is {len} bytes, smaller than the {min}-byte minimum")]
    ZtTooSmall {
        version: &'static str,
        len: u64,
        min: u64,
    },
    #[error("zTensor v{version}: the footer magic is wrong (truncated or not a zTensor file)")]
    ZtFooterMagic { version: &'static str },
    #[error("zTensor v2: footer version {0} is not supported (only 2)")]
    ZtFooterVersion(u32),
    #[error("manifest of {len} bytes exceeds the limit of {limit} bytes")]
    ZtManifestTooLarge { len: u64, limit: u64 },
    #[error("manifest [{offset}, +{len}) lies outside the {file_len}-byte file's manifest area")]
    ZtManifestOutOfBounds {
        offset: u64,
        len: u64,
        file_len: u64,
    },
    #[error("manifest hash mismatch: footer says {expected:016x}, XXH3-64 of the manifest is {actual:016x}")]
    ZtManifestHash { expected: u64, actual: u64 },
    #[error("manifest is not valid CBOR: {msg} (at manifest byte {offset})")]
    Cbor { msg: String, offset: usize },
    #[error(
        "manifest is not deterministic CBOR (RFC 8949 core): {msg} (at manifest byte {offset})"
    )]
    CborNotDeterministic { msg: &'static str, offset: usize },
    #[error("manifest schema: {0}")]
    ZtSchema(String),
    #[error("invalid name {name:?}: {rule}")]
    ZtBadName { name: String, rule: &'static str },
    #[error("layout '{0}' is not supported here (only dense tensors in this version)")]
    ZtUnsupportedLayout(String),
    #[error("unknown encoding '{0}'")]
    ZtUnknownEncoding(String),
    #[error("unknown logical type '{0}': its bytes can be read structurally but not interpreted")]
    ZtUnknownType(String),
    #[error("malformed digest '{0}'")]
    ZtBadDigest(String),
    #[error("blob offset {offset} is not a multiple of {align}")]
    ZtMisaligned { offset: u64, align: u64 },
    #[error("blob [{offset}, +{len}) lies outside the data area, which ends at {limit}")]
    ZtBlobOutOfBounds { offset: u64, len: u64, limit: u64 },
    #[error("blob at {offset} starts inside the file header (blobs start at {min} or later)")]
    ZtBlobInHeader { offset: u64, min: u64 },
    #[error("blobs [{a_offset}, +{a_len}) and [{b_offset}, +{b_len}) overlap")]
    ZtOverlap {
        a_offset: u64,
        a_len: u64,
        b_offset: u64,
        b_len: u64,
    },
    #[error("shard '{0}' is not declared in the manifest's shard table")]
    ZtShardRef(String),
    #[error("part is stored in shard '{0}'; reading other files is not supported")]
    ZtExternalShard(String),
    #[error("layout {layout}: {rule}")]
    ZtLayoutRule { layout: String, rule: String },
    #[error("data rule: {0}")]
    ZtLayoutData(String),
    #[error("decoded data is {actual} bytes but {expected} were declared")]
    ZtDecodedLength { expected: u64, actual: String },
    #[error("compressed data is corrupt: {0}")]
    ZtCompression(String),
    #[error("zstd seek table: {0}")]
    ZtSeekTable(String),
    #[error("digest mismatch: the file says {expected}, the bytes give {actual}")]
    DigestMismatch { expected: String, actual: String },
    #[error("bytes {start}..{end} of the file changed: the recorded digest is {expected}, the bytes give {actual}")]
    RangeDigestMismatch {
        start: u64,
        end: u64,
        expected: String,
        actual: String,
    },
    #[error("option not available for zTensor v{version}: {what}")]
    ZtUnsupportedOption { version: &'static str, what: String },

    // --- use of an opened file
    #[error("no such tensor")]
    NoSuchTensor,
    #[error("bad slice: {0}")]
    BadSlice(String),
    /// A tensor name pattern (`stats --tensors`) that does not parse.
    #[error("bad tensor name pattern {0}")]
    BadPattern(String),

    // --- ggml block dequantization
    #[error("cannot dequantize {ggml_type}: {reason}")]
    CannotDequantize {
        ggml_type: &'static str,
        reason: &'static str,
    },
    #[error("cannot quantize to {ggml_type}: {reason}")]
    CannotQuantize {
        ggml_type: &'static str,
        reason: &'static str,
    },
    /// Rows, or an importance matrix, that a quantizer cannot take (the detail says which).
    #[error("cannot quantize to {ggml_type}: {detail}")]
    QuantizeRows {
        ggml_type: &'static str,
        detail: String,
    },
    #[error(
        "{ggml_type}: {bytes} bytes are not whole {block_bytes}-byte blocks for {elements} values"
    )]
    BlockBytes {
        ggml_type: &'static str,
        bytes: u64,
        block_bytes: u32,
        elements: u64,
    },

    // --- writing
    #[error("tensor name {0}")]
    BadName(&'static str),
    #[error("the writer supplied {actual} bytes but shape and dtype need {expected}")]
    WrongDataLength { expected: u64, actual: u64 },
    #[error("cannot write dtype {0}")]
    UnsupportedDtype(String),
    #[error("not supported: {0}")]
    Unsupported(String),
    /// Two values for one metadata key where the output holds one: a GGUF input carrying a key
    /// both as itself and under the output format's prefix, or `convert --append` adding a key
    /// the file already has with another value.
    #[error("metadata key '{key}': {detail}")]
    MetadataConflict { key: String, detail: String },
    #[error("cannot cast {from} to {to}")]
    UnsupportedCast { from: String, to: String },

    // --- importance matrices (llama-imatrix's files, as llama-quantize reads them)
    #[error("importance matrix: {0}")]
    BadImatrix(String),
}

/// An error with its location: the file and, where one is involved, the tensor.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
    tensor: Option<String>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind) -> Self {
        Error {
            kind,
            path: None,
            tensor: None,
        }
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn tensor(&self) -> Option<&str> {
        self.tensor.as_deref()
    }

    /// Sets the file this error is about (keeps one that is already set).
    pub fn in_file(mut self, path: &Path) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_path_buf());
        }
        self
    }

    /// Sets the tensor this error is about (keeps one that is already set).
    pub fn at_tensor(mut self, name: &str) -> Self {
        if self.tensor.is_none() {
            self.tensor = Some(name.to_string());
        }
        self
    }

    /// True for errors that say the input is malformed, false for I/O and usage errors.
    pub fn is_invalid_input(&self) -> bool {
        !matches!(
            self.kind,
            ErrorKind::Io(_)
                | ErrorKind::Http(_)
                | ErrorKind::ChangedDuringRead { .. }
                | ErrorKind::BadStorageOption(_)
                | ErrorKind::NoSuchBucket(_)
                | ErrorKind::RemoteNotFound(_)
                | ErrorKind::AccessDenied(_)
                | ErrorKind::Unreachable(_)
                | ErrorKind::PreconditionFailed(_)
                | ErrorKind::NoSuchTensor
                | ErrorKind::BadSlice(_)
                | ErrorKind::BadPattern(_)
        )
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error::new(kind)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::new(ErrorKind::Io(e))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}: ", p.display())?;
        }
        if let Some(t) = &self.tensor {
            write!(f, "tensor '{}': ", t.escape_debug())?;
        }
        write!(f, "{}", self.kind)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// The folder `file` would be created in.
fn folder_of(file: &Path) -> &Path {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// True when `e`, from creating `file`, is because its folder does not exist.
fn folder_missing(e: &io::Error, file: &Path) -> bool {
    e.kind() == io::ErrorKind::NotFound && !folder_of(file).is_dir()
}

/// An error creating `file`, said plainly when the cause is that its folder does not exist
/// (the OS says only "No such file or directory", and names neither: the path it failed on
/// may be a temporary or lock file beside the output).
pub(crate) fn creating(e: io::Error, file: &Path) -> Error {
    let e = if folder_missing(&e, file) {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("the folder {} does not exist", folder_of(file).display()),
        )
    } else {
        e
    };
    Error::from(e)
}

/// An error creating the internal file `file` (a lock file): like [`creating`], but it names
/// `file` only when the folder exists, so a missing folder is reported as that and nothing
/// else (the caller names the output).
pub(crate) fn creating_internal(e: io::Error, file: &Path) -> Error {
    if folder_missing(&e, file) {
        creating(e, file)
    } else {
        creating(e, file).in_file(file)
    }
}
