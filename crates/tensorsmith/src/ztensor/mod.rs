//! zTensor, all three on-disk versions: v0.1 (`ZTEN0001`), v1.1 (`ZTEN1000`, also 1.2
//! files) and v2 (PNG-style magic, deterministic CBOR, 4 KiB blobs). [`open`] detects the
//! version from the first 8 bytes, validates the whole manifest and returns a [`ZtFile`]
//! over the neutral [`TensorIndex`]; [`Writer`] writes any of the three.
//!
//! ```no_run
//! use tensorsmith::ztensor::{self, Compression, WriteOptions, Writer};
//! use tensorsmith::dtype::DType;
//! use tensorsmith::index::ZtVersion;
//!
//! let f = ztensor::open("model.zt", &tensorsmith::OpenOptions::new())?;
//! for t in &f.index().tensors {
//!     let bytes = f.tensor_bytes(&t.name)?;  // decoded, little-endian; zero-copy when raw
//!     println!("{} {} {:?} {} bytes", t.name, t.dtype, t.shape, bytes.len());
//! }
//! let report = f.verify();                   // digests and data rules
//! let mut w = Writer::new(
//!     WriteOptions::new()
//!         .with_version(ZtVersion::V2)
//!         .with_compression(Compression::Zstd { level: 3 }),
//! );
//! w.add_dense("x", DType::F32, &[2], vec![0u8; 8])?;
//! w.write_file("out.zt")?;
//! # Ok::<(), tensorsmith::Error>(())
//! ```
//!
//! Files: `cbor` (hand-written codec, see its doc for why), `fields` (typed manifest
//! access), `part_type` (a part's dtype and logical type), `digest` (digest strings; the
//! computing is `crate::digest`, zstd is `crate::codec`), `blobs` (alignment, bounds,
//! overlap), `layout` (size and data rules per layout), `framing` (magic, minimum size, the
//! v0.1/v1.1 trailing manifest), `v01_read`/`v11_read`/`v2_read`, `file` (the opened file,
//! decoding, verify), `write` (the writer front), `part_source` (part bytes in memory or read
//! on demand), `stream` (parts compressed by worker threads in a bounded window and written
//! in file order), `prepared` (where each part went, for the manifests) and
//! `v01_write`/`v11_write`/`v2_write` (each version's part order and manifest), and
//! `v2_append` (objects added to a v2 file, crash-safe).

mod blobs;
pub mod cbor;
pub mod digest;
mod fields;
mod file;
mod format;
mod framing;
mod layout;
mod part_source;
mod part_type;
mod prepared;
mod stream;
mod v01;
mod v11;
mod v2;
mod write;

pub use crate::digest::DigestKind;
pub use file::{open, parse_bytes, ZtFile};
pub use format::{decode_part, parse_with, Ztensor};
pub use layout::check_data;
pub use part_source::{PartBytes, PartSource};
pub use v2::append::append;
pub use write::{Compression, PartData, WriteOptions, Writer};
// The paths the readers had before each generation got a folder, kept for callers.
#[doc(hidden)]
pub use v01::read as v01_read;
#[doc(hidden)]
pub use v11::read as v11_read;
#[doc(hidden)]
pub use v2::read as v2_read;

use crate::bytes::ReadAt;
use crate::format::OpenOptions;
use crate::index::{TensorIndex, ZtVersion};
use std::ops::Range;

/// A validated manifest.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The neutral index of the file's tensors.
    pub index: TensorIndex,
    /// The manifest's `version` string (v1.1: `"1.1.0"` or `"1.2.0"`).
    pub manifest_version: Option<String>,
    /// Where the manifest lies in the file, in bytes.
    pub manifest_range: Range<u64>,
}

/// The zTensor version whose magic starts `first8`.
pub fn detect(first8: &[u8]) -> Option<ZtVersion> {
    let head = first8.get(..8)?;
    if head == v01::read::MAGIC {
        Some(ZtVersion::V0_1)
    } else if head == v11::read::MAGIC {
        Some(ZtVersion::V1_1)
    } else if head == v2::read::MAGIC {
        Some(ZtVersion::V2)
    } else {
        None
    }
}
