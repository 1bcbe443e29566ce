//! What `dataset clean` did and left, and what `dataset info` shows of a dataset's versions:
//! the reports of the one clean (store_clean.rs), on a store or a local folder.

use std::path::PathBuf;

/// What `clean` removed.
#[derive(Debug, Default)]
pub struct CleanReport {
    pub staging: Vec<PathBuf>,
    pub versions: Vec<u64>,
    /// Shard files removed, with their bytes.
    pub shards: Vec<(String, u64)>,
    pub index_files: Vec<String>,
    /// Multipart uploads never completed that were aborted (object stores), as `URL (upload ID)`.
    pub uploads: Vec<String>,
    /// Whether `dataset_manifest.json` was written again from the current version.
    pub repaired: bool,
    /// What the clean left for now because it is too recent, and when a clean with the same
    /// retention will take it.
    pub kept: Vec<Kept>,
}

/// Something `clean` leaves for now: what it is, and from when (milliseconds since the epoch)
/// a clean with the same retention removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub what: String,
    pub from_ms: u64,
}

/// A version of a dataset, as `dataset info` lists it.
#[derive(Debug, Clone)]
pub struct VersionInfo {
    pub version: u64,
    pub mode: String,
    pub committed_ms: u64,
    pub shards: usize,
    pub samples: u64,
    pub bytes: u64,
    /// When a later version replaced it (`None`: the current version).
    pub superseded_ms: Option<u64>,
}

/// A shard that only versions older than the current one list.
#[derive(Debug, Clone)]
pub struct RetiredShard {
    pub shard_path: String,
    pub bytes: u64,
    /// The last version that lists it.
    pub last_version: u64,
}
