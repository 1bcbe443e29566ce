//! The commit protocol's records and rules: the versions format, folder versions read
//! through the store seam, retention and its report, staging folders and heartbeats, the
//! lock around the manifest, outsiders (another writer's manifest or shards), and the
//! checks a commit makes before it writes.

pub(crate) mod base;
pub(crate) mod check;
pub(crate) mod clean_report;
pub(crate) mod folder_versions;
pub(crate) mod foreign;
pub(crate) mod lock;
pub(crate) mod outsiders;
pub(crate) mod pending;
pub(crate) mod prepare;
pub(crate) mod retention;
pub(crate) mod staging;
pub(crate) mod versions;
