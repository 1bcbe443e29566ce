//! `write_dataset_to`: a dataset written at a location that may be a URL. A local path is
//! `write_dataset` (write.rs). An `s3://`, `az://` or `gs://` prefix: the tasks write their shards into a local
//! staging folder (in the temporary directory, `TMPDIR`) exactly as a local write does (same
//! shards, same bytes). Batch-mode shards are uploaded to their final names as soon as each
//! is complete (store_upload.rs: staging then holds a few shards per task and upload thread,
//! whatever the dataset's size); KV shards once duplicates are resolved, by the object-store
//! commit (store_commit.rs), which then publishes the version with a conditional put;
//! retired and abandoned objects older than the retention go after it (store_clean.rs). The
//! write runs as a job of its own (store_job.rs `as_store_job`: a heartbeat renewed while it
//! runs, its tasks' attempts marked), so a clean beside it spares its shards however long it
//! takes; the commit also checks that every shard it uploaded is still there.

use crate::error::{DatasetError, Result};
use crate::input::Input;
use crate::job_options::{JobOptions, Progress, WriteMode};
use crate::kv_resolve;
use crate::manifest::Manifest;
use crate::options::{Naming, WriteOptions};
use crate::plan::Plan;
use crate::store::Store;
use crate::store_clean::clean_store;
use crate::store_commit::commit_to_store;
use crate::store_job::as_store_job;
use crate::store_open::open_store;
use crate::store_upload::{check, remove_uploaded, uploading};
use crate::store_versions as sv;
use crate::task_context::with_ctx;
use crate::write::{run_tasks, write_dataset};
use std::path::{Path, PathBuf};
use tensorsmith::bytes::StorageOptions;

/// Writes `input` as a dataset at `location`: a local folder, or `s3://bucket/prefix` (also
/// `s3a://`), `az://container/prefix` (`abfs(s)://`) or `gs://bucket/prefix`, with the settings of `storage` and the environment. `hf://` is refused (read
/// only), and so is any other scheme, by name.
pub fn write_dataset_to(
    input: &Input,
    location: &str,
    storage: &StorageOptions,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: &Progress,
) -> Result<Manifest> {
    match open_store(location, storage, true)? {
        None => write_dataset(input, Path::new(location), opts, job, progress),
        Some(store) => write_to_store(input, &*store, opts, job, progress),
    }
}

/// Removes the staging folder when dropped.
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn write_to_store(
    input: &Input,
    store: &dyn Store,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: &Progress,
) -> Result<Manifest> {
    let plan = Plan::new(input, opts)?;
    // Refused (or read, to fail early on a damaged one) before anything is written; the
    // commit looks again.
    if sv::current(store)?.is_some() && job.mode == WriteMode::ErrorIfExists {
        return Err(DatasetError::Exists(PathBuf::from(store.location())));
    }
    let threads = job
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let staging = Staging(std::env::temp_dir().join(format!(
        "tensorsmith-upload-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    )));
    std::fs::create_dir(&staging.0).map_err(|e| DatasetError::io(&staging.0, e))?;
    let batch = matches!(opts.naming, Naming::Batch(_));
    // A job of its own, so that a clean beside a long write never takes its shards.
    let committed = as_store_job(
        store,
        job.heartbeat(),
        |jobs| {
            let (reports, mut uploaded) = uploading(jobs, &staging.0, |queue| {
                with_ctx(
                    &plan,
                    input,
                    opts,
                    &staging.0,
                    progress,
                    !job.reader_only,
                    job.pipelined,
                    // Batch shards are final once written: uploaded while the tasks go on.
                    batch.then_some(queue),
                    |ctx| {
                        let mut reports = run_tasks(ctx, ctx.input.total_rows(), threads)?;
                        if let Naming::Kv { .. } = opts.naming {
                            kv_resolve::resolve(ctx, &mut reports)?;
                        }
                        Ok(reports)
                    },
                )
            });
            let reports = match reports.and_then(|r| check(&mut uploaded).map(|()| r)) {
                Ok(r) => r,
                Err(e) => {
                    remove_uploaded(store, &uploaded);
                    return Err(e);
                }
            };
            // Another writer's commit (safetensors-spark's append) becomes a version first.
            crate::store_adopt::adopt_store(store)?;
            commit_to_store(
                store,
                &staging.0,
                reports,
                &uploaded.names,
                opts,
                job,
                Some(progress),
            )
        },
        |m: &Manifest| m.shards.iter().map(|s| s.shard_path.clone()).collect(),
    )?;
    let manifest = committed;
    drop(staging);
    // Retired shards, old versions and abandoned uploads older than the retention.
    let _ = clean_store(store, job.retain());
    Ok(manifest)
}
