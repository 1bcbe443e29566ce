//! The one commit of a write, into any store (an S3, Azure or GCS prefix, or a local folder:
//! store_local.rs), on conditional writes, without rename or lock.
//!
//! 1. Each shard is uploaded straight to its final, unique name
//!    (`part-{task:05}-{n:04}-{uuid}.safetensors`): listed by no version, so no reader sees it.
//! 2. The next version is prepared against the current one (commit_prepare.rs, in a local
//!    folder of the staging), its index file uploaded to `_tensorsmith/index/`.
//! 3. The commit point: `_tensorsmith/versions/0000000N.json` created only if absent
//!    (`If-None-Match: *`). When another writer created N first, the version is prepared
//!    again against theirs (append merges with it).
//! 4. `dataset_manifest.json` and `_tensor_index.parquet` written from the version for the
//!    layout's other readers (skipped when a newer version is already there: its writer
//!    writes them). Readers of tensorsmith trust only the versions.
//!
//! A failure before the commit point deletes the shards it uploaded; a writer killed there
//! leaves shards no version lists, which `dataset clean` removes once older than the
//! retention.

use crate::commit::base::BaseAt;
use crate::commit::check::checked;
use crate::commit::prepare::prepare;
use crate::commit::versions::to_bytes;
use crate::error::{DatasetError, Result};
use crate::manifest::{Manifest, ShardInfo, INDEX_NAME, MANIFEST_NAME};
use crate::options::WriteOptions;
use crate::store::seam::{at_once, Expect, Store};
use crate::store::versions::{self as sv, index_key, version_key};
use crate::write::job_options::{JobOptions, Progress, WriteMode};
use crate::write::task_report::TaskReport;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// Versions other writers may commit under this one before it gives up.
const MAX_CONFLICTS: u32 = 32;

/// Commits the shards `reports` name in `staging` (those in `uploaded` are in the store
/// already) as the next version of the dataset in `store`. The caller removes `staging`
/// afterwards.
pub(crate) fn commit_to_store(
    store: &dyn Store,
    staging: &Path,
    reports: Vec<TaskReport>,
    uploaded: &HashSet<String>,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: Option<&Progress>,
) -> Result<Manifest> {
    let checked = checked(reports, staging, uploaded, opts);
    let written = match checked {
        Ok(w) => w,
        Err(e) => {
            for n in uploaded {
                let _ = store.delete(n);
            }
            return Err(e);
        }
    };
    let rest: Vec<ShardInfo> = written
        .shards
        .iter()
        .filter(|s| !uploaded.contains(&s.shard_path))
        .cloned()
        .collect();
    if let Err(e) = upload_shards(store, staging, &rest) {
        for s in &written.shards {
            let _ = store.delete(&s.shard_path);
        }
        return Err(e);
    }
    let committed = commit_uploaded(store, staging, &written, opts, job, progress);
    if committed.is_err() {
        for s in &written.shards {
            let _ = store.delete(&s.shard_path);
        }
    }
    committed
}

/// Moves each shard in to its final name, `store.concurrency()` at a time (uploaded and
/// removed from staging; renamed on a local disk).
pub(crate) fn upload_shards(store: &dyn Store, staging: &Path, shards: &[ShardInfo]) -> Result<()> {
    let first_err: Mutex<Option<DatasetError>> = Mutex::new(None);
    at_once(store.concurrency(), shards.len(), |i| {
        let name = &shards[i].shard_path;
        match store.adopt(name, &staging.join(name)) {
            Ok(()) => true,
            Err(e) => {
                first_err
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(e);
                false
            }
        }
    });
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn commit_uploaded(
    store: &dyn Store,
    staging: &Path,
    written: &crate::commit::prepare::Written,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: Option<&Progress>,
) -> Result<Manifest> {
    // commit_prepare writes the index and version files into this folder (not the store).
    let mirror = staging.join("_prepared");
    let mut conflicts = 0u32;
    loop {
        // Another writer's commit since the caller adopted is refused, not written over.
        let base = sv::current_checked(store)?;
        if base.is_some() && job.mode() == WriteMode::ErrorIfExists {
            return Err(DatasetError::Exists(PathBuf::from(store.location())));
        }
        std::fs::create_dir_all(&mirror).map_err(|e| DatasetError::io(&mirror, e))?;
        let prepared = prepare(
            &mirror,
            staging,
            written,
            (base.as_ref(), BaseAt(store)),
            opts,
            job.mode(),
        )?;
        let version = &prepared.version.version;
        // A lastWin append's copies of base shards without the keys it replaces.
        let copies = Uploaded::new(store, &prepared.copies.files);
        upload_shards(store, staging, &prepared.copies.files)?;
        if let Some(i) = &prepared.index {
            store.put_file(&index_key(&i.name), &i.path)?;
        }
        if let Some(a) = &prepared.adopt {
            // Another writer adopting it at the same time writes the same version 0.
            store.create(&version_key(0), &to_bytes(&a.version))?;
        }
        all_there(store, written.shards.iter().chain(&prepared.copies.files))?;
        test_pause(10);
        if store.create(&version_key(version.version), &to_bytes(version))? {
            copies.keep();
            test_pause(13);
            let index = match &prepared.index {
                Some(i) => Some(std::fs::read(&i.path).map_err(|e| DatasetError::io(&i.path, e))?),
                None => None,
            };
            mirror_entry_files(store, version, index.as_deref())?;
            let manifest = version.manifest.clone();
            drop(prepared);
            let _ = std::fs::remove_dir_all(&mirror);
            return Ok(manifest);
        }
        // Another writer committed this version number first.
        if let Some(i) = &prepared.index {
            let _ = store.delete(&index_key(&i.name));
        }
        drop(prepared);
        let _ = std::fs::remove_dir_all(&mirror);
        conflicts += 1;
        if let Some(p) = progress {
            p.commit_retries.fetch_add(1, Ordering::Relaxed);
        }
        if conflicts >= MAX_CONFLICTS {
            return Err(DatasetError::Conflict {
                dir: PathBuf::from(store.location()),
                msg: format!(
                    "other writers committed {conflicts} versions while this write prepared its own; nothing of this write was committed (its shards were removed)"
                ),
            });
        }
        // Writers that collided spread out before preparing again.
        let jitter = uuid::Uuid::new_v4().as_u128() % 50;
        std::thread::sleep(std::time::Duration::from_millis(
            10 * u64::from(conflicts.min(10)) + jitter as u64,
        ));
    }
}

/// Every shard of this write still in the store, as uploaded, just before the commit point.
/// A store tells a live writer's shards from a dead one's by age alone (store_clean.rs), so a
/// `dataset clean` whose retention is shorter than this write has run may have taken shards
/// it uploaded early: the version must not be committed without them.
fn all_there<'a>(store: &dyn Store, shards: impl Iterator<Item = &'a ShardInfo>) -> Result<()> {
    let there: std::collections::HashMap<String, u64> = store
        .list("part-")?
        .into_iter()
        .map(|e| (e.key, e.size))
        .collect();
    let gone: Vec<&str> = shards
        .filter(|s| there.get(&s.shard_path) != Some(&s.bytes))
        .map(|s| s.shard_path.as_str())
        .collect();
    match gone.first() {
        None => Ok(()),
        Some(first) => Err(DatasetError::Conflict {
            dir: PathBuf::from(store.location()),
            msg: format!(
                "{} of this write's shards ({first}{}) left the store before its commit (a `dataset clean` with a retention shorter than this write took them for abandoned): nothing was committed",
                gone.len(),
                if gone.len() > 1 { ", …" } else { "" }
            ),
        }),
    }
}

