//! Distributed jobs by location, for Spark and Ray: a local folder (shared by every node)
//! goes to the staging-folder protocol of job.rs, a store URL (`s3://…`) to store_job.rs,
//! any other scheme is refused by name (store_open.rs).

use crate::commit::staging::Heartbeat;
use crate::error::Result;
use crate::input::files::Input;
use crate::manifest::Manifest;
use crate::options::WriteOptions;
use crate::store::clean::clean_store;
use crate::store::job::{abort_store_job, commit_store_job, start_store_job, store_task};
use crate::store::open::open_store;
use crate::write::job::{
    abort_job, check_job_id, commit_job_with, start_job, write_task, write_task_range,
};
use crate::write::job_options::{JobOptions, Progress};
use crate::write::task_report::TaskReport;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;
use tensorsmith::bytes::StorageOptions;

/// Starts job `job_id` at `location` (on the driver, before any task): a local staging
/// folder with its heartbeat, or the job's heartbeat object in a store; renewed every
/// `every` until the returned [`Heartbeat`] is stopped or dropped.
///
/// # Errors
///
/// Those of [`start_job`] (when `location` is a local folder), on a store as in a folder, and:
///
/// - [`DatasetError::Input`](crate::DatasetError::Input),
///   [`DatasetError::Tensor`](crate::DatasetError::Tensor): `location` is a URL datasets are
///   not written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`](crate::DatasetError::Tensor): the store cannot be reached or
///   refuses access, or `storage` holds an unknown or invalid setting.
pub fn start_job_at(
    location: &str,
    storage: &StorageOptions,
    job_id: &str,
    every: Duration,
) -> Result<Heartbeat> {
    check_job_id(job_id)?;
    match open_store(location, storage, true)? {
        None => start_job(Path::new(location), job_id, every),
        Some(store) => start_store_job(store, job_id, every, || {}),
    }
}

/// [`write_task`] at `location`: one pass over a stream, shards uploaded to a store.
///
/// # Errors
///
/// Those of [`write_task`] (when `location` is a local folder), on a store as in a folder, and:
///
/// - [`DatasetError::Input`](crate::DatasetError::Input),
///   [`DatasetError::Tensor`](crate::DatasetError::Tensor): `location` is a URL datasets are
///   not written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`](crate::DatasetError::Tensor): the store cannot be reached or
///   refuses access, or `storage` holds an unknown or invalid setting.
pub fn write_task_at(
    input: &Input,
    location: &str,
    storage: &StorageOptions,
    job_id: &str,
    task: u64,
    opts: &WriteOptions,
    progress: &Progress,
) -> Result<TaskReport> {
    check_job_id(job_id)?;
    match open_store(location, storage, true)? {
        None => write_task(input, Path::new(location), job_id, task, opts, progress),
        Some(store) => store_task(
            input,
            &*store,
            None,
            job_id,
            task,
            0..u64::MAX,
            opts,
            progress,
            true,
        ),
    }
}

/// [`write_task_range`] at `location`.
///
/// # Errors
///
/// Those of [`write_task_range`] (when `location` is a local folder), on a store as in a
/// folder, and:
///
/// - [`DatasetError::Input`](crate::DatasetError::Input),
///   [`DatasetError::Tensor`](crate::DatasetError::Tensor): `location` is a URL datasets are
///   not written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`](crate::DatasetError::Tensor): the store cannot be reached or
///   refuses access, or `storage` holds an unknown or invalid setting.
#[allow(clippy::too_many_arguments)]
pub fn write_task_range_at(
    input: &Input,
    location: &str,
    storage: &StorageOptions,
    job_id: &str,
    task: u64,
    rows: Range<u64>,
    opts: &WriteOptions,
    progress: &Progress,
) -> Result<TaskReport> {
    check_job_id(job_id)?;
    match open_store(location, storage, true)? {
        None => write_task_range(
            input,
            Path::new(location),
            job_id,
            task,
            rows,
            opts,
            progress,
        ),
        Some(store) => store_task(
            input, &*store, None, job_id, task, rows, opts, progress, false,
        ),
    }
}

/// [`commit_job_with`] at `location`; on a store, the retired and abandoned objects older
/// than the retention go after the commit, as after `write_dataset_to`.
///
/// # Errors
///
/// Those of [`commit_job_with`] (when `location` is a local folder), on a store as in a folder,
/// and:
///
/// - [`DatasetError::Input`](crate::DatasetError::Input),
///   [`DatasetError::Tensor`](crate::DatasetError::Tensor): `location` is a URL datasets are
///   not written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`](crate::DatasetError::Tensor): the store cannot be reached or
///   refuses access, or `storage` holds an unknown or invalid setting.
pub fn commit_job_at(
    location: &str,
    storage: &StorageOptions,
    job_id: &str,
    reports: Vec<TaskReport>,
    opts: &WriteOptions,
    job: &JobOptions,
) -> Result<Manifest> {
    check_job_id(job_id)?;
    match open_store(location, storage, true)? {
        None => commit_job_with(Path::new(location), job_id, reports, opts, job),
        Some(store) => {
            // Another writer's commit (safetensors-spark's append) becomes a version first.
            crate::store::adopt::adopt_store(&*store)?;
            let m = commit_store_job(&*store, None, job_id, reports, opts, job)?;
            let _ = clean_store(&*store, job.retain());
            Ok(m)
        }
    }
}

/// [`abort_job`] at `location`: every shard the job wrote removed, committed ones never.
///
/// # Errors
///
/// Those of [`abort_job`] (when `location` is a local folder), on a store as in a folder, and:
///
/// - [`DatasetError::Input`](crate::DatasetError::Input),
///   [`DatasetError::Tensor`](crate::DatasetError::Tensor): `location` is a URL datasets are
///   not written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`](crate::DatasetError::Tensor): the store cannot be reached or
///   refuses access, or `storage` holds an unknown or invalid setting.
pub fn abort_job_at(location: &str, storage: &StorageOptions, job_id: &str) -> Result<()> {
    check_job_id(job_id)?;
    match open_store(location, storage, true)? {
        None => abort_job(Path::new(location), job_id),
        Some(store) => abort_store_job(&*store, job_id),
    }
}
