//! zTensor v2: reading and appending and writing, each generation's own rules.

pub(super) mod append;
pub mod read;
pub(super) mod write;
