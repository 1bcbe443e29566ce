//! The one commit of a write (threads of `write_dataset`, tasks of a job: the CLI, Python, the
//! Spark source and direct path): task reports checked against the staging folder, cross-task
//! duplicate keys resolved (KV), then, optimistically, the next version prepared against the
//! current one outside the lock (commit_prepare.rs) and published under the dataset's commit
//! lock if that version is still current (publish.rs); else prepared again. A writer that
//! keeps losing prepares under the lock, so every writer finishes. The caller cleans after
//! it (retention.rs).

use crate::commit_base::BaseAt;
use crate::commit_lock;
use crate::commit_prepare::{prepare, Written};
use crate::duplicates;
use crate::error::{DatasetError, Result};
use crate::job_options::{JobOptions, Progress};
use crate::manifest::{is_shard_file_name, Manifest, TensorSchema};
use crate::options::{Naming, WriteOptions};
use crate::publish::publish;
use crate::task_report::TaskReport;
use crate::versions::{current_id, Snapshot};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Conflicts after which a writer prepares under the lock rather than racing again.
const OPTIMISTIC_TRIES: u32 = 3;

/// Reports in task order, each naming only shards that are in `staging` (or, `uploaded`,
/// already uploaded from it to an object store).
fn check_reports(
    reports: &mut [TaskReport],
    staging: &Path,
    uploaded: &HashSet<String>,
) -> Result<()> {
    reports.sort_by_key(|r| r.task);
    if let Some(w) = reports.windows(2).find(|w| w[0].task == w[1].task) {
        return Err(DatasetError::input(format!(
            "task {} is reported twice: one report per task",
            w[0].task
        )));
    }
    if reports.iter().any(|r| !r.shards.is_empty()) && !staging.is_dir() {
        return Err(DatasetError::input(format!(
            "{}: the staging folder of this write does not exist (the job was aborted or already committed, or its tasks wrote into another folder)",
            staging.display()
        )));
    }
    for r in reports.iter() {
        let names: HashSet<&str> = r.shards.iter().map(|s| s.shard_path.as_str()).collect();
        for s in &r.shards {
            if !(s.shard_path.starts_with("part-") && is_shard_file_name(&s.shard_path)) {
                return Err(DatasetError::input(format!(
                    "task {}: '{}' is not a shard file name (part-*.safetensors)",
                    r.task, s.shard_path
                )));
            }
            let p = staging.join(&s.shard_path);
            if !uploaded.contains(&s.shard_path) && !p.is_file() {
                return Err(DatasetError::input(format!(
                    "task {}: shard {} is missing from the staging folder",
                    r.task,
                    p.display()
                )));
            }
        }
        if let Some(e) = r.index.iter().find(|e| !names.contains(&*e.file_name)) {
            return Err(DatasetError::input(format!(
                "task {}: tensor '{}' is in {}, which the task does not report",
                r.task, e.tensor_key, e.file_name
            )));
        }
    }
    Ok(())
}

