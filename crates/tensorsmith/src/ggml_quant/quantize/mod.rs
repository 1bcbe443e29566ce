//! Quantizing float rows into ggml blocks, bit-identical to the references: `run` chooses
//! the type's quantizer (and is re-exported here); one file per family (the legacy types
//! and their importance-matrix search, K-quants, the IQ types, FP4, ternary).

mod run;
pub use run::*;

pub(super) mod fp4;
pub(super) mod iq1;
pub(super) mod iq2;
pub(super) mod iq3;
pub(super) mod iq4;
pub(super) mod k;
#[cfg(test)]
mod k_tests;
pub(super) mod legacy;
pub(super) mod legacy_imatrix;
pub(super) mod ternary;
#[cfg(test)]
mod tests;
