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
    /// Reading or writing a file failed in the operating system (not found, permission
    /// denied, disk full, …); the source error says why.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),

    // --- safetensors framing
    /// The file is shorter than the 8-byte little-endian header length every safetensors
    /// file starts with.
    #[error("file is {len} bytes, smaller than the 8-byte header length")]
    FileTooSmall {
        /// The file's length in bytes.
        len: u64,
    },
    /// The header is longer than the reader allows (`--max-header-size`): a safetensors
    /// file's JSON header, or a GGUF file's metadata and tensor-info table.
    #[error("header length {len} exceeds the limit of {limit} bytes")]
    HeaderTooLarge {
        /// The header's length in bytes, as the file gives it (GGUF: as far as it was read).
        len: u64,
        /// The largest header the reader accepts, in bytes.
        limit: u64,
    },
    /// No format claims the file: it has no magic of GGUF or zTensor, and as safetensors its
    /// first 8 bytes give a header length no safetensors file can have (4 GiB or more).
    #[error(
        "not a tensor file: neither safetensors, GGUF, zTensor nor ONNX; it starts with {first}"
    )]
    NotATensorFile {
        /// What the file's first 8 bytes look like (their hex and text, or the kind of file
        /// they suggest), to tell the user what was opened instead.
        first: String,
    },
    /// The safetensors header length says the JSON header goes on past the end of the file.
    #[error("header of {header_len} bytes runs past the end of the {file_len}-byte file")]
    HeaderPastEnd {
        /// The JSON header's length in bytes, as the file's first 8 bytes give it.
        header_len: u64,
        /// The file's length in bytes.
        file_len: u64,
    },
    /// The safetensors JSON header holds bytes that are not valid UTF-8.
    #[error("header is not valid UTF-8 (at header byte {offset})")]
    HeaderNotUtf8 {
        /// Where the invalid bytes start, in bytes from the start of the JSON header.
        offset: usize,
    },
    /// The safetensors header is padded with NUL bytes; the format pads with spaces only.
    #[error("header has NUL padding at header byte {offset} (pad with spaces)")]
    HeaderNulPadding {
        /// Where the first NUL byte is, in bytes from the start of the JSON header.
        offset: usize,
    },
    /// The safetensors header is not valid JSON (or uses JSON the format does not allow).
    #[error("header is not valid JSON: {msg} (at header byte {offset})")]
    HeaderJson {
        /// What the parser expected or found.
        msg: String,
        /// Where the parser stopped, in bytes from the start of the JSON header.
        offset: usize,
    },
    /// The safetensors header is valid JSON but not an object of tensor entries.
    #[error("header is not a JSON object")]
    HeaderNotObject,
    /// A tensor name appears twice: in a safetensors header (or `__metadata__` twice), among
    /// the shards of one checkpoint, or given twice to a writer. The error's tensor names it.
    #[error("key appears twice in the header")]
    DuplicateKey,
    /// The safetensors `__metadata__` entry is not an object of string values.
    #[error("__metadata__ must be an object whose values are all strings: {msg}")]
    BadMetadata {
        /// Which value broke the rule, and how.
        msg: String,
    },
    /// A safetensors tensor entry is not a JSON object (`{"dtype", "shape", "data_offsets"}`).
    #[error("tensor entry is not an object")]
    TensorNotObject,
    /// A safetensors tensor entry lacks one of `dtype`, `shape` and `data_offsets`.
    #[error("field '{field}' is missing")]
    MissingField {
        /// The name of the missing field.
        field: &'static str,
    },
    /// A safetensors tensor entry gives one of its fields twice.
    #[error("field '{field}' appears twice")]
    DuplicateField {
        /// The name of the repeated field.
        field: &'static str,
    },
    /// A safetensors tensor entry's field holds a value of the wrong JSON type or range.
    #[error("field '{field}' must be {expected}")]
    BadField {
        /// The name of the field.
        field: &'static str,
        /// What the field must hold, in words (for example "an array of 2 integers").
        expected: &'static str,
    },
    /// A dtype name the format does not define (safetensors, zTensor).
    #[error("unknown dtype '{0}'")]
    UnknownDtype(
        /// The dtype as written in the file.
        String,
    ),
    /// A tensor's element count, or its size in bits, does not fit in 64 bits.
    #[error("number of elements times bits overflows")]
    ShapeOverflow,
    /// A tensor of a sub-byte dtype (such as 4-bit) whose elements end inside a byte.
    #[error("{elements} elements of {dtype} do not fill a whole number of bytes")]
    PartialByte {
        /// The tensor's element count (the product of its shape).
        elements: u64,
        /// The tensor's dtype name.
        dtype: String,
    },
    /// A safetensors tensor's `data_offsets` end before they begin.
    #[error("data_offsets [{begin}, {end}] end before they begin")]
    OffsetsReversed {
        /// The start offset, in bytes from the start of the data area, as written in the file.
        begin: u64,
        /// The end offset, in bytes from the start of the data area, as written in the file.
        end: u64,
    },
    /// A tensor's stored byte length is not what its shape and dtype need (safetensors
    /// `data_offsets`, a zTensor part's length, or input to a cast that is not whole elements).
    #[error("byte length {actual} does not match shape and dtype, which need {expected}")]
    SizeMismatch {
        /// The byte length the shape and dtype need.
        expected: u64,
        /// The byte length the file (or the input) gives.
        actual: u64,
    },
    /// A safetensors tensor starts after the previous one ended: the data area has a gap
    /// (tensors must be laid out back to back, in offset order).
    #[error("hole in the data: tensor begins at {begin} but the previous one ended at {expected}")]
    Hole {
        /// Where the tensor begins, in bytes from the start of the data area.
        begin: u64,
        /// Where the previous tensor (in offset order) ended, and this one had to begin.
        expected: u64,
    },
    /// A safetensors tensor starts before the previous one (in offset order) ended.
    #[error("overlap: tensor begins at {begin} but the previous one ends at {expected}")]
    Overlap {
        /// Where the tensor begins, in bytes from the start of the data area.
        begin: u64,
        /// Where the previous tensor ends, and this one had to begin.
        expected: u64,
    },
    /// The file goes on after the last tensor's data (safetensors allows no trailing bytes).
    #[error("{extra} trailing bytes after the last tensor")]
    TrailingBytes {
        /// How many bytes follow the last tensor.
        extra: u64,
    },
    /// The file ends before bytes it must hold: a tensor's data, a header, or a range read
    /// from it.
    #[error("file is truncated: tensor data needs {needed} bytes but {available} remain")]
    Truncated {
        /// The end of the bytes needed, in bytes (from the start of the data area for a
        /// safetensors tensor, else from the start of the file).
        needed: u64,
        /// How many bytes there are, counted from the same place.
        available: u64,
    },

    // --- sharded checkpoints
    /// A sharded safetensors checkpoint (a folder of shards, or its
    /// `*.safetensors.index.json`) that cannot be read as one model: an index that is not JSON
    /// or has no `weight_map`, a shard name outside the folder, a `weight_map` that disagrees
    /// with the shards, or a folder that holds part of a checkpoint or two layouts of one.
    #[error("bad shard index: {0}")]
    BadShardIndex(
        /// What is wrong with the index or the folder.
        String,
    ),
    /// A split GGUF model whose parts do not make one whole (a part missing, numbered twice,
    /// counts that disagree, a tensor in two parts), or a part read alone by default.
    #[error("split GGUF: {0}")]
    BadSplit(
        /// Which part, and what is wrong with it.
        String,
    ),

    // --- remote files
    /// An HTTP request failed in a way no other variant names: an unexpected status, a reply
    /// that is not what the protocol promises.
    #[error("HTTP: {0}")]
    Http(
        /// The status or the failure, as the server or the client gave it.
        String,
    ),
    /// A remote object replaced between two reads of one open: its validator (`ETag`,
    /// `Last-Modified`) or its length is not the one pinned when it was opened, or the server
    /// refused a read conditional on it (412). Reading on would mix two versions.
    #[error("changed during the read: {what} was {pinned} when opened, now {now} (every read of one open must come from the version first seen)")]
    ChangedDuringRead {
        /// What changed: the `ETag`, the `Last-Modified` time or the length.
        what: &'static str,
        /// Its value when the object was opened.
        pinned: String,
        /// Its value in the later reply.
        now: String,
    },

    /// A storage option (`--storage-option`, `storage_options=`) that is unknown or whose value
    /// is not valid; or a store setting (a profile, an endpoint) that cannot be used.
    #[error("storage option: {0}")]
    BadStorageOption(
        /// The option and what is wrong with it.
        String,
    ),
    /// An object store's bucket that does not exist.
    #[error("no such bucket '{0}'")]
    NoSuchBucket(
        /// The bucket's name (Azure: the container's).
        String,
    ),
    /// An object, a Hub repository, revision or file that does not exist.
    #[error("not found: {0}")]
    RemoteNotFound(
        /// What was not found, and where it was looked for.
        String,
    ),
    /// The store or the Hub refused the credentials (403), or wants some (401).
    #[error("access denied: {0}")]
    AccessDenied(
        /// What refused access and why (the store's error code and message, or the token
        /// endpoint's reply).
        String,
    ),
    /// The endpoint could not be reached: a refused connection, an unknown host, a timeout.
    #[error("cannot reach the endpoint: {0}")]
    Unreachable(
        /// The endpoint and the connection failure.
        String,
    ),
    /// A conditional write the store refused (412, or S3's 409 `ConditionalRequestConflict`):
    /// the object exists where it was to be created only (`If-None-Match: *`), or is no longer
    /// the version it was to replace (`If-Match`). Another writer got there first.
    #[error("precondition failed: {0}")]
    PreconditionFailed(
        /// The object and the store's reply.
        String,
    ),

    // --- GGUF: one variant per rule, in its own enum
    /// A GGUF file broke one of the format's rules, named by the [`GgufRule`].
    #[error("{0}")]
    Gguf(#[from] GgufRule),
    // --- ONNX: one variant per rule, in its own enum
    /// An ONNX model broke one of the format's rules, named by the [`OnnxRule`].
    #[error("{0}")]
    Onnx(#[from] OnnxRule),
    // --- zTensor framing (all versions)
    /// The file was opened as zTensor, but its first 8 bytes are no zTensor version's magic.
    #[error("not a zTensor file: the first 8 bytes match no known zTensor magic")]
    ZtUnknownMagic,
    /// A zTensor file shorter than its version's magic, footer and length fields need.
    #[error("zTensor v{version}: file is {len} bytes, smaller than the {min}-byte minimum")]
    ZtTooSmall {
        /// The zTensor version the magic names ("0.1", "1.1", "2").
        version: &'static str,
        /// The file's length in bytes.
        len: u64,
        /// The shortest file of that version, in bytes.
        min: u64,
    },
    /// The magic at the end of a zTensor file is missing: the file is truncated, or another
    /// kind of file.
    #[error("zTensor v{version}: the footer magic is wrong (truncated or not a zTensor file)")]
    ZtFooterMagic {
        /// The zTensor version the file's leading magic names.
        version: &'static str,
    },
    /// A zTensor v2 footer of a format version this reader does not know.
    #[error("zTensor v2: footer version {0} is not supported (only 2)")]
    ZtFooterVersion(
        /// The version number the footer gives.
        u32,
    ),
    /// A zTensor manifest longer than the reader allows (`--max-header-size`).
    #[error("manifest of {len} bytes exceeds the limit of {limit} bytes")]
    ZtManifestTooLarge {
        /// The manifest's length in bytes, as the file gives it.
        len: u64,
        /// The largest manifest the reader accepts, in bytes.
        limit: u64,
    },
    /// The footer places the zTensor manifest outside the file (or over its framing).
    #[error("manifest [{offset}, +{len}) lies outside the {file_len}-byte file's manifest area")]
    ZtManifestOutOfBounds {
        /// The manifest's start, in bytes from the start of the file, as the footer gives it.
        offset: u64,
        /// The manifest's length in bytes, as the footer gives it.
        len: u64,
        /// The file's length in bytes.
        file_len: u64,
    },
    /// The zTensor v2 manifest's XXH3-64 is not the one the footer records: the manifest
    /// is damaged.
    #[error("manifest hash mismatch: footer says {expected:016x}, XXH3-64 of the manifest is {actual:016x}")]
    ZtManifestHash {
        /// The hash the footer records.
        expected: u64,
        /// The hash of the manifest's bytes as read.
        actual: u64,
    },
    /// The zTensor manifest is not well-formed CBOR.
    #[error("manifest is not valid CBOR: {msg} (at manifest byte {offset})")]
    Cbor {
        /// What the decoder expected or found.
        msg: String,
        /// Where decoding stopped, in bytes from the start of the manifest.
        offset: usize,
    },
    /// The zTensor v2 manifest is valid CBOR but not in the deterministic encoding (RFC 8949
    /// core rules: shortest lengths, sorted map keys, no indefinite lengths) the format requires.
    #[error(
        "manifest is not deterministic CBOR (RFC 8949 core): {msg} (at manifest byte {offset})"
    )]
    CborNotDeterministic {
        /// Which deterministic-encoding rule was broken.
        msg: &'static str,
        /// Where, in bytes from the start of the manifest.
        offset: usize,
    },
    /// The zTensor manifest decodes but does not have the structure its version defines: a
    /// field missing or of the wrong type, a part missing, a rank too high.
    #[error("manifest schema: {0}")]
    ZtSchema(
        /// The rule broken, naming the field or part.
        String,
    ),
    /// A zTensor v2 tensor, part or attribute name that breaks the format's naming rules.
    #[error("invalid {what} name {name:?}: {rule}")]
    ZtBadName {
        /// What the name names: an object, a part, an attribute, a file attribute (a metadata
        /// key) or a shard.
        what: &'static str,
        /// The name as written in the manifest (or given to the writer).
        name: String,
        /// The naming rule it breaks.
        rule: &'static str,
    },
    /// A zTensor layout this code path cannot handle: a non-dense layout in v0.1 (which
    /// defines dense tensors only), or a non-dense tensor read as one dense array (read its
    /// parts instead).
    #[error("layout '{0}' is not supported here (only dense tensors in this version)")]
    ZtUnsupportedLayout(
        /// The layout's name, as written in the manifest (with a hint, where there is one).
        String,
    ),
    /// A zTensor part's encoding that is not `raw`, `zstd` or another known one.
    #[error("unknown encoding '{0}'")]
    ZtUnknownEncoding(
        /// The encoding as written in the manifest.
        String,
    ),
    /// A zTensor logical type this library cannot interpret: its bytes can be read as stored,
    /// but not as values.
    #[error("unknown logical type '{0}': its bytes can be read structurally but not interpreted")]
    ZtUnknownType(
        /// The type as written in the manifest.
        String,
    ),
    /// A zTensor digest string that is not one its version writes (`crc32c:0x…`,
    /// `sha256:<hex>`, `xxh3:<hex>`) with the right number of hex digits.
    #[error("malformed digest '{0}'")]
    ZtBadDigest(
        /// The digest as written in the manifest.
        String,
    ),
    /// A zTensor blob that does not start on the alignment the format requires.
    #[error("blob offset {offset} is not a multiple of {align}")]
    ZtMisaligned {
        /// The blob's start, in bytes from the start of the file.
        offset: u64,
        /// The required alignment, in bytes.
        align: u64,
    },
    /// A zTensor blob that extends past the end of the data area (into the manifest or past
    /// the end of the file).
    #[error("blob [{offset}, +{len}) lies outside the data area, which ends at {limit}")]
    ZtBlobOutOfBounds {
        /// The blob's start, in bytes from the start of the file.
        offset: u64,
        /// The blob's stored length in bytes.
        len: u64,
        /// The end of the data area, in bytes from the start of the file.
        limit: u64,
    },
    /// A zTensor blob that starts inside the file's header, over its leading magic (blobs
    /// start at the first aligned offset past it).
    #[error("blob at {offset} starts inside the file header (blobs start at {min} or later)")]
    ZtBlobInHeader {
        /// The blob's start, in bytes from the start of the file.
        offset: u64,
        /// The offset blobs must start at or after.
        min: u64,
    },
    /// Two zTensor blobs that partly overlap (blobs must be identical, as tied weights are,
    /// or disjoint).
    #[error("blobs [{a_offset}, +{a_len}) and [{b_offset}, +{b_len}) overlap")]
    ZtOverlap {
        /// The first blob's start, in bytes from the start of the file.
        a_offset: u64,
        /// The first blob's length in bytes.
        a_len: u64,
        /// The second blob's start, which lies inside the first blob.
        b_offset: u64,
        /// The second blob's length in bytes.
        b_len: u64,
    },
    /// A zTensor part that names a shard the manifest's shard table does not declare.
    #[error("shard '{0}' is not declared in the manifest's shard table")]
    ZtShardRef(
        /// The shard's name, as the part gives it.
        String,
    ),
    /// A zTensor part stored in another shard file, read where only the file itself is
    /// open.
    #[error("part is stored in shard '{0}'; reading other files is not supported")]
    ZtExternalShard(
        /// The shard's name, as the part gives it.
        String,
    ),
    /// A zTensor tensor whose parts, shapes or attributes break its layout's profile (for
    /// example a quantized layout whose scales do not match its groups).
    #[error("layout {layout}: {rule}")]
    ZtLayoutRule {
        /// The layout's name.
        layout: String,
        /// The profile rule the tensor breaks.
        rule: String,
    },
    /// A zTensor tensor whose stored values break its layout's data rules, found when its
    /// parts are read (a negative index, a nonzero final padding nibble, a CSR `indptr` that
    /// does not start at 0).
    #[error("data rule: {0}")]
    ZtLayoutData(
        /// The rule broken, and where.
        String,
    ),
    /// A zTensor part that decodes (decompresses) to another length than the manifest
    /// declares.
    #[error("decoded data is {actual} bytes but {expected} were declared")]
    ZtDecodedLength {
        /// The decoded length the manifest declares, in bytes.
        expected: u64,
        /// The length that came out, in words: a number, or a bound where decoding stopped
        /// early ("more than N", "at most N").
        actual: String,
    },
    /// A zTensor part's compressed bytes that the decompressor rejects.
    #[error("compressed data is corrupt: {0}")]
    ZtCompression(
        /// The decompressor's message.
        String,
    ),
    /// A seekable-zstd part whose seek table (the index of its frames) is malformed or
    /// disagrees with the frames.
    #[error("zstd seek table: {0}")]
    ZtSeekTable(
        /// What is wrong with the seek table.
        String,
    ),
    /// Bytes whose digest is not the one recorded for them: the data changed after it was
    /// written.
    #[error("digest mismatch: the file says {expected}, the bytes give {actual}")]
    DigestMismatch {
        /// The recorded digest, as the file spells it (`xxh3:…`, `sha256:…`, `crc32c:…`).
        expected: String,
        /// The digest of the bytes as read, spelled the same way.
        actual: String,
    },
    /// A byte range of the file whose digest is not the one recorded for it (`verify`); the
    /// error's tensor names the tensor it holds.
    #[error("bytes {start}..{end} of the file changed: the recorded digest is {expected}, the bytes give {actual}")]
    RangeDigestMismatch {
        /// The range's first byte, from the start of the file.
        start: u64,
        /// The byte after the range's last, from the start of the file.
        end: u64,
        /// The recorded digest, as the file spells it.
        expected: String,
        /// The digest of the bytes as read, spelled the same way.
        actual: String,
    },
    /// A zTensor write option that the chosen output version or mode cannot carry (a zstd
    /// level outside 1-22, compression in a canonical file, file attributes in v0.1).
    #[error("option not available for zTensor v{version}: {what}")]
    ZtUnsupportedOption {
        /// The zTensor version being written ("0.1", "1.1", "2").
        version: &'static str,
        /// The option, and why that version cannot carry it.
        what: String,
    },

    // --- use of an opened file
    /// The file holds no tensor of the name asked for; the error's tensor names it.
    #[error("no such tensor")]
    NoSuchTensor,
    /// A slice of a tensor that cannot be taken: out of range, or not on a whole-element
    /// or whole-block boundary.
    #[error("bad slice: {0}")]
    BadSlice(
        /// The slice and what is wrong with it.
        String,
    ),
    /// A tensor name pattern (`stats --tensors`) that does not parse.
    #[error("bad tensor name pattern {0}")]
    BadPattern(
        /// The pattern, quoted, and what is wrong with it.
        String,
    ),

    // --- ggml block dequantization
    /// A ggml type whose blocks this library cannot dequantize (such as a plain element
    /// type, which has no blocks).
    #[error("cannot dequantize {ggml_type}: {reason}")]
    CannotDequantize {
        /// The ggml type's name (`q4_k`, `f16`, …).
        ggml_type: &'static str,
        /// Why there is no dequantizer for it.
        reason: &'static str,
    },
    /// A ggml type this library cannot quantize to.
    #[error("cannot quantize to {ggml_type}: {reason}")]
    CannotQuantize {
        /// The ggml type's name.
        ggml_type: &'static str,
        /// Why there is no quantizer for it.
        reason: &'static str,
    },
    /// Rows, or an importance matrix, that a quantizer cannot take (the detail says which).
    #[error("cannot quantize to {ggml_type}: {detail}")]
    QuantizeRows {
        /// The ggml type's name.
        ggml_type: &'static str,
        /// What about the rows or the importance matrix the quantizer cannot take.
        detail: String,
    },
    /// Quantized bytes that are not a whole number of blocks for the values they should
    /// hold (to dequantize, or as quantizer output).
    #[error(
        "{ggml_type}: {bytes} bytes are not whole {block_bytes}-byte blocks for {elements} values"
    )]
    BlockBytes {
        /// The ggml type's name.
        ggml_type: &'static str,
        /// The length of the quantized bytes given.
        bytes: u64,
        /// The size of one block of that type, in bytes.
        block_bytes: u32,
        /// The number of values the blocks should hold.
        elements: u64,
    },

    // --- writing
    /// A tensor name a writer refuses (such as an empty name, or `__metadata__` in
    /// safetensors); the error's tensor names it.
    #[error("tensor name {0}")]
    BadName(
        /// The naming rule broken.
        &'static str,
    ),
    /// A tensor's bytes given to a writer (or a buffer to read a tensor into) whose length
    /// is not what its shape and dtype need.
    #[error("the writer supplied {actual} bytes but shape and dtype need {expected}")]
    WrongDataLength {
        /// The byte length the shape and dtype need.
        expected: u64,
        /// The byte length given.
        actual: u64,
    },
    /// A dtype the output format cannot store.
    #[error("cannot write dtype {0}")]
    UnsupportedDtype(
        /// The dtype and the output format, with the dtypes it can store.
        String,
    ),
    /// A request this library does not support: a format feature, a conversion, a
    /// combination of options.
    #[error("not supported: {0}")]
    Unsupported(
        /// What is not supported.
        String,
    ),
    /// Two values for one metadata key where the output holds one: a GGUF input carrying a key
    /// both as itself and under the output format's prefix, or `convert --append` adding a key
    /// the file already has with another value.
    #[error("metadata key '{key}': {detail}")]
    MetadataConflict {
        /// The metadata key, as written in the output.
        key: String,
        /// The two values, and where each came from.
        detail: String,
    },
    /// A cast between two dtypes that is not supported: only the floats F64, F32, F16 and
    /// BF16 cast into each other (and GGUF output takes F32, F16 or BF16 only).
    #[error("cannot cast {from} to {to}")]
    UnsupportedCast {
        /// The dtype cast from (or the tensors a conversion casts, "float tensors").
        from: String,
        /// The dtype cast to, with what the output takes where that is the reason.
        to: String,
    },

    // --- importance matrices (llama-imatrix's files, as llama-quantize reads them)
    /// An importance-matrix file (llama-imatrix's GGUF or legacy `.dat` output) that breaks a
    /// rule of its format, or does not fit the tensors it is used for.
    #[error("importance matrix: {0}")]
    BadImatrix(
        /// What is wrong with the file, or with its entry for a tensor.
        String,
    ),
}

/// An error with its location: the file and, where one is involved, the tensor.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
    tensor: Option<String>,
}

/// The library's result type: a value, or an [`Error`] naming what failed and where.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind`, about no file or tensor yet ([`in_file`](Self::in_file) and
    /// [`at_tensor`](Self::at_tensor) add them).
    pub fn new(kind: ErrorKind) -> Self {
        Error {
            kind,
            path: None,
            tensor: None,
        }
    }

    /// Which rule failed, to match on: each format's rules have a variant of their own.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The file (or URL, or object) the error is about, when one is known.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The tensor the error is about, when it concerns one.
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
