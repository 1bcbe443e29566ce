//! `validate`, `verify` and the dataset commands `info`, `verify`, `clean` and `export`, with
//! the CLI's semantics, as plain Python values (JSON text the Python side turns into dicts).
//! A file that breaks its format's rules is a result (`valid: false`), as the CLI's exit 1;
//! one that cannot be read at all raises, as its exit 2.

use crate::errors::{raise, IntoPy};
use crate::file::parse_backend;
use pyo3::prelude::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use tensorsmith::{open, OpenOptions};
use tensorsmith_dataset::{format_utc, parse_duration, DEFAULT_LOCK_TIMEOUT};

fn duration(py: Python<'_>, name: &str, s: &str) -> PyResult<std::time::Duration> {
    parse_duration(s).map_err(|e| raise(py, "OptionError", format!("{name}: {e}")))
}

/// `{"valid", "tensors", "error"}` for one model (file, folder of shards, index or URL).
#[pyfunction]
#[pyo3(signature = (target, packed_ints = false, backend = "mmap", storage = Vec::new()))]
pub fn validate_json(
    py: Python<'_>,
    target: &str,
    packed_ints: bool,
    backend: &str,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let opts = OpenOptions::default()
        .with_backend(parse_backend(py, backend)?)
        .with_packed_ints(packed_ints)
        .with_storage_options(crate::file::storage_options(py, storage)?);
    let r = py.detach(|| {
        open(target, &opts).and_then(|m| tensorsmith::ops::write_id::check(&m).map(|()| m))
    });
    Ok(match r {
        Ok(m) => json!({"valid": true, "tensors": m.index.tensors.len(), "error": null}),
        Err(e) if e.is_invalid_input() => {
            json!({"valid": false, "tensors": null, "error": e.to_string()})
        }
        Err(e) => return Err(crate::errors::from_core(py, e)),
    }
    .to_string())
}

/// `{"ok", "checked", "undigested", "failures"}`: every digest and full-read data rule.
#[pyfunction]
#[pyo3(signature = (target, backend = "mmap", storage = Vec::new()))]
pub fn verify_json(
    py: Python<'_>,
    target: &str,
    backend: &str,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let opts = OpenOptions::default()
        .with_backend(parse_backend(py, backend)?)
        .with_storage_options(crate::file::storage_options(py, storage)?);
    let m = py.detach(|| open(target, &opts)).py_err(py)?;
    let ids = tensorsmith::ops::write_id::check(&m);
    let r = py.detach(|| tensorsmith::ops::verify::verify(&m));
    let mut failures: Vec<String> = r.failures.iter().map(|e| e.to_string()).collect();
    if let Err(e) = ids {
        failures.insert(0, e.to_string());
    }
    Ok(json!({
        "ok": failures.is_empty(),
        "checked": r.checked,
        "undigested": r.undigested,
        "failures": failures,
    })
    .to_string())
}

/// `dataset info --json` plus the versions kept and the retired shards.
#[pyfunction]
#[pyo3(signature = (path, storage = Vec::new()))]
pub fn dataset_info_json(
    py: Python<'_>,
    path: PathBuf,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let storage = crate::file::storage_options(py, storage)?;
    let path = crate::dataset::location(py, &path)?;
    let (m, versions, retired) = py
        .detach(|| tensorsmith_dataset::info_at(&path, &storage))
        .py_err(py)?;
    let current = versions.last().map_or(0, |v| v.version);
    let manifest: serde_json::Value =
        serde_json::from_str(&m.to_json()).expect("the manifest's own JSON");
    let versions: Vec<_> = versions
        .iter()
        .map(|v| {
            json!({
                "version": v.version, "mode": v.mode, "committed": format_utc(v.committed_ms),
                "shards": v.shards, "samples": v.samples, "bytes": v.bytes,
                "superseded": v.superseded_ms.map(format_utc),
            })
        })
        .collect();
    let retired: Vec<_> = retired
        .iter()
        .map(|r| json!({"shard_path": r.shard_path, "bytes": r.bytes, "last_version": r.last_version}))
        .collect();
    Ok(json!({
        "version": current,
        "manifest": manifest,
        "versions": versions,
        "retired_shards": retired,
    })
    .to_string())
}

/// `dataset verify`: `{"ok", "shards", "tensors", "problems", "notes", "repaired"}`.
#[pyfunction]
#[pyo3(signature = (path, version = None, stale_after = "24h", repair = false, storage = Vec::new()))]
pub fn dataset_verify_json(
    py: Python<'_>,
    path: PathBuf,
    version: Option<u64>,
    stale_after: &str,
    repair: bool,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let stale = duration(py, "stale_after", stale_after)?;
    let storage = crate::file::storage_options(py, storage)?;
    let path = crate::dataset::location(py, &path)?;
    let repaired = if repair {
        py.detach(|| tensorsmith_dataset::repair_at(&path, &storage, DEFAULT_LOCK_TIMEOUT))
            .py_err(py)?
    } else {
        false
    };
    let r = py
        .detach(|| tensorsmith_dataset::verify_at(&path, &storage, version, stale))
        .py_err(py)?;
    Ok(json!({
        "ok": r.is_ok(), "shards": r.shards, "tensors": r.tensors,
        "problems": r.problems, "notes": r.notes, "repaired": repaired,
    })
    .to_string())
}

/// `dataset clean --older-than`: what was removed.
#[pyfunction]
#[pyo3(signature = (path, older_than = "24h", storage = Vec::new()))]
pub fn dataset_clean_json(
    py: Python<'_>,
    path: PathBuf,
    older_than: &str,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let older = duration(py, "older_than", older_than)?;
    let idle = older.max(tensorsmith_dataset::STAGING_FLOOR);
    let storage = crate::file::storage_options(py, storage)?;
    let path = crate::dataset::location(py, &path)?;
    let r = py
        .detach(|| {
            tensorsmith_dataset::clean_at(&path, &storage, older, idle, DEFAULT_LOCK_TIMEOUT)
        })
        .py_err(py)?;
    let shards: Vec<_> = r
        .shards
        .iter()
        .map(|(s, b)| json!({"shard_path": s, "bytes": b}))
        .collect();
    let staging: Vec<String> = r.staging.iter().map(|p| shown(p)).collect();
    let kept: Vec<_> = r
        .kept
        .iter()
        .map(|k| json!({"what": k.what, "from_ms": k.from_ms}))
        .collect();
    Ok(json!({
        "staging": staging, "versions": r.versions, "shards": shards,
        "index_files": r.index_files, "uploads": r.uploads, "repaired": r.repaired,
        "kept": kept,
    })
    .to_string())
}

/// `dataset export`: rows written to `out` (Parquet); `keys` are names or full tensor keys
/// (KV), `columns` column names (batch).
#[pyfunction]
#[pyo3(signature = (path, out, keys = None, kv_separator = "__", storage = Vec::new(), columns = None))]
pub fn dataset_export(
    py: Python<'_>,
    path: PathBuf,
    out: PathBuf,
    keys: Option<Vec<String>>,
    kv_separator: &str,
    storage: Vec<(String, String)>,
    columns: Option<Vec<String>>,
) -> PyResult<u64> {
    let storage = crate::file::storage_options(py, storage)?;
    let path = crate::dataset::location(py, &path)?;
    py.detach(|| {
        tensorsmith_dataset::export_at(
            &path,
            &storage,
            &out,
            keys.as_deref(),
            columns.as_deref(),
            kv_separator,
        )
    })
    .py_err(py)
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}
