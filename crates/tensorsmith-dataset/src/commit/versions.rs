//! A dataset's versions: `_tensorsmith/versions/0000000N.json`, immutable, each a whole
//! snapshot (the manifest, and the name of its index file in `_tensorsmith/index/`). A
//! version is committed by its exclusive creation (a hard link of a complete, fsynced file:
//! the link fails if the name exists), so two writers can never both commit version N. The
//! highest version is the current one; `dataset_manifest.json` is written from it. Version 0
//! is a dataset written before versions existed, adopted by the first versioned commit. A
//! version removed by `dataset clean` leaves a marker, `0000000N.removed`, with the time.

use crate::error::{DatasetError, Result};
use crate::manifest::{Manifest, INDEX_NAME};
use crate::tensor_index_file::{self, IndexEntry};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub use crate::commit::lock::META_DIR;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One version file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// The version's number: 1 for a new dataset's first commit, one more for each commit
    /// after (0: a dataset written before versions, adopted).
    pub version: u64,
    /// The version this one was prepared against (`None`: a new dataset).
    pub base: Option<u64>,
    /// When the writer prepared its commit (ms since the epoch): the version it replaces is
    /// retired from then on.
    pub committed_ms: u64,
    /// `error`, `overwrite`, `append`, or `adopted` (version 0).
    pub mode: String,
    /// The dataset as this version has it: its shards, totals and schema.
    pub manifest: Manifest,
    /// The version's index file in `_tensorsmith/index/`, when the write generated one.
    pub index: Option<String>,
}

pub fn meta_dir(dir: &Path) -> PathBuf {
    dir.join(META_DIR)
}

pub fn versions_dir(dir: &Path) -> PathBuf {
    meta_dir(dir).join("versions")
}

pub fn indexes_dir(dir: &Path) -> PathBuf {
    meta_dir(dir).join("index")
}

/// The error of a reader of version `n` that `dataset clean` removed.
pub(crate) fn removed_error(dir: &Path, n: u64, at_ms: u64) -> DatasetError {
    DatasetError::VersionRemoved {
        dir: dir.to_path_buf(),
        version: n,
        at: format_utc(at_ms),
    }
}

/// `2026-11-25 09:49:53 UTC`.
pub fn format_utc(ms: u64) -> String {
    let s = ms / 1000;
    let (days, rem) = (s / 86_400, s % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Version file bytes read as version `n` and checked (`path` is named in errors).
pub(crate) fn parse(text: &[u8], path: &Path, n: u64) -> Result<Version> {
    let path = path.to_path_buf();
    let v: Version = serde_json::from_slice(text).map_err(|e| DatasetError::Corrupt {
        path: path.clone(),
        msg: format!("not a version file: {e}"),
    })?;
    // The manifest's own checks (shard names, totals) through its parser.
    Manifest::parse(
        serde_json::to_string(&v.manifest)
            .expect("serializable")
            .as_bytes(),
        &path,
    )?;
    if v.version != n {
        return Err(DatasetError::Corrupt {
            path,
            msg: format!("says it is version {}", v.version),
        });
    }
    if let Some(i) = &v.index {
        if !crate::manifest::is_index_file_name(i) {
            return Err(DatasetError::Corrupt {
                path,
                msg: format!("index '{i}' is not a file name in {META_DIR}/index"),
            });
        }
    }
    Ok(v)
}

/// A version a reader or writer works from: a version file, or the manifest of a dataset
/// written before versions (version 0, its index trusted only where it agrees).
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The version read (for a dataset without versions, its manifest as version 0).
    pub version: Version,
    /// Whether `version` is a version file (false: the manifest of a dataset without versions).
    pub versioned: bool,
}

impl Snapshot {
    pub(crate) fn file(version: Version) -> Snapshot {
        Snapshot {
            version,
            versioned: true,
        }
    }

    /// The snapshot's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.version.manifest
    }

    /// The index entries of this snapshot: its index file; for a dataset without versions,
    /// `_tensor_index.parquet` when every entry names one of its shards. `None`: no index.
    pub fn index_entries(&self, dir: &Path) -> Result<Option<Vec<IndexEntry>>> {
        if self.versioned {
            return match &self.version.index {
                Some(name) => tensor_index_file::read(&indexes_dir(dir).join(name)).map(Some),
                None => Ok(None),
            };
        }
        let shards: HashSet<&str> = self
            .manifest()
            .shards
            .iter()
            .map(|s| s.shard_path.as_str())
            .collect();
        Ok(tensor_index_file::read(&dir.join(INDEX_NAME))
            .ok()
            .filter(|e| !e.is_empty() && e.iter().all(|x| shards.contains(&*x.file_name))))
    }
}

/// The bytes of a version file.
pub(crate) fn to_bytes(v: &Version) -> Vec<u8> {
    let mut text = serde_json::to_string(v).expect("serializable");
    text.push('\n');
    text.into_bytes()
}

/// A version file written and fsynced under a temporary name, to be committed by
/// [`Prepared::publish`]; removed on drop.
pub(crate) struct Prepared {
    temp: PathBuf,
    pub(crate) version: Version,
}

pub(crate) fn prepare(dir: &Path, v: Version) -> Result<Prepared> {
    let vdir = versions_dir(dir);
    std::fs::create_dir_all(&vdir).map_err(|e| DatasetError::io(&vdir, e))?;
    let temp = vdir.join(format!(
        ".{:08}.{}.tmp",
        v.version,
        uuid::Uuid::new_v4().simple()
    ));
    let text = to_bytes(&v);
    let io = |e| DatasetError::io(&temp, e);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .map_err(io)?;
    let p = Prepared { temp, version: v };
    std::io::Write::write_all(&mut &f, &text).map_err(|e| DatasetError::io(&p.temp, e))?;
    f.sync_all().map_err(|e| DatasetError::io(&p.temp, e))?;
    Ok(p)
}

impl Drop for Prepared {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.temp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_shown_in_utc() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_utc(1_795_600_193_000), "2026-11-25 09:49:53 UTC");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
    }
}
