//! `stats`: value statistics of every tensor, read once with all cores: decoding,
//! float and integer accumulators, the fit of values in narrower types, `--check`'s rules,
//! the JSON form.

mod run;
pub use run::*;

pub mod check;
pub(crate) mod decode;
pub(crate) mod float;
pub mod fp_fit;
pub(crate) mod int;
pub mod json;
pub(crate) mod measure;
pub(crate) mod patterns;
