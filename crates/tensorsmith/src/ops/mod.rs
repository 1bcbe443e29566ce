//! Operations written once against the neutral index and the [`crate::Model`]: inspect
//! (summaries and a stable JSON form), hash, diff, convert, densify, verify, value
//! statistics and the HTML report page.

pub mod convert;
mod convert_gguf;
mod convert_hf;
mod convert_imatrix;
mod convert_mix;
mod convert_onnx;
mod convert_options;
mod convert_safetensors;
pub mod convert_skip;
mod convert_ztensor;
pub mod densify;
pub mod dequantize;
pub mod diff;
pub mod diff_json;
pub mod diff_llama;
pub mod diff_metrics;
pub mod diff_page;
pub mod diff_pairing;
mod diff_rename;
mod digest_guard;
pub mod fp_fit;
pub mod hash;
mod html_page;
pub mod inspect;
mod meta_carry;
pub mod name_glob;
mod onnx_wi;
pub mod report;
pub mod report_data;
mod report_page;
pub mod stats;
pub mod stats_check;
mod stats_decode;
mod stats_float;
mod stats_int;
pub mod stats_json;
mod stats_measure;
mod stats_patterns;
pub mod tree;
pub mod verify;
pub mod wi_hash;
mod wi_json;
pub use crate::model::write_id;
