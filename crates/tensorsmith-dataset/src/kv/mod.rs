//! KV mode (`name_col`): keys from the name column, the duplicates strategy, and the
//! strategy that writes one tensor per key and column.

pub(crate) mod keys;
pub(crate) mod resolve;
pub(crate) mod strategy;
