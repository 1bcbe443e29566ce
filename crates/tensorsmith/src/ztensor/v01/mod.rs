//! zTensor v0.1: reading and writing, each generation's own rules.

pub mod read;
pub(super) mod write;
