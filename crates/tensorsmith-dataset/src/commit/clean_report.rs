//! What `dataset clean` did and left, and what `dataset info` shows of a dataset's versions:
//! the reports of the one clean (store_clean.rs), on a store or a local folder.

use std::path::PathBuf;

/// What `clean` removed.
#[derive(Debug, Default)]
pub struct CleanReport {
    /// Staging folders of dead or abandoned writers that were removed (local folders only: a
    /// store has none).
    pub staging: Vec<PathBuf>,
    /// Numbers of the superseded versions removed (each leaves a `.removed` marker).
    pub versions: Vec<u64>,
    /// Shard files removed, with their bytes.
    pub shards: Vec<(String, u64)>,
    /// Index files removed from `_tensorsmith/index/`, by file name.
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
    /// What was kept and why, in words (for example a shard no version lists yet).
    pub what: String,
    /// From when a clean with the same retention removes it, in milliseconds since the epoch.
    pub from_ms: u64,
}

/// A version of a dataset, as `dataset info` lists it.
#[derive(Debug, Clone)]
pub struct VersionInfo {
    /// The version's number (0: a dataset written before versions existed, adopted).
    pub version: u64,
    /// The write mode that made it: `error`, `overwrite`, `append`, or `adopted`.
    pub mode: String,
    /// When its writer prepared the commit, in milliseconds since the epoch.
    pub committed_ms: u64,
    /// How many shards the version lists.
    pub shards: usize,
    /// Its samples (rows written) in all, as its manifest records.
    pub samples: u64,
    /// Its shards' bytes in all, as its manifest records.
    pub bytes: u64,
    /// When a later version replaced it (`None`: the current version).
    pub superseded_ms: Option<u64>,
}

/// A shard that only versions older than the current one list.
#[derive(Debug, Clone)]
pub struct RetiredShard {
    /// The shard's file name, relative to the dataset folder.
    pub shard_path: String,
    /// The shard's length in bytes.
    pub bytes: u64,
    /// The last version that lists it.
    pub last_version: u64,
}
