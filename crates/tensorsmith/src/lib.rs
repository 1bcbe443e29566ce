//! # tensorsmith
//!
//! Read, validate, write and inspect tensor files. Every format is parsed once into a neutral
//! [`index::TensorIndex`] (names, dtypes, shapes, byte ranges, metadata), and everything else
//! is written against that index.
//!
//! ```no_run
//! use tensorsmith::safetensors::{SafetensorsFile, Writer};
//! use tensorsmith::dtype::DType;
//!
//! let f = SafetensorsFile::open("model.safetensors")?;
//! for t in &f.index().tensors {
//!     println!("{} {} {:?}", t.name, t.dtype, t.shape);
//! }
//! // Copy it, streaming tensor bytes from the open file.
//! let mut w = Writer::new();
//! for t in &f.index().tensors {
//!     w.add(&t.name, t.dtype, &t.shape, tensorsmith::safetensors::SourceRange {
//!         source: f.source(),
//!         range: t.data_range(),
//!     })?;
//! }
//! w.write_file("copy.safetensors")?;
//! # Ok::<(), tensorsmith::Error>(())
//! ```

pub mod cast;
pub mod codec;
pub mod digest;
pub mod dtype;
pub mod error;
pub mod gguf;
pub mod index;
pub mod ops;
pub mod remote;
pub mod safetensors;
pub mod sink;
pub mod source;
pub mod ztensor;

pub use error::{Error, ErrorKind, Result};
