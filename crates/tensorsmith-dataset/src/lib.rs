//! Tensor datasets in the safetensors-spark layout (specs/safetensors-spark-format.md):
//! Arrow record batches, from Parquet, Arrow IPC or memory, written as safetensors shards
//! with a `dataset_manifest.json` and an optional `_tensor_index.parquet`, and read back.
//! One process writes with `write_dataset`; a distributed job with `write_task` per task,
//! then `commit_job` (or `abort_job`).

pub mod arrow_values;
pub mod column;
pub mod error;
pub mod options;

pub use error::{DatasetError, Result};
pub use options::{Duplicates, Naming, TailStrategy, WriteOptions};
mod batch_strategy;
mod commit;
mod duplicates;
pub mod input;
mod input_cut;
mod input_memory;
pub mod job;
pub mod job_options;
mod kv_keys;
mod kv_strategy;
pub mod manifest;
mod parquet_direct;
pub mod parquet_guard;
mod plan;
mod shard_record;
mod task;
mod task_context;
mod task_report;
pub mod tensor_index_file;
pub mod write;

pub use input::Input;
pub use job::{abort_job, commit_job, write_task};
pub use job_options::{JobOptions, Progress, WriteMode, WriteMode as Mode};
pub use manifest::{Manifest, ShardInfo, TensorSchema};
pub use task_report::TaskReport;
pub use tensor_index_file::IndexEntry;
pub use write::write_dataset;
pub mod export;
pub mod read;
pub mod verify;

pub use export::export;
pub use read::{Dataset, DatasetMode, Tensor};
pub use verify::{verify, VerifyReport};
