//! `stats`: value statistics of a model's tensors as `tensorsmith.stats/1` JSON text (the
//! Python side makes it a dict by tensor name).

use crate::errors::IntoPy;
use crate::file::parse_backend;
use pyo3::prelude::*;
use std::path::Path;
use tensorsmith::ops::name_glob::parse_all;
use tensorsmith::ops::stats::json::stats_json_text;
use tensorsmith::ops::stats::{stats, StatsOptions};
use tensorsmith::{open, OpenOptions};

/// `stats --json` of a file, folder of shards, shard index or URL; `tensors`: name patterns
/// (`*`, `?`, `[a-z]`), any of which selects a tensor (all when empty).
#[pyfunction]
#[pyo3(signature = (target, tensors = Vec::new(), backend = "mmap", storage = Vec::new()))]
pub fn stats_json(
    py: Python<'_>,
    target: &str,
    tensors: Vec<String>,
    backend: &str,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let opts = OpenOptions::default()
        .with_backend(parse_backend(py, backend)?)
        .with_storage_options(crate::file::storage_options(py, storage)?);
    let select = parse_all(&tensors).py_err(py)?;
    let m = py.detach(|| open(target, &opts)).py_err(py)?;
    let report = py
        .detach(|| stats(&m, &StatsOptions { tensors: select }))
        .py_err(py)?;
    Ok(stats_json_text(Path::new(target), &report))
}
