//! Writing a dataset: rows split into contiguous ranges, one per task (a worker thread with
//! its own taskId), each task reading its own range and writing its shards into a staging
//! folder; then the commit. A local folder is one more store (store_local.rs): the write
//! runs the object-store protocol (store_write.rs) on it, with its staging folder inside the
//! dataset's, so a finished shard moves in by a rename. A failure or a kill before the
//! commit point (the version file created exclusively) leaves the previous dataset as it
//! was: no version lists the shards of the write.

use crate::commit::retention;
use crate::commit::staging::STAGING_PREFIX;
use crate::commit::versions::Snapshot;
use crate::error::{DatasetError, Result};
use crate::input::files::Input;
use crate::manifest::Manifest;
use crate::options::WriteOptions;
use crate::store::clean::clean_store;
use crate::store::local::LocalStore;
use crate::store::open::open_store;
use crate::store::write::write_to_store;
use crate::write::job_options::{JobOptions, Progress, WriteMode};
use crate::write::plan::Plan;
use std::path::Path;
use tensorsmith::bytes::StorageOptions;

/// The checks before anything is written (the commit looks again): an existing dataset in
/// mode error, and a user's files named like shards in a folder that holds no dataset.
pub(crate) fn refuse_early(out: &Path, mode: WriteMode) -> Result<()> {
    let found = match Snapshot::current(out)? {
        Some(_) => true,
        None => crate::commit::outsiders::refuse_unless_committed(out, mode)?,
    };
    if found && mode == WriteMode::ErrorIfExists {
        return Err(DatasetError::Exists(out.to_path_buf()));
    }
    Ok(())
}

/// Writes `input` as a dataset at `location`: a local folder, or `s3://bucket/prefix` (also
/// `s3a://`), `az://container/prefix` (`abfs(s)://`) or `gs://bucket/prefix`, with the
/// settings of `storage` and the environment. `hf://` is refused (read only), and so is any
/// other scheme, by name.
///
/// # Errors
///
/// Those of [`write_dataset`], on a store as in a folder, and:
///
/// - [`DatasetError::Input`], [`DatasetError::Tensor`]: `location` is a URL datasets are not
///   written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`]: the store cannot be reached or refuses access, or `storage`
///   holds an unknown or invalid setting.
pub fn write_dataset_to(
    input: &Input,
    location: &str,
    storage: &StorageOptions,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: &Progress,
) -> Result<Manifest> {
    let Some(store) = open_store(location, storage, true)? else {
        return write_dataset(input, Path::new(location), opts, job, progress);
    };
    let manifest = write_to_store(input, &*store, None, opts, job, progress)?;
    // Retired shards, old versions and abandoned uploads older than the retention.
    let _ = clean_store(&*store, job.retain());
    Ok(manifest)
}

/// Writes `input` as a dataset in the folder `out`.
///
/// # Errors
///
/// - [`DatasetError::Option`]: the options break a rule, or name a column the input lacks.
/// - [`DatasetError::Exists`]: `out` holds a dataset and the mode is
///   [`WriteMode::ErrorIfExists`].
/// - [`DatasetError::Conflict`]: `out` holds files named like shards but no dataset (modes
///   error and append), or other writers kept committing first.
/// - [`DatasetError::Input`]: a row or column cannot become a tensor (its type, a length, a
///   null, a value the dtype cannot hold).
/// - [`DatasetError::DuplicateKey`]: two rows of a KV write give one tensor key and
///   `duplicatesStrategy` is `fail`.
/// - [`DatasetError::Corrupt`], [`DatasetError::Parquet`], [`DatasetError::Arrow`]: an input
///   file cannot be read.
/// - [`DatasetError::Empty`]: no rows are left to write.
/// - [`DatasetError::Io`], [`DatasetError::Tensor`]: a file cannot be written, or the folder's
///   filesystem cannot lock.
pub fn write_dataset(
    input: &Input,
    out: &Path,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: &Progress,
) -> Result<Manifest> {
    Plan::new(input, opts)?;
    let made = !out.exists();
    std::fs::create_dir_all(out).map_err(|e| DatasetError::io(out, e))?;
    remove_stale_staging(out);
    let written = (|| {
        // A filesystem that cannot lock is refused before anything is written (the
        // manifest's replace and `dataset clean` take the dataset's lock).
        crate::commit::lock::probe(out)?;
        // Refused (or read, to fail early on a damaged one) before anything is written; the
        // commit looks again. Another writer's manifest is adopted by the commit, not refused.
        refuse_early(out, job.mode)?;
        write_to_store(input, &LocalStore::new(out), Some(out), opts, job, progress)
    })();
    let manifest = match written {
        Ok(m) => m,
        Err(e) => {
            // A first write refused (a bad row, say) leaves the folder as it found it.
            crate::commit::lock::remove_unused(out, made);
            return Err(e);
        }
    };
    // Retired shards, old versions and staging of dead writers older than the retention.
    let retain = job.retain();
    let _ = retention::clean_with(
        out,
        retain,
        retain.max(retention::STAGING_FLOOR),
        job.lock_timeout(),
    );
    Ok(manifest)
}

/// Removes staging folders of writers that are gone (killed before their commit): one named
/// after this machine (`_tensorsmith_staging-<pid>-<uuid>@<host>`) whose process no longer
/// runs, at once; any other only once its heartbeat has been still for `STAGING_FLOOR` (a
/// writer on another machine sharing the folder, whose process id means nothing here, renews
/// it every minute).
fn remove_stale_staging(dir: &Path) {
    let Ok(folders) = crate::commit::staging::staging_folders(dir) else {
        return;
    };
    let here = crate::commit::staging::this_host();
    for f in folders {
        let name = f.path.file_name().unwrap_or_default().to_string_lossy();
        let Some(rest) = name.strip_prefix(STAGING_PREFIX) else {
            continue;
        };
        let (rest, host) = match rest.rsplit_once('@') {
            Some((r, h)) => (r, Some(h)),
            None => (rest, None),
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let gone = match host.is_some() && host == here.as_deref() {
            true => tensorsmith::sink::writer_gone(pid),
            false => f.idle > retention::STAGING_FLOOR,
        };
        if gone {
            let _ = std::fs::remove_dir_all(&f.path);
        }
    }
}
