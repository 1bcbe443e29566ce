//! `write_to_store`: a dataset written into a store (an `s3://`, `az://` or `gs://` prefix, or
//! a local folder: store_local.rs). The tasks write their shards into a staging folder (in
//! the temporary directory, `TMPDIR`, for a remote store; inside the dataset's folder for a
//! local one, so a shard moves in by a rename), the same shards and bytes wherever the
//! dataset lives. Batch-mode shards move to their final names as soon as each is complete
//! (store_upload.rs: staging then holds a few shards per task and upload thread, whatever
//! the dataset's size); KV shards once duplicates are resolved, by the commit
//! (store_commit.rs), which then publishes the version with an exclusive create. The caller
//! cleans after it (store_clean.rs). The write runs as a job of its own (store_job.rs
//! `as_store_job`: a heartbeat renewed while it runs, its tasks' attempts marked), so a
//! clean beside it spares its shards however long it takes; the commit also checks that
//! every shard it moved in is still there.

use crate::commit::staging::{mark, STAGING_PREFIX};
use crate::error::{DatasetError, Result};
use crate::input::files::Input;
use crate::kv::resolve;
use crate::manifest::Manifest;
use crate::options::{Naming, WriteOptions};
use crate::store::commit::commit_to_store;
use crate::store::job::as_store_job;
use crate::store::seam::Store;
use crate::store::upload::{check, remove_uploaded, uploading};
use crate::store::versions as sv;
use crate::write::job_options::{JobOptions, Progress, WriteMode};
use crate::write::plan::Plan;
use crate::write::task_context::with_ctx;
use crate::write::task_ranges::run_tasks;
use std::path::{Path, PathBuf};

/// Removes the staging folder when dropped.
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `input` as the next version of the dataset in `store`, staging its shards in a
/// folder below `local_staging` (a local store's own folder) or else in the temporary
/// directory.
pub(crate) fn write_to_store(
    input: &Input,
    store: &dyn Store,
    local_staging: Option<&Path>,
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
    let staging = Staging(match local_staging {
        // Named and marked as the local protocol's staging folders are, so that a clean of
        // either kind tells it live (its heartbeat) and one left by a kill is removed.
        // The machine's name last: a process id means something only there.
        Some(dir) => dir.join(format!(
            "{STAGING_PREFIX}{}-{}{}",
            std::process::id(),
            uuid::Uuid::new_v4(),
            crate::commit::staging::this_host().map_or(String::new(), |h| format!("@{h}"))
        )),
        None => std::env::temp_dir().join(format!(
            "tensorsmith-upload-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        )),
    });
    std::fs::create_dir(&staging.0).map_err(|e| DatasetError::io(&staging.0, e))?;
    // A local staging folder's marker is renewed with the job's heartbeat, by one thread.
    if local_staging.is_some() {
        mark(&staging.0)?;
    }
    let renew_marker = || {
        if local_staging.is_some() {
            let _ = mark(&staging.0);
        }
    };
    let batch = matches!(opts.naming, Naming::Batch(_));
    // A job of its own, so that a clean beside a long write never takes its shards.
    let committed = as_store_job(
        store,
        job.heartbeat(),
        &renew_marker,
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
                            resolve::resolve(ctx, &mut reports)?;
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
            crate::store::adopt::adopt_store(store)?;
            // Through the job's view: KV shards moving in mark their attempts too.
            commit_to_store(
                jobs,
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
    drop(staging);
    Ok(committed)
}
