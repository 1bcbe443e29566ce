//! `convert`: any model to any format we write. `run` chooses the writer; one file per
//! output format (safetensors, zTensor, GGUF, ONNX), plus Hugging Face folders to GGUF,
//! llama-quantize's mixes and importance matrices, digest checks, carried metadata,
//! dequantization and densifying.

mod run;
pub use run::*;

pub mod densify;
pub mod dequantize;
pub(crate) mod digest_guard;
pub(crate) mod gguf;
pub(crate) mod hf;
pub(crate) mod imatrix;
pub(crate) mod meta_carry;
pub(crate) mod mix;
pub(crate) mod onnx;
pub(crate) mod options;
pub(crate) mod safetensors;
pub mod skip;
pub(crate) mod ztensor;
