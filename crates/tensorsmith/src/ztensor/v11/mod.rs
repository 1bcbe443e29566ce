//! zTensor v1.1 (and 1.2): reading and writing, each generation's own rules.

pub mod read;
pub(super) mod write;
