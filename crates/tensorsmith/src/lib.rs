//! # tensorsmith
//!
//! Read, validate, write and inspect tensor files: safetensors, GGUF and zTensor (v0.1, v1.1,
//! v2), local or over HTTP. Every format is parsed once into a neutral
//! [`index::TensorIndex`] (names, dtypes, shapes, layouts, byte ranges, metadata), and every
//! operation is written once against it.
//!
//! ```
//! // Any format, any place: a file, a folder of shards, a shard index or an http(s) URL.
//! // Here, a small safetensors file of this repository's test data.
//! let path = concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../../tests/data/safetensors/mixed_meta3.safetensors"
//! );
//! let model = tensorsmith::open(path, &tensorsmith::OpenOptions::new())?;
//! for t in &model.index.tensors {
//!     let values = model.tensor_bytes(t)?; // decoded; zero-copy from the map when raw
//!     println!("{} {} {:?} {} bytes", t.name, t.type_name(), t.shape, values.len());
//! }
//! assert_eq!(model.index.tensors.len(), 8);
//! let w = model.index.get("model.layers.0.weight").unwrap();
//! assert_eq!((w.type_name(), w.shape.as_slice()), ("F32", &[4u64, 4][..]));
//! assert_eq!(model.tensor_bytes(w)?.len(), 4 * 4 * 4);
//! assert_eq!(
//!     model.index.metadata.get("format"),
//!     Some(&tensorsmith::index::MetaValue::Str("pt".into()))
//! );
//! println!("{}", tensorsmith::ops::hash::structural_id(&model.index));
//! # Ok::<(), tensorsmith::Error>(())
//! ```
//!
//! Layers, each importing only those below it:
//! - ground: [`dtype`] (with the ggml block table), [`cast`], [`index`], [`error`], [`bytes`]
//!   (the positioned-read trait: mapped or pread files, HTTP ranges, memory), `codec` and
//!   `digest`, [`sink`] (atomic output);
//! - the format seam, [`format::FileFormat`], implemented by [`safetensors`], [`gguf`] and
//!   [`ztensor`];
//! - the [`model`]: an index plus its bytes, opened by [`open`];
//! - [`ops`]: inspect, hash, diff, convert, verify.
//!
//! Writing a safetensors file, streaming tensor bytes from another:
//!
//! ```no_run
//! use tensorsmith::safetensors::{SafetensorsFile, SourceRange, Writer};
//!
//! let f = SafetensorsFile::open("model.safetensors")?;
//! let mut w = Writer::new();
//! for t in &f.index().tensors {
//!     w.add(&t.name, t.dtype, &t.shape, SourceRange { source: f.source(), range: t.data_range() })?;
//! }
//! w.write_file("copy.safetensors")?;
//! # Ok::<(), tensorsmith::Error>(())
//! ```

#![warn(missing_docs)]
pub mod bytes;
pub mod cast;
pub mod codec;
pub(crate) mod decode;
pub mod digest;
pub mod dtype;
pub mod error;
pub mod file_lock;
pub mod format;
pub(crate) mod formats;
pub mod ggml_quant;
pub mod ggml_type;
pub mod gguf;
pub mod hf_gguf;
pub mod index;
pub mod interrupt;
pub mod model;
pub mod onnx;
pub mod ops;
pub mod progress;
pub mod rank_plan;
pub mod safetensors;
pub mod sink;
pub mod ztensor;

pub use error::{Error, ErrorKind, Result};
pub use format::{OpenOptions, VerifyReport};
pub use model::{open, Model};

/// The guide's chapter on the library (`docs/src/library.md`), whose example runs as a doc
/// test of this crate, so that the guide cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/library.md")]
pub struct GuideLibraryChapter;
