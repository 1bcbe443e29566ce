//! The commit of a write (threads of `write_dataset` or tasks of a job): task reports checked
//! against the staging folder, cross-task duplicate keys resolved (KV), shards renamed into
//! the dataset folder, the manifest written last, atomically: the commit point (the index is
//! renamed into place just after it). After it, shard files the new manifest does not name
//! are removed.

use crate::duplicates;
use crate::error::{DatasetError, Result};
use crate::job_options::WriteMode;
use crate::manifest::{is_shard_file_name, Manifest, TensorSchema, INDEX_NAME, MANIFEST_NAME};
use crate::options::{Naming, WriteOptions};
use crate::task_report::TaskReport;
use crate::tensor_index_file;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use tensorsmith::sink::AtomicFile;

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| DatasetError::io(dir, e))
}

/// Reports in task order, each naming only shards that are in `staging`.
fn check_reports(reports: &mut [TaskReport], staging: &Path) -> Result<()> {
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
            if !p.is_file() {
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

/// Commits the shards that `reports` name in `staging` as the dataset in `out`. The caller
/// removes `staging` afterwards.
pub(crate) fn commit(
    out: &Path,
    staging: &Path,
    mut reports: Vec<TaskReport>,
    opts: &WriteOptions,
    mode: WriteMode,
) -> Result<Manifest> {
    if reports.iter().all(|r| r.shards.is_empty()) {
        return Err(DatasetError::Empty(match reports.iter().map(|r| r.rows).sum::<u64>() {
            0 => "the input has no rows: no dataset written".into(),
            n => format!("all {n} rows were dropped (tail_strategy=drop, fewer rows than batch_size): no dataset written"),
        }));
    }
    let old = if out.join(MANIFEST_NAME).exists() {
        match mode {
            WriteMode::ErrorIfExists => return Err(DatasetError::Exists(out.to_path_buf())),
            WriteMode::Overwrite | WriteMode::Append => Some(Manifest::read(out)?),
        }
    } else {
        None
    };
    check_reports(&mut reports, staging)?;
    if let Naming::Kv { .. } = opts.naming {
        duplicates::across_tasks(&mut reports, staging, opts.duplicates)?;
    }
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
    let mut schema: BTreeMap<String, TensorSchema> = samples
        .into_iter()
        .map(|(k, mut t)| {
            if let Naming::Batch(bs) = opts.naming {
                t.shape.insert(0, bs);
            }
            (k, t)
        })
        .collect();
    let mut all = shards.clone();
    if let (Some(old), WriteMode::Append) = (&old, mode) {
        for (k, v) in &old.schema {
            match (schema.get(k), &opts.naming) {
                (Some(n), Naming::Batch(_)) if n != v => {
                    return Err(DatasetError::column(k, format!(
                        "is {} {:?} in the existing dataset, {} {:?} here: append needs the same dtype and shape",
                        v.dtype, v.shape, n.dtype, n.shape
                    )))
                }
                (Some(_), Naming::Kv { .. }) => {
                    return Err(DatasetError::input(format!(
                        "tensor key '{k}' is already in the existing dataset: append cannot replace it"
                    )))
                }
                _ => {}
            }
            schema.entry(k.clone()).or_insert_with(|| v.clone());
        }
        all.extend(old.shards.iter().cloned());
        if opts.generate_index {
            entries.extend(tensor_index_file::entries_from_headers(out, &old.shards)?);
        }
    }
    // Shards (fsynced by their tasks) into place (new names: nothing is overwritten), the
    // new index written and fsynced under a temporary name, the old index removed, then the
    // manifest: the commit point; the new index is renamed into place after it. The index
    // and the manifest cannot change together, so a kill between the steps leaves the old
    // or the new dataset without an index (which readers do without), never a manifest
    // beside an index of another dataset.
    for s in &shards {
        let from = staging.join(&s.shard_path);
        let to = out.join(&s.shard_path);
        std::fs::rename(&from, &to).map_err(|e| DatasetError::io(&to, e))?;
    }
    sync_dir(out)?;
    let manifest = Manifest::new(all, schema);
    let index_path = out.join(INDEX_NAME);
    let new_index = if opts.generate_index {
        entries.sort_by(|a, b| (&a.file_name, &a.tensor_key).cmp(&(&b.file_name, &b.tensor_key)));
        Some(tensor_index_file::prepare(&index_path, &entries)?)
    } else {
        None
    };
    match std::fs::remove_file(&index_path) {
        Ok(()) => sync_dir(out)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(DatasetError::io(&index_path, e)),
    }
    let mpath = out.join(MANIFEST_NAME);
    let mut f = AtomicFile::create(&mpath)?;
    std::io::Write::write_all(&mut f, manifest.to_json().as_bytes())
        .map_err(|e| DatasetError::io(&mpath, e))?;
    f.commit()?;
    if let Some(index) = new_index {
        index.commit()?;
    }
    // After the commit point: shard files the new manifest does not name go (the old
    // dataset's on overwrite, and strays of killed writers in either mode).
    let keep: HashSet<&str> = manifest
        .shards
        .iter()
        .map(|s| s.shard_path.as_str())
        .collect();
    if let Ok(entries) = std::fs::read_dir(out) {
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with("part-") && name.ends_with(".safetensors") && !keep.contains(name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    // Staging folders of writers that died before their commit or abort go with this one.
    let _ = crate::staging::clean(out, crate::staging::DEFAULT_STALE_AFTER);
    Ok(manifest)
}
