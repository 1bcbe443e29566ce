//! Tensor datasets in the safetensors-spark layout (specs/safetensors-spark-format.md):
//! Arrow record batches, from Parquet, Arrow IPC or memory, written as safetensors shards
//! with a `dataset_manifest.json` and an optional `_tensor_index.parquet`, and read back.
//! One process writes with `write_dataset`; a distributed job with `write_task` per task,
//! then `commit_job` (or `abort_job`).
//!
//! The module groups below go bottom-up: a module imports only from its own group and the
//! ones above it, and never in a circle (ARCHITECTURE.md has the layers file by file). Only
//! the `_tensor_index.parquet` reader and the Parquet pre-check are public modules; what
//! else callers use is re-exported here.

// Bottom: errors, options, the dataset's own files (manifest, tensor index, staging folders),
// Parquet checks.
mod commit_lock;
mod error;
mod folder_versions;
mod foreign;
mod job_options;
mod manifest;
mod options;
mod outsiders;
pub mod parquet_guard;
mod pending;
mod staging;
pub mod tensor_index_file;
mod versions;
// Input.
mod guarded_pages;
mod input;
mod input_cut;
mod input_list;
mod input_memory;
mod input_schema;
mod input_source;
mod remote_chunks;
// Columns to tensor bytes.
mod arrow_values;
mod column;
mod finite_range;
mod kv_keys;
// Writing: task reports, duplicates, the plan, tasks and their strategies, the commit,
// the job API and write_dataset.
mod batch_strategy;
mod clean_report;
mod commit_base;
mod commit_check;
mod commit_prepare;
mod duplicates;
mod job;
mod job_at;
mod kv_resolve;
mod kv_strategy;
mod parquet_direct;
mod plan;
mod retention;
mod shard_pipe;
mod shard_record;
mod task;
mod task_at;
mod task_context;
mod task_ranges;
mod task_report;
mod write;
// The object-store protocol: the store seam, its local folder, S3, Azure and GCS stores, the
// versions read through it, the commit on conditional writes, clean, and the URL dispatch.
mod store;
mod store_adopt;
mod store_clean;
mod store_commit;
mod store_gcs;
mod store_index;
mod store_job;
mod store_job_marks;
mod store_local;
mod store_object;
mod store_open;
mod store_prefix;
mod store_upload;
mod store_versions;
mod store_write;
// Reading, verifying, exporting a dataset.
mod export;
mod range_cache;
mod read;
mod shard_file;
mod verify;
mod verify_checks;
// Reading, verifying and cleaning a dataset on a store, and the commands by location.
mod located;
#[cfg(test)]
mod store_job_tests;
#[cfg(test)]
mod store_tests;
mod store_verify;

pub use commit_lock::{lock_path, DEFAULT_LOCK_TIMEOUT};
pub use error::{DatasetError, Result};
pub use export::{export, export_choosing, export_dataset, export_keys};
pub use foreign::ForeignManifest;
pub use input::{Input, InputFile, InputKind};
pub use input_cut::RowSink;
pub use input_list::{input_locations, list_prefix};
pub use job::{abort_job, commit_job, commit_job_with, start_job, write_task, write_task_range};
pub use job_at::{abort_job_at, commit_job_at, start_job_at, write_task_at, write_task_range_at};
pub use job_options::{JobOptions, Progress, WriteMode};
pub use located::{adopt_at, clean_at, exists_at, export_at, info_at, repair_at, verify_at};
pub use manifest::{Manifest, ShardInfo, TensorSchema};
pub use options::{Duplicates, Naming, TailStrategy, WriteOptions};
pub use read::{ColumnView, Dataset, DatasetMode, Tensor};
pub use retention::{
    clean, clean_with, repair, versions_info, CleanReport, Kept, RetiredShard, VersionInfo,
    STAGING_FLOOR,
};
pub use shard_file::ShardFile;
pub use staging::{
    parse_duration, staging_folders, stale_folders, Heartbeat, StagingFolder, DEFAULT_HEARTBEAT,
    DEFAULT_STALE_AFTER,
};
pub use store_adopt::adopt;
pub use store_clean::ABANDONED_FLOOR;
pub use task_ranges::task_ranges;
pub use task_report::TaskReport;
pub use tensor_index_file::IndexEntry;
pub use verify::{verify, verify_version, verify_with, DatasetReport};
pub use versions::{format_utc, Snapshot, Version};
pub use write::{write_dataset, write_dataset_to};
