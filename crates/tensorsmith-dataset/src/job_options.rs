//! How a write runs, as opposed to what it writes (options.rs): what to do with a dataset
//! already in the folder (`WriteMode`), worker threads, the reader-only switch, and the
//! `Progress` counters a write updates. Everything that writes reads these; they use nothing.

use std::sync::atomic::AtomicU64;

/// What to do when the folder already holds a dataset. Public as `Mode` too (the CLI and the
/// Python package name it so); `WriteMode` inside, beside `read::DatasetMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Refuse (the default).
    #[default]
    ErrorIfExists,
    /// Replace it: its shards and index are removed once the new manifest is in place.
    Overwrite,
    /// Add shards and rewrite the manifest (and the index) over old and new.
    Append,
}

/// Counters a progress display can poll while a write runs.
#[derive(Debug, Default)]
pub struct Progress {
    pub rows: AtomicU64,
    pub bytes: AtomicU64,
    pub shards: AtomicU64,
    /// Shards copied straight from Parquet pages (parquet_direct), of `shards`.
    pub direct_shards: AtomicU64,
}

#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    pub mode: WriteMode,
    /// Worker threads (tasks); 0 means one per core.
    pub threads: usize,
    /// Read Parquet only through the arrow-rs reader, never copying shards straight from
    /// pages (parquet_direct). The output is the same; for comparisons and tests.
    pub reader_only: bool,
}
