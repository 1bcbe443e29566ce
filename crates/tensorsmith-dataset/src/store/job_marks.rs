//! What a job keeps on its store (store_job.rs): its heartbeat and the markers of its
//! attempts under `_tensorsmith/jobs/<job id>/`, read by `dataset clean` to tell a running
//! writer's shards from a dead one's, and the sweep that removes a job's leftovers.

use crate::commit::versions::now_ms;
use crate::error::Result;
use crate::store::seam::Store;
use crate::write::shard_record::attempt_of;
use std::collections::{HashMap, HashSet};

/// Where jobs keep their heartbeats and attempt markers.
pub(crate) const JOBS_PREFIX: &str = "_tensorsmith/jobs/";

pub(crate) fn heartbeat_key(job_id: &str) -> String {
    format!("{JOBS_PREFIX}{job_id}/heartbeat")
}

/// Deletes the heartbeat of job `job_id` (first: no attempt uploads after it), then every
/// shard of its attempts not in `keep`, then the attempt markers.
pub(crate) fn sweep(store: &dyn Store, job_id: &str, keep: &HashSet<&str>) -> Result<()> {
    store.delete(&heartbeat_key(job_id))?;
    let prefix = format!("{JOBS_PREFIX}{job_id}/");
    for marker in store.list(&prefix)? {
        if let Some(attempt) = marker.key[prefix.len()..].strip_prefix("attempt-") {
            delete_attempt(store, attempt, keep)?;
        }
        store.delete(&marker.key)?;
    }
    Ok(())
}

/// Deletes the shards of attempt `<task>-<uuid>` that are not in `keep`.
fn delete_attempt(store: &dyn Store, attempt: &str, keep: &HashSet<&str>) -> Result<()> {
    let Some((task, _)) = attempt.split_once('-') else {
        return Ok(());
    };
    for e in store.list(&format!("part-{task}-"))? {
        if attempt_of(&e.key).as_deref() == Some(attempt) && !keep.contains(e.key.as_str()) {
            store.delete(&e.key)?;
        }
    }
    Ok(())
}

/// What a store holds of one job.
#[derive(Debug, Default)]
pub(crate) struct JobObjects {
    /// How long ago its heartbeat was renewed (ms), `None` when it is gone (the job ended).
    pub beat_age_ms: Option<u64>,
    /// Its attempts (`<task>-<uuid>`), from their markers.
    pub attempts: Vec<String>,
}

/// The jobs of `store` by id.
pub(crate) fn jobs(store: &dyn Store) -> Result<HashMap<String, JobObjects>> {
    let now = now_ms();
    let mut out: HashMap<String, JobObjects> = HashMap::new();
    for e in store.list(JOBS_PREFIX)? {
        let Some((job, name)) = e.key[JOBS_PREFIX.len()..].split_once('/') else {
            continue;
        };
        let slot = out.entry(job.to_string()).or_default();
        if name == "heartbeat" {
            // Undated (the store does not say): taken for fresh, never for dead.
            slot.beat_age_ms = Some(match e.modified_ms {
                0 => 0,
                at => now.saturating_sub(at),
            });
        } else if let Some(attempt) = name.strip_prefix("attempt-") {
            slot.attempts.push(attempt.to_string());
        }
    }
    Ok(out)
}
