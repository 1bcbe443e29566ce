//! Reading a dataset: the `Dataset` reader and its shards (mapped, or by range from a
//! store through a block cache), verify and export.

pub(crate) mod dataset;
pub(crate) mod export;
pub(crate) mod range_cache;
pub(crate) mod shard_file;
pub(crate) mod verify;
pub(crate) mod verify_checks;
