//! How a write runs, as opposed to what it writes (options.rs): what to do with a dataset
//! already in the folder (`WriteMode`), worker threads, the reader-only switch, and the
//! `Progress` counters a write updates. Everything that writes reads these; they use nothing.

use std::sync::atomic::AtomicU64;

/// What to do when the folder already holds a dataset (`DatasetMode`, by contrast, is what a
/// dataset holds: batches or key-value tensors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Refuse (the default).
    #[default]
    ErrorIfExists,
    /// Replace it: its shards are retired (listed by no current version), and removed by a
    /// later clean once older than the retention.
    Overwrite,
    /// Add shards and rewrite the manifest (and the index) over old and new.
    Append,
}

/// Counters a progress display can poll while a write runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Input rows read so far, by all tasks.
    pub rows: AtomicU64,
    /// Bytes of the shard files written so far (less those a KV `lastWin` write replaced).
    pub bytes: AtomicU64,
    /// Shard files written so far (less those a KV `lastWin` write replaced).
    pub shards: AtomicU64,
    /// Shards copied straight from Parquet pages (parquet_direct), of `shards`.
    pub direct_shards: AtomicU64,
    /// Shards decoded straight from Parquet pages (compressed, dictionary-encoded or cast;
    /// parquet_direct), of `shards`. The rest went through the Parquet reader.
    pub decoded_shards: AtomicU64,
    /// Commits prepared again because another writer committed first.
    pub commit_retries: AtomicU64,
}

/// How a write runs: built from [`JobOptions::new`] (error if the dataset exists, one task
/// per core, the page copy where it applies) with `with_*` methods.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct JobOptions {
    pub(crate) mode: WriteMode,
    /// Worker threads (tasks); `None`: one per core.
    pub(crate) threads: Option<usize>,
    /// Read Parquet only through the arrow-rs reader, never copying or decoding shards
    /// straight from pages (parquet_direct). The output is the same; for comparisons and tests.
    pub(crate) reader_only: bool,
    /// How often the staging folder's heartbeat is renewed (`None`: every minute).
    pub(crate) heartbeat: Option<std::time::Duration>,
    /// How long the commit waits for the dataset's commit lock (`None`: 10 minutes).
    pub(crate) lock_timeout: Option<std::time::Duration>,
    /// After the commit, retired shards, versions and abandoned staging older than this are
    /// removed (`None`: 24 hours).
    pub(crate) retain: Option<std::time::Duration>,
    /// Batch-mode shards written and fsynced on a thread of their own while the task fills
    /// the next (`shard_pipe`), as a Spark task's are: for a stream whose producer waits
    /// while a shard is written (a Python stream). Same output.
    pub(crate) pipelined: bool,
}

impl JobOptions {
    /// The defaults: refuse a folder that already holds a dataset, one task per core, the
    /// page copy where it applies, a 24-hour retention.
    pub fn new() -> Self {
        Self::default()
    }

    /// What to do when the output already holds a dataset: refuse, overwrite or append.
    pub fn with_mode(mut self, mode: WriteMode) -> Self {
        self.mode = mode;
        self
    }

    /// `n` worker threads, one task each (at least one).
    pub fn with_threads(mut self, n: usize) -> Self {
        self.threads = Some(n.max(1));
        self
    }

    /// Parquet read only through the arrow-rs reader (same output; for comparisons).
    pub fn with_reader_only(mut self, yes: bool) -> Self {
        self.reader_only = yes;
        self
    }

    /// How often the write renews its staging folder's heartbeat (default: every minute).
    pub fn with_heartbeat(mut self, every: std::time::Duration) -> Self {
        self.heartbeat = Some(every);
        self
    }

    /// How long the commit waits for another writer's commit (default 10 minutes).
    pub fn with_lock_timeout(mut self, t: std::time::Duration) -> Self {
        self.lock_timeout = Some(t);
        self
    }

    /// How long retired shards and old versions are kept for readers (default 24 hours): the
    /// commit cleans what is older (`dataset clean --older-than`).
    pub fn with_retain(mut self, t: std::time::Duration) -> Self {
        self.retain = Some(t);
        self
    }

    /// Shards written on a thread of their own while the next fills (same output).
    pub fn with_pipelined(mut self, yes: bool) -> Self {
        self.pipelined = yes;
        self
    }

    pub(crate) fn lock_timeout(&self) -> std::time::Duration {
        self.lock_timeout
            .unwrap_or(std::time::Duration::from_secs(600))
    }

    pub(crate) fn retain(&self) -> std::time::Duration {
        self.retain
            .unwrap_or(std::time::Duration::from_secs(24 * 3600))
    }

    pub(crate) fn heartbeat(&self) -> std::time::Duration {
        self.heartbeat.unwrap_or(std::time::Duration::from_secs(60))
    }

    /// The write mode set by [`with_mode`](Self::with_mode).
    pub fn mode(&self) -> WriteMode {
        self.mode
    }
}
