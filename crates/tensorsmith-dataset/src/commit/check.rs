//! The checks of a commit that do not depend on where the dataset lives: task reports
//! checked against the staging folder (one per task, shard names only, every shard there
//! or already moved in), cross-task duplicate keys resolved (KV), and the shards, index
//! entries and schema they add gathered (commit_prepare.rs prepares the version from them;
//! store_commit.rs commits it).

use crate::commit::prepare::Written;
use crate::error::{DatasetError, Result};
use crate::manifest::{is_shard_file_name, TensorSchema};
use crate::options::{Naming, WriteOptions};
use crate::write::duplicates;
use crate::write::task_report::TaskReport;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

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
