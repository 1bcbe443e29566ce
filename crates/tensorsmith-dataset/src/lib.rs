//! Tensor datasets in the safetensors-spark layout (specs/safetensors-spark-format.md):
//! Arrow record batches, from Parquet or Arrow IPC, written as safetensors shards with a
//! `dataset_manifest.json` and an optional `_tensor_index.parquet`, and read back.

pub mod column;
pub mod convert;
pub mod error;
pub mod options;

pub use error::{DatasetError, Result};
pub use options::{Duplicates, Naming, TailStrategy, WriteOptions};
pub mod index;
pub mod input;
pub mod manifest;
pub mod parquet_guard;
pub mod write;

pub use input::Input;
pub use manifest::Manifest;
pub use write::{write_dataset, JobOptions, Mode, Progress};
pub mod export;
pub mod read;
pub mod verify;

pub use export::export;
pub use read::{Dataset, DatasetMode, Tensor};
pub use verify::{verify, VerifyReport};
