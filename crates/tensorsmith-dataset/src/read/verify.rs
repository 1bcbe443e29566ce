//! `dataset verify` of a local folder: the store's verify (store_verify.rs) on the folder
//! (store_local.rs), plus what only a folder has: the staging folders of dead writers, and
//! the shards a commit of the older lock protocol was moving in when it was killed
//! (`_tensorsmith/pending`).

use crate::commit::staging::{stale_folders, DEFAULT_STALE_AFTER};
use crate::error::Result;
use crate::store::local::LocalStore;
use crate::store::verify::{stray_note, verify_store_with};
use std::path::Path;
use std::time::Duration;

pub use crate::read::verify_checks::DatasetReport;

/// [`verify_with`] reporting staging folders idle for more than 24 hours.
///
/// # Errors
///
/// Only when the dataset cannot be checked at all; what is wrong with its shards or index is
/// reported in [`DatasetReport::problems`] instead.
///
/// - [`DatasetError::Corrupt`](crate::DatasetError::Corrupt): `dir` holds no dataset, has no
///   such version, or a version file is damaged.
/// - [`DatasetError::VersionRemoved`](crate::DatasetError::VersionRemoved): `dataset clean`
///   removed the version asked for.
/// - [`DatasetError::Io`](crate::DatasetError::Io): the folder cannot be listed or read.
pub fn verify(dir: &Path) -> Result<DatasetReport> {
    verify_with(dir, DEFAULT_STALE_AFTER)
}

/// Checks `dir` against its manifest, and reports the staging folders of dead writers (a
/// heartbeat older than `stale_after`; `tensorsmith dataset clean` removes them).
///
/// # Errors
///
/// Only when the dataset cannot be checked at all; what is wrong with its shards or index is
/// reported in [`DatasetReport::problems`] instead.
///
/// - [`DatasetError::Corrupt`](crate::DatasetError::Corrupt): `dir` holds no dataset, has no
///   such version, or a version file is damaged.
/// - [`DatasetError::VersionRemoved`](crate::DatasetError::VersionRemoved): `dataset clean`
///   removed the version asked for.
/// - [`DatasetError::Io`](crate::DatasetError::Io): the folder cannot be listed or read.
pub fn verify_with(dir: &Path, stale_after: Duration) -> Result<DatasetReport> {
    verify_version(dir, None, stale_after)
}

/// Checks version `version` of `dir` (`None`: the current one) against its shards.
///
/// # Errors
///
/// Only when the dataset cannot be checked at all; what is wrong with its shards or index is
/// reported in [`DatasetReport::problems`] instead.
///
/// - [`DatasetError::Corrupt`](crate::DatasetError::Corrupt): `dir` holds no dataset, has no
///   such version, or a version file is damaged.
/// - [`DatasetError::VersionRemoved`](crate::DatasetError::VersionRemoved): `dataset clean`
///   removed the version asked for.
/// - [`DatasetError::Io`](crate::DatasetError::Io): the folder cannot be listed or read.
pub fn verify_version(
    dir: &Path,
    version: Option<u64>,
    stale_after: Duration,
) -> Result<DatasetReport> {
    let pending = crate::commit::pending::pending_names(dir)?;
    // A folder's clean takes a shard no version lists only with its job, never by age.
    let note = |n: &str, marked: bool| {
        match pending.contains(n) {
        true => format!("{n}: a shard of a commit killed before its commit point (no version lists it; the next commit or `tensorsmith dataset clean` removes it)"),
        false => stray_note(n, marked, false),
    }
    };
    let mut r = verify_store_with(&LocalStore::new(dir), version, &note)?;
    for f in stale_folders(dir, stale_after)? {
        let idle = human_duration(f.idle);
        r.problems.push(format!(
            "{}: the staging folder of a writer that stopped {idle} ago without committing or aborting (`tensorsmith dataset clean` removes it once idle for {}; `dataset clean --older-than {}` now, which also removes versions superseded that long ago)",
            f.path.file_name().unwrap_or_default().to_string_lossy(),
            human_duration(DEFAULT_STALE_AFTER),
            short_duration(f.idle),
        ));
    }
    Ok(r)
}

/// `90m`, `3h`, `45s`: a duration `parse_duration` reads, no longer than `d`.
fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=7199 => format!("{}m", s / 60),
        _ => format!("{}h", s / 3600),
    }
}

/// `3d 4h`, `5h 12m`, `7m 3s`, `12s`: an idle time for people.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (days, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (days, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => format!("{m}m {sec}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{days}d {h}h"),
    }
}
