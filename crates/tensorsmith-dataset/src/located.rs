//! The dataset commands by location, for the CLI and Python: a local folder goes to the
//! local functions (versions.rs, retention.rs, verify.rs, export.rs), an `s3://`, `az://` or
//! `gs://` prefix to
//! their store counterparts (store_versions.rs, store_clean.rs, store_verify.rs, the
//! reader's `open_at`), any other scheme is refused by name (store_open.rs).

use crate::commit::retention::{self, CleanReport, RetiredShard, VersionInfo};
use crate::error::{DatasetError, Result};
use crate::manifest::Manifest;
use crate::read::dataset::Dataset;
use crate::read::export::export_choosing;
use crate::read::verify::{verify_version, DatasetReport};
use crate::store::clean::{clean_store, republish};
use crate::store::open::open_store;
use crate::store::verify::verify_store;
use crate::store::versions as sv;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tensorsmith::bytes::StorageOptions;

/// The current version's manifest of the dataset at `location` (a dataset without versions:
/// its manifest), its versions and its retired shards.
///
/// # Errors
///
/// - [`DatasetError::Io`], [`DatasetError::Corrupt`]: `location` holds no dataset, or its
///   manifest or a version file is damaged.
/// - [`DatasetError::Conflict`]: another writer (such as safetensors-spark) committed a
///   manifest over the current version; adopt it first.
/// - [`DatasetError::Input`]: `location` is a URL datasets do not live on (`hf://`,
///   `http(s)://`).
/// - [`DatasetError::Tensor`]: the store cannot be reached or refuses access, or `storage`
///   holds an unknown or invalid setting.
pub fn info_at(
    location: &str,
    storage: &StorageOptions,
) -> Result<(Manifest, Vec<VersionInfo>, Vec<RetiredShard>)> {
    let Some(store) = open_store(location, storage, false)? else {
        let dir = Path::new(location);
        let m = match crate::commit::folder_versions::current_checked(dir)? {
            Some(s) => s.version.manifest,
            None => Manifest::read(dir)?,
        };
        let (v, r) = retention::versions_info(dir)?;
        return Ok((m, v, r));
    };
    let m = match sv::current_checked(&*store)? {
        Some(s) => s.version.manifest,
        None => {
            return Err(DatasetError::Corrupt {
                path: PathBuf::from(store.location()),
                msg: "no dataset here (no versions, no dataset_manifest.json)".into(),
            })
        }
    };
    let (v, r) = sv::info(&*store)?;
    Ok((m, v, r))
}

/// Whether a dataset is at `location` (a version, or a manifest of the layout's other
/// writers): what mode "error" refuses.
///
/// # Errors
///
/// - [`DatasetError::Io`]: the folder cannot be listed.
/// - [`DatasetError::Corrupt`]: a version file on a store is damaged.
/// - [`DatasetError::Input`]: `location` is a URL datasets do not live on (`hf://`,
///   `http(s)://`).
/// - [`DatasetError::Tensor`]: the store cannot be reached or refuses access, or `storage`
///   holds an unknown or invalid setting.
pub fn exists_at(location: &str, storage: &StorageOptions) -> Result<bool> {
    match open_store(location, storage, false)? {
        None => {
            let dir = Path::new(location);
            Ok(crate::commit::folder_versions::current_id(dir)?.is_some())
        }
        Some(store) => Ok(sv::current(&*store)?.is_some()),
    }
}

/// `dataset verify` at `location` (`stale_after`: staging folders of local datasets).
///
/// # Errors
///
/// Those of [`verify_version`] (when `location` is a local folder), on a store as in a folder,
/// and:
///
/// - [`DatasetError::Input`]: `location` is a URL datasets do not live on (`hf://`,
///   `http(s)://`).
/// - [`DatasetError::Tensor`]: the store cannot be reached or refuses access, or `storage`
///   holds an unknown or invalid setting.
pub fn verify_at(
    location: &str,
    storage: &StorageOptions,
    version: Option<u64>,
    stale_after: Duration,
) -> Result<DatasetReport> {
    match open_store(location, storage, false)? {
        None => verify_version(Path::new(location), version, stale_after),
        Some(store) => verify_store(&*store, version),
    }
}

