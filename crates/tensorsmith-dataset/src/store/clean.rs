//! `dataset clean` and the repair of the entry files on a store (an S3 prefix), as
//! retention.rs does on disk: versions superseded for longer than the retention removed
//! (a `.removed` marker first, so their readers get a clear error), the shards and index
//! files only they listed deleted with them; shards and index files no version lists
//! (abandoned by writers killed before their commit point) and multipart uploads never
//! completed, once older than the retention and never younger than [`ABANDONED_FLOOR`]: a
//! store has no staging folder or lock, so a writer of ours is told live by its job's
//! heartbeat (store_job.rs: every write and job runs as one), and anything else by age. `dataset_manifest.json` and the index are written again when they do
//! not mirror the current version.

use crate::commit::clean_report::{CleanReport, Kept};
use crate::commit::versions::{now_ms, Snapshot};
use crate::error::{DatasetError, Result};
use crate::manifest::{is_index_file_name, is_shard_file_name, INDEX_NAME, MANIFEST_NAME};
use crate::store::commit::mirror_entry_files;
use crate::store::job_marks::{jobs, sweep};
use crate::store::seam::Store;
use crate::store::versions::{self as sv, index_key, removed_key, version_key, INDEX_PREFIX};
use crate::write::shard_record::attempt_of;
use crate::write::shard_record::is_writer_shard_name;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Objects no version lists, and uploads never completed, are kept at least this long: a
/// writer may still be uploading the rest of its shards before its commit.
pub const ABANDONED_FLOOR: Duration = Duration::from_secs(3600);

/// Removes from `store` what has been retired or abandoned for longer than `older_than`.
pub(crate) fn clean_store(store: &dyn Store, older_than: Duration) -> Result<CleanReport> {
    clean(store, older_than, true)
}

/// [`clean_store`] of a local folder: a shard no version lists goes only as part of a job
/// whose heartbeat stopped (every local write runs as one), never by its name and age
/// alone, for the folder may hold a user's copies of another dataset's shards.
pub(crate) fn clean_folder_store(store: &dyn Store, older_than: Duration) -> Result<CleanReport> {
    clean(store, older_than, false)
}

/// `strays_by_age`: whether a shard named as a writer names them that no version or job
/// accounts for is taken once older than the floor (on a store, where writers before jobs
/// left such shards).
fn clean(store: &dyn Store, older_than: Duration, strays_by_age: bool) -> Result<CleanReport> {
    let mut report = CleanReport::default();
    let now = now_ms();
    let limit = older_than.as_millis() as u64;
    let floor = older_than.max(ABANDONED_FLOOR).as_millis() as u64;
    // Past the floor; an object the store does not date (0) is never taken for abandoned.
    let abandoned = |at_ms: u64| at_ms > 0 && now.saturating_sub(at_ms) >= floor;
    // What is left for now, and when the same clean takes it.
    let mut kept = Vec::new();
    let mut later = |what: String, at_ms: u64| {
        if at_ms > 0 {
            kept.push(Kept {
                what,
                from_ms: at_ms + floor,
            });
        }
    };
    let list = sv::list(store)?;
    let mut remove = Vec::new();
    for w in list.windows(2) {
        if now.saturating_sub(w[1].created_ms) >= limit {
            remove.push(w[0].n);
        } else {
            report.kept.push(Kept {
                what: format!("version {} (and the shards only it lists)", w[0].n),
                from_ms: w[1].created_ms + limit,
            });
        }
    }
    let current = sv::current_checked(store)?;
    let mut keep: HashSet<String> = HashSet::new();
    let mut keep_index: HashSet<String> = HashSet::new();
    let mut removed_lists: HashSet<String> = HashSet::new();
    match &current {
        None => return Ok(report),
        Some(s) if !s.versioned => {
            keep.extend(s.manifest().shards.iter().map(|s| s.shard_path.clone()))
        }
        Some(_) => {
            for l in &list {
                // A version that cannot be read stops the clean: its shards are not judged.
                let v = match sv::read(store, l.n) {
                    Err(DatasetError::VersionRemoved { .. }) => continue,
                    r => r?,
                };
                let names = v.manifest.shards.into_iter().map(|s| s.shard_path);
                if remove.contains(&l.n) {
                    removed_lists.extend(names);
                    removed_lists.extend(v.index);
                } else {
                    keep.extend(names);
                    keep_index.extend(v.index);
                }
            }
        }
    }
    for &n in &remove {
        let marker = format!("{{\"removed_ms\": {}}}\n", now_ms());
        store.put(&removed_key(n), marker.as_bytes())?;
        store.delete(&version_key(n))?;
        report.versions.push(n);
    }
    let live = settle_jobs(store, &keep, floor)?;
    // What the layout's manifest lists (another writer may have committed it) is never
    // taken for abandoned.
    let listed: HashSet<String> = match store.get(MANIFEST_NAME)? {
        Some(b) => crate::manifest::Manifest::parse(&b, std::path::Path::new(MANIFEST_NAME))
            .map(|m| m.shards.into_iter().map(|s| s.shard_path).collect())
            .unwrap_or_default(),
        None => HashSet::new(),
    };
    for e in store.list("part-")? {
        let name = e.key.as_str();
        if name.contains('/') || !is_shard_file_name(name) || keep.contains(name) {
            continue;
        }
        if let Some(&beat_ms) = attempt_of(name).and_then(|a| live.get(&a)) {
            // A running write's or job's: its commit or abort decides; a clean takes it only
            // once its heartbeat has stopped for the floor.
            later(
                format!("shard {name} (no version lists it yet; its writer's heartbeat is fresh)"),
                beat_ms,
            );
            continue;
        }
        let writers = strays_by_age && is_writer_shard_name(name) && !listed.contains(name);
        if removed_lists.contains(name) || (writers && abandoned(e.modified_ms)) {
            store.delete(name)?;
            report.shards.push((e.key.clone(), e.size));
        } else if writers {
            later(
                format!("shard {name} (no version lists it yet)"),
                e.modified_ms,
            );
        }
    }
    report.shards.sort();
    for e in store.list(INDEX_PREFIX)? {
        let Some(name) = e.key.strip_prefix(INDEX_PREFIX) else {
            continue;
        };
        if !is_index_file_name(name) || keep_index.contains(name) {
            continue;
        }
        if removed_lists.contains(name) || abandoned(e.modified_ms) {
            store.delete(&index_key(name))?;
            report.index_files.push(name.to_string());
        } else {
            later(
                format!("index file {name} (no version lists it yet)"),
                e.modified_ms,
            );
        }
    }
    for u in store.uploads("")? {
        if abandoned(u.started_ms) {
            store.abort(&u)?;
            report
                .uploads
                .push(format!("{} (upload {})", store.show(&u.key), u.id));
        } else {
            later(
                format!("unfinished upload of {}", store.show(&u.key)),
                u.started_ms,
            );
        }
    }
    report.kept.append(&mut kept);
    if let Some(s) = current.filter(|s| s.versioned) {
        report.repaired = republish(store, &s)?;
    }
    Ok(report)
}