/// Objects uploaded for one attempt at a commit, deleted from the store when dropped before
/// the commit point kept them.
struct Uploaded<'a> {
    store: &'a dyn Store,
    keys: Vec<String>,
}

impl<'a> Uploaded<'a> {
    fn new(store: &'a dyn Store, shards: &[ShardInfo]) -> Uploaded<'a> {
        let keys = shards.iter().map(|s| s.shard_path.clone()).collect();
        Uploaded { store, keys }
    }

    fn keep(mut self) {
        self.keys.clear();
    }
}

impl Drop for Uploaded<'_> {
    fn drop(&mut self) {
        for k in &self.keys {
            let _ = self.store.delete(k);
        }
    }
}

/// `dataset_manifest.json` and `_tensor_index.parquet` written from version `v`; left to
/// the next writer when a newer version is already there. The manifest is replaced only if
/// it is still the one read before the versions were listed (`If-Match` its ETag, or
/// `If-None-Match: *` when there was none): a writer of an older version that looked before
/// a newer one was committed can never put its manifest over the newer one's. When it
/// changed, the versions are looked at again. The index follows the manifest (removed when
/// the version has none): until it does, the index beside the new manifest is the previous
/// version's, which readers tell by its file names (tensorsmith's reader uses an index only
/// when it agrees with the manifest).
pub(crate) fn mirror_entry_files(
    store: &dyn Store,
    v: &crate::commit::versions::Version,
    index: Option<&[u8]>,
) -> Result<()> {
    let manifest = v.manifest.to_json();
    for _ in 0..MAX_CONFLICTS {
        let seen = store.get_tagged(MANIFEST_NAME)?;
        let newer = sv::list(store)?.last().is_some_and(|l| l.n > v.version);
        if newer {
            return Ok(());
        }
        let replaced = match &seen {
            None => store.replace(MANIFEST_NAME, manifest.as_bytes(), Expect::Absent)?,
            Some((_, Some(tag))) => {
                store.replace(MANIFEST_NAME, manifest.as_bytes(), Expect::Tag(tag))?
            }
            Some((_, None)) => {
                store.put(MANIFEST_NAME, manifest.as_bytes())?;
                true
            }
        };
        if replaced {
            match index {
                Some(bytes) => store.put(INDEX_NAME, bytes)?,
                None => store.delete(INDEX_NAME)?,
            }
            return Ok(());
        }
    }
    // Replaced by other writers every time: theirs stand (readers trust the versions;
    // `dataset verify --repair` and `clean` mirror the current one).
    Ok(())
}

/// For the kill tests: with `TENSORSMITH_TEST_COMMIT_PAUSE=N`, the commit (store_commit.rs)
/// says so on stderr and stops for a minute at its step `N`: 10 (shards moved in or
/// uploaded, before the commit point) or 13 (just after it).
pub(crate) fn test_pause(step: u32) {
    static AT: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| {
        std::env::var("TENSORSMITH_TEST_COMMIT_PAUSE")
            .ok()
            .and_then(|s| s.parse().ok())
    });
    if *at == Some(step) {
        eprintln!("TENSORSMITH_TEST_PAUSED at commit step {step}");
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}
