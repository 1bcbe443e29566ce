//! `hash`: identities of a model that do not depend on its file format: our structural
//! and content IDs, and weight-inspect's hash (with its ONNX rules).

mod run;
pub use run::*;

pub(crate) mod onnx_wi;
pub mod wi_hash;
pub(crate) mod wi_json;
