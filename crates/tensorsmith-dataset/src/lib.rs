//! Tensor datasets in the safetensors-spark layout (specs/safetensors-spark-format.md):
//! Arrow record batches, from Parquet, Arrow IPC or memory, written as safetensors shards
//! with a `dataset_manifest.json` and an optional `_tensor_index.parquet`, and read back.
//! One process writes with `write_dataset`; a distributed job with `write_task` per task,
//! then `commit_job` (or `abort_job`).
//!
//! Write a bundled Parquet file (pyarrow's defaults: snappy, dictionaries) as a dataset of
//! 4-sample shards, then read it back:
//!
//! ```
//! use tensorsmith::dtype::DType;
//! use tensorsmith_dataset::{write_dataset, Dataset, Input, JobOptions, Progress, WriteOptions};
//!
//! let parquet = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/dataset/input_snappy_dict_v1.parquet");
//! let dir = tempfile::tempdir()?;
//! let out = dir.path().join("ds");
//! let input = Input::open(&[parquet])?;
//! let mut options = WriteOptions::batch(4);
//! options.dtype = Some(DType::F32);
//! let manifest = write_dataset(&input, &out, &options, &JobOptions::default(), &Progress::default())?;
//! assert_eq!((manifest.total_samples, manifest.shards.len()), (13, 4));
//!
//! let ds = Dataset::open(&out)?;
//! let first = ds.sample(0)?; // (column, tensor) pairs: here the one column "v"
//! assert_eq!(first[0].0, "v");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Files import each other without circles (ARCHITECTURE.md has the folders). Only
//! the `_tensor_index.parquet` reader and the Parquet pre-check are public modules; what
//! else callers use is re-exported here.

// The crate's folders and files, from the dataset's own records up to the commands.
// Errors, options and the dataset's own files.
#![warn(missing_docs)]
mod error;
mod manifest;
mod options;
pub mod parquet_guard;
pub mod tensor_index_file;
// Columns to tensor bytes.
mod arrow_values;
mod column;
mod finite_range;
mod kv;
// Reading the input: Parquet, Arrow IPC, memory, by range from stores.
mod input;
// The commit protocol's records: versions, retention, staging, the lock, outsiders.
mod commit;
// Writing: the plan, tasks, shards, jobs; Parquet pages copied as they are.
mod parquet_direct;
mod write;
// The protocol on a store (a local folder is one): the seam, its stores, commit, clean.
mod store;
// Reading, verifying, exporting; the commands by location.
mod located;
mod read;

pub use commit::foreign::ForeignManifest;
pub use commit::lock::{lock_path, DEFAULT_LOCK_TIMEOUT};
pub use commit::retention::{
    clean, clean_with, repair, versions_info, CleanReport, Kept, RetiredShard, VersionInfo,
    STAGING_FLOOR,
};
pub use commit::staging::{
    parse_duration, staging_folders, stale_folders, Heartbeat, StagingFolder, DEFAULT_HEARTBEAT,
    DEFAULT_STALE_AFTER,
};
pub use commit::versions::{format_utc, Snapshot, Version};
pub use error::{DatasetError, Result};
pub use input::cut::RowSink;
pub use input::files::{Input, InputFile, InputKind};
pub use input::list::{input_locations, list_prefix};
pub use located::{adopt_at, clean_at, exists_at, export_at, info_at, repair_at, verify_at};
pub use manifest::{Manifest, ShardInfo, TensorSchema};
pub use options::{Duplicates, Naming, TailStrategy, WriteOptions};
pub use read::dataset::{ColumnView, Dataset, DatasetMode, Tensor};
pub use read::export::{export, export_choosing, export_dataset, export_keys};
pub use read::shard_file::ShardFile;
pub use read::verify::{verify, verify_version, verify_with, DatasetReport};
pub use store::adopt::adopt;
pub use store::clean::ABANDONED_FLOOR;
pub use tensor_index_file::IndexEntry;
pub use write::entry::{write_dataset, write_dataset_to};
pub use write::job::{
    abort_job, commit_job, commit_job_with, start_job, write_task, write_task_range,
};
pub use write::job_at::{
    abort_job_at, commit_job_at, start_job_at, write_task_at, write_task_range_at,
};
pub use write::job_options::{JobOptions, Progress, WriteMode};
pub use write::task_ranges::task_ranges;
pub use write::task_report::TaskReport;