/// `dataset verify --repair` at `location`: the entry files written again from the current
/// version when they do not mirror it. Returns whether they were.
///
/// # Errors
///
/// Those of [`repair`](crate::repair) (when `location` is a local folder), on a store as in a
/// folder, and:
///
/// - [`DatasetError::Input`], [`DatasetError::Tensor`]: `location` is a URL datasets are not
///   written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`]: the store cannot be reached or refuses access, or `storage`
///   holds an unknown or invalid setting.
pub fn repair_at(location: &str, storage: &StorageOptions, timeout: Duration) -> Result<bool> {
    match open_store(location, storage, true)? {
        None => retention::repair(Path::new(location), timeout),
        Some(store) => {
            if crate::store::adopt::adopt_store(&*store)?.is_some() {
                return Ok(true);
            }
            match sv::current(&*store)? {
                Some(s) if s.versioned => republish(&*store, &s),
                _ => Ok(false),
            }
        }
    }
}

/// `dataset adopt` at `location`: another writer's manifest made the next version (see
/// foreign.rs); `None` when there is nothing to adopt.
///
/// # Errors
///
/// Those of [`adopt`](crate::adopt) (when `location` is a local folder), on a store as in a
/// folder, and:
///
/// - [`DatasetError::Input`], [`DatasetError::Tensor`]: `location` is a URL datasets are not
///   written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`]: the store cannot be reached or refuses access, or `storage`
///   holds an unknown or invalid setting.
pub fn adopt_at(
    location: &str,
    storage: &StorageOptions,
    timeout: Duration,
) -> Result<Option<u64>> {
    match open_store(location, storage, true)? {
        None => crate::store::adopt::adopt(Path::new(location), timeout),
        Some(store) => crate::store::adopt::adopt_store(&*store),
    }
}

/// `dataset clean` at `location` (a store has no staging folders nor lock: `staging_idle`
/// and `timeout` are for local datasets).
///
/// # Errors
///
/// Those of [`clean_with`](crate::clean_with) (when `location` is a local folder), on a store
/// as in a folder (where a prefix that holds no dataset is [`DatasetError::Input`]), and:
///
/// - [`DatasetError::Input`], [`DatasetError::Tensor`]: `location` is a URL datasets are not
///   written on (`hf://`, `http(s)://`, an unknown scheme).
/// - [`DatasetError::Tensor`]: the store cannot be reached or refuses access, or `storage`
///   holds an unknown or invalid setting.
pub fn clean_at(
    location: &str,
    storage: &StorageOptions,
    older_than: Duration,
    staging_idle: Duration,
    timeout: Duration,
) -> Result<CleanReport> {
    match open_store(location, storage, true)? {
        None => retention::clean_with(Path::new(location), older_than, staging_idle, timeout),
        Some(store) => {
            if sv::current(&*store)?.is_none() {
                return Err(DatasetError::input(format!(
                    "{}: not a dataset (no versions, no dataset_manifest.json)",
                    store.location()
                )));
            }
            clean_store(&*store, older_than)
        }
    }
}

/// `dataset export` of the dataset at `location` to the Parquet file `out` (local, or an
/// `s3://`, `az://`, `gs://` URL with the store settings `storage`) (KV: the
/// tensors of `keys`; batch: the columns of `columns`; every one when `None`).
///
/// # Errors
///
/// Those of [`Dataset::open_at`] and of [`export_choosing`].
pub fn export_at(
    location: &str,
    storage: &StorageOptions,
    out: &Path,
    keys: Option<&[String]>,
    columns: Option<&[String]>,
    sep: &str,
) -> Result<u64> {
    export_choosing(
        &Dataset::open_at(location, storage, None)?,
        out,
        storage,
        keys,
        columns,
        sep,
    )
}