/// Commits the shards that `reports` name in `staging` as the next version of the dataset
/// in `out`. The caller removes `staging` afterwards (committed shards have left it).
pub(crate) fn commit(
    out: &Path,
    staging: &Path,
    reports: Vec<TaskReport>,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: Option<&Progress>,
) -> Result<Manifest> {
    let written = checked(reports, staging, &HashSet::new(), opts)?;
    commit_lock::probe(out)?;
    let prepare_on = |base: Option<&Snapshot>| {
        prepare(
            out,
            staging,
            &written,
            (base, BaseAt::Dir(out)),
            opts,
            job.mode(),
        )
    };
    let mut conflicts = 0u32;
    let manifest = loop {
        // What the manifest file was when it was found to be no other writer's: under the
        // lock, only a manifest changed since then is read again (reading a large one there
        // would hold the lock for as long).
        let checked = manifest_stamp(out);
        let base = Snapshot::current(out)?;
        // Another writer's commit (a manifest listing shards no version lists) becomes a
        // version first, so that this one keeps its shards.
        if let Some(b) = &base {
            if crate::foreign::detect(out, b)?.is_some() {
                crate::foreign::adopt(out, job.lock_timeout())?;
                continue;
            }
        }
        let mut prepared = prepare_on(base.as_ref())?;
        let mut manifest = prepared.version.version.manifest.clone();
        let lock = commit_lock::acquire(out, job.lock_timeout())?;
        let held = Instant::now();
        // A clean may have taken the index file of a commit that waited long for the lock.
        let index_gone = prepared.index.as_ref().is_some_and(|i| !i.path.exists());
        let stale = current_id(out)? != prepared.base_id || index_gone;
        if stale || (manifest_stamp(out) != checked && foreign_change(out)?) {
            conflicts += 1;
            if let Some(p) = progress {
                p.commit_retries.fetch_add(1, Ordering::Relaxed);
            }
            if conflicts < OPTIMISTIC_TRIES {
                drop(lock);
                continue;
            }
            drop(prepared);
            let base = Snapshot::current(out)?;
            prepared = prepare_on(base.as_ref())?;
            manifest = prepared.version.version.manifest.clone();
        }
        // A previous commit killed after its commit point left the entry files behind its
        // version; this commit writes them anew anyway.
        publish(out, staging, &written.shards, &mut prepared)?;
        if let Some(p) = progress {
            p.lock_held_us
                .store(held.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        drop(lock);
        drop(prepared);
        break manifest;
    };
    Ok(manifest)
}

/// The manifest file's length and modification time (`None`: no manifest).
fn manifest_stamp(out: &Path) -> Option<(u64, std::time::SystemTime)> {
    let m = std::fs::metadata(out.join(crate::manifest::MANIFEST_NAME)).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// Whether another writer committed a manifest over the current version.
fn foreign_change(out: &Path) -> Result<bool> {
    Ok(match Snapshot::current(out)? {
        Some(s) => crate::foreign::detect(out, &s)?.is_some(),
        None => false,
    })
}

/// What a write's reports add, checked against `staging` (every shard there, none empty),
/// duplicate keys between tasks resolved (KV): the part of a commit that does not depend on
/// where the dataset lives.
pub(crate) fn checked(
    mut reports: Vec<TaskReport>,
    staging: &Path,
    uploaded: &HashSet<String>,
    opts: &WriteOptions,
) -> Result<Written> {
    if reports.iter().all(|r| r.shards.is_empty()) {
        return Err(DatasetError::Empty(match reports.iter().map(|r| r.rows).sum::<u64>() {
            0 => "the input has no rows: no dataset written".into(),
            n => format!("all {n} rows were dropped (tail_strategy=drop, fewer rows than batch_size): no dataset written"),
        }));
    }
    check_reports(&mut reports, staging, uploaded)?;
    if let Naming::Kv { .. } = opts.naming {
        duplicates::across_tasks(&mut reports, staging, opts.duplicates)?;
    }
    gather(reports, opts)
}

/// The shards, index entries and schema of a write's reports (task order).
fn gather(reports: Vec<TaskReport>, opts: &WriteOptions) -> Result<Written> {
    let mut shards = Vec::new();
    let mut entries = Vec::new();
    let mut samples: BTreeMap<String, TensorSchema> = BTreeMap::new();
    for r in reports {
        shards.extend(r.shards);
        entries.extend(r.index);
        for (k, v) in r.samples {
            if let Some(prev) = samples.get(&k) {
                if *prev != v {
                    return Err(DatasetError::column(
                        &k,
                        format!(
                            "samples of {} {:?} in one part of the input and {} {:?} in another",
                            v.dtype, v.shape, prev.dtype, prev.shape
                        ),
                    ));
                }
            }
            samples.insert(k, v);
        }
    }
    if let Naming::Kv { .. } = opts.naming {
        // A KV key's schema is its tensor's: read from its index entry (the reports carry
        // none, so that a write holds each key's dtype and shape once).
        for e in &entries {
            let t = TensorSchema {
                dtype: e.dtype.to_string(),
                shape: e.shape.clone(),
            };
            samples.insert(e.tensor_key.clone(), t);
        }
    }
    let schema = samples
        .into_iter()
        .map(|(k, mut t)| {
            if let Naming::Batch(bs) = opts.naming {
                t.shape.insert(0, bs);
            }
            (k, t)
        })
        .collect();
    Ok(Written {
        shards,
        entries,
        schema,
    })
}