/// Distributed jobs (store_job.rs): a job whose heartbeat is gone (it ended) or older than
/// `floor_ms` (its driver died) has every shard of its attempts that `keep` does not list
/// deleted, then its heartbeat and markers. Returns the attempts of the jobs still running,
/// each with when its job's heartbeat was last renewed (ms since the epoch).
fn settle_jobs(
    store: &dyn Store,
    keep: &HashSet<String>,
    floor_ms: u64,
) -> Result<HashMap<String, u64>> {
    let now = now_ms();
    let mut live = HashMap::new();
    let mut fresh: Option<HashSet<String>> = None;
    for (job, found) in jobs(store)? {
        if let Some(age) = found.beat_age_ms.filter(|&a| a < floor_ms) {
            live.extend(found.attempts.into_iter().map(|a| (a, now - age)));
        } else {
            // The versions listed again after the job was seen ended: a job ends (its
            // heartbeat deleted) only after its commit, so its version is in this listing,
            // whereas `keep` was read before and may miss it.
            let fresh = match &mut fresh {
                Some(f) => f,
                None => fresh.insert(listed_now(store, keep)?),
            };
            sweep(store, &job, &fresh.iter().map(String::as_str).collect())?;
        }
    }
    Ok(live)
}

/// `keep` and every shard a version in `store` lists now.
fn listed_now(store: &dyn Store, keep: &HashSet<String>) -> Result<HashSet<String>> {
    let mut out = keep.clone();
    for l in sv::list(store)? {
        match sv::read(store, l.n) {
            Ok(v) => out.extend(v.manifest.shards.into_iter().map(|s| s.shard_path)),
            Err(DatasetError::VersionRemoved { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Whether `dataset_manifest.json` and `_tensor_index.parquet` mirror `snap` (the index told
/// by its size), with the version's index when it has one (read for the comparison).
pub(crate) fn mirrored(store: &dyn Store, snap: &Snapshot) -> Result<(bool, Option<Vec<u8>>)> {
    let manifest_ok = store
        .get(MANIFEST_NAME)?
        .is_some_and(|b| b == snap.manifest().to_json().as_bytes());
    let top_index = store
        .list(INDEX_NAME)?
        .into_iter()
        .find(|e| e.key == INDEX_NAME);
    let index = match &snap.version.index {
        Some(name) => store.get(&index_key(name))?,
        None => None,
    };
    let index_ok = match (&index, &top_index) {
        (Some(b), Some(e)) => b.len() as u64 == e.size,
        (None, None) => true,
        _ => false,
    };
    Ok((manifest_ok && index_ok, index))
}

/// `dataset_manifest.json` and `_tensor_index.parquet` written again from `snap` when they do
/// not mirror it (a commit killed after its commit point). Returns whether it wrote them.
pub(crate) fn republish(store: &dyn Store, snap: &Snapshot) -> Result<bool> {
    let (ok, index) = mirrored(store, snap)?;
    if ok {
        return Ok(false);
    }
    mirror_entry_files(store, &snap.version, index.as_deref())?;
    Ok(true)
}
