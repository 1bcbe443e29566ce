//! Datasets from Python: `write_dataset` from any Arrow stream (the Arrow C stream interface,
//! `__arrow_c_stream__`: pyarrow tables, record batch readers, anything that exports one),
//! the map-style reader, and the three steps of a distributed (Spark) write: a task writes
//! its shards into the job's staging folder and reports them, the driver commits the reports
//! (manifest and index) or aborts the job (every shard of it removed).

use crate::batch_pipe::pipelined;
use crate::buffer::Bytes;
use crate::errors::{raise, IntoPy};
use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{RecordBatch, RecordBatchReader};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tensorsmith_dataset::{
    abort_job_at, commit_job_at, write_dataset_to as write_rust, write_task_at,
    write_task_range_at, ColumnView, Dataset, DatasetMode, Input, JobOptions, Progress, TaskReport,
    WriteMode, WriteOptions,
};

/// Takes the Arrow C stream that `obj.__arrow_c_stream__()` exports.
fn stream_of(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<RecordBatchStreamReader> {
    if !obj.hasattr("__arrow_c_stream__")? {
        return Err(raise(
            py,
            "InvalidInput",
            format!(
                "expected Arrow data (a pyarrow Table, RecordBatchReader or anything with \
                 __arrow_c_stream__), not {}",
                obj.get_type().name()?
            ),
        ));
    }
    let cap = obj.call_method0("__arrow_c_stream__")?;
    let cap = cap.cast::<PyCapsule>()?;
    let ptr = cap.pointer_checked(Some(c"arrow_array_stream"))?;
    // SAFETY: the capsule holds an `ArrowArrayStream` (its name says so); from_raw moves the
    // stream out and leaves a released one behind for the capsule's destructor.
    unsafe { RecordBatchStreamReader::from_raw(ptr.as_ptr() as *mut FFI_ArrowArrayStream) }
        .map_err(|e| raise(py, "InvalidInput", format!("Arrow stream: {e}")))
}

/// Every batch of the stream (zero-copy: the buffers stay the producer's).
fn batches(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Input> {
    let reader = stream_of(py, obj)?;
    let schema = reader.schema();
    let all = py
        .detach(|| reader.collect::<Result<Vec<RecordBatch>, _>>())
        .map_err(|e| raise(py, "InvalidInput", format!("Arrow stream: {e}")))?;
    Input::from_batches(schema, all).py_err(py)
}

fn options(py: Python<'_>, opts: &BTreeMap<String, String>) -> PyResult<WriteOptions> {
    WriteOptions::parse(opts.iter().map(|(k, v)| (k.as_str(), v.as_str()))).py_err(py)
}

fn mode(py: Python<'_>, m: &str) -> PyResult<WriteMode> {
    match m.to_ascii_lowercase().as_str() {
        "error" | "errorifexists" => Ok(WriteMode::ErrorIfExists),
        "overwrite" => Ok(WriteMode::Overwrite),
        "append" => Ok(WriteMode::Append),
        _ => Err(raise(
            py,
            "OptionError",
            format!("mode must be 'error', 'overwrite' or 'append', not {m:?}"),
        )),
    }
}

/// Checks dataset options (names and values) without writing anything.
#[pyfunction]
pub fn check_options(py: Python<'_>, options: BTreeMap<String, String>) -> PyResult<()> {
    self::options(py, &options)?.check().py_err(py)
}

/// Writes a dataset from Arrow data, or from input files (a list of paths and URLs:
/// `Input::open_at`, with `storage`); returns the manifest's JSON text.
///
/// `stream`: `data` is pulled batch by batch on this thread (GIL released between pulls)
/// into a task that writes shards on a thread of its own, never collected; one task, so
/// `threads` > 1 is refused. Otherwise (data already in memory: a Table) every batch is
/// taken at once, zero-copy, and split between `threads` tasks.
#[pyfunction]
#[pyo3(signature = (data, path, options, mode = "error", threads = 0, retain_s = None, lock_timeout_s = None, stream = false, storage = Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub fn write_dataset(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    path: PathBuf,
    options: BTreeMap<String, String>,
    mode: &str,
    threads: usize,
    retain_s: Option<f64>,
    lock_timeout_s: Option<f64>,
    stream: bool,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let opts = self::options(py, &options)?;
    let storage = crate::file::storage_options(py, storage)?;
    let path = location(py, &path)?;
    if stream && threads > 1 {
        return Err(raise(
            py,
            "OptionError",
            format!(
                "threads={threads}: a stream is written by one thread (its batches arrive one \
                 at a time, in order, and shard names follow that order); pass threads=1, or a \
                 pyarrow Table to split the rows between threads"
            ),
        ));
    }
    // threads=0 (the Python default) means one per core.
    let mut job = JobOptions::new()
        .with_mode(self::mode(py, mode)?)
        .with_pipelined(stream);
    if threads > 0 {
        job = job.with_threads(threads);
    }
    let secs = |name: &str, s: f64| {
        std::time::Duration::try_from_secs_f64(s).map_err(|_| {
            crate::errors::raise(
                py,
                "OptionError",
                format!("{name}: {s} is not a number of seconds >= 0"),
            )
        })
    };
    if let Some(s) = retain_s {
        job = job.with_retain(secs("retain", s)?);
    }
    if let Some(s) = lock_timeout_s {
        job = job.with_lock_timeout(secs("lock_timeout", s)?);
    }
    let progress = Progress::default();
    let m = if stream {
        let source = stream_of(py, data)?;
        py.detach(|| {
            pipelined(source, |queued| {
                let input = Input::from_reader(Box::new(queued));
                write_rust(&input, &path, &storage, &opts, &job, &progress)
            })
        })
    } else if let Ok(locations) = data.extract::<Vec<String>>() {
        // Input files: local paths and URLs, read with the same storage options.
        py.detach(|| {
            let input = Input::open_at(&locations, &storage)?;
            write_rust(&input, &path, &storage, &opts, &job, &progress)
        })
    } else {
        let input = batches(py, data)?;
        py.detach(|| write_rust(&input, &path, &storage, &opts, &job, &progress))
    }
    .py_err(py)?;
    Ok(m.to_json())
}

/// One Spark task: its Arrow batches become shards in the job's staging folder; returns the
/// task's report (JSON text: the commit message). The batches are pulled on this thread
/// (GIL released between pulls) while another fills, writes and fsyncs the shards.
#[pyfunction]
#[pyo3(signature = (data, path, job_id, task, options, storage = Vec::new()))]
pub fn write_job_task(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    path: PathBuf,
    job_id: &str,
    task: u64,
    options: BTreeMap<String, String>,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let opts = self::options(py, &options)?;
    let storage = crate::file::storage_options(py, storage)?;
    let path = location(py, &path)?;
    let stream = stream_of(py, data)?;
    let progress = Progress::default();
    let r = py
        .detach(|| {
            pipelined(stream, |queued| {
                // One pass over the task's batches as Spark hands them over (memory stays
                // bounded).
                let input = Input::from_reader(Box::new(queued));
                write_task_at(&input, &path, &storage, job_id, task, &opts, &progress)
            })
        })
        .py_err(py)?;
    Ok(serde_json::to_string(&r).expect("reports serialize"))
}

/// The row ranges of the tasks of a direct write of `paths` (at most `tasks` of them): the
/// cut `write_dataset` makes, so the committed shards are the ones it writes.
#[pyfunction]
#[pyo3(signature = (paths, options, tasks, storage = Vec::new()))]
pub fn task_ranges(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    options: BTreeMap<String, String>,
    tasks: usize,
    storage: Vec<(String, String)>,
) -> PyResult<Vec<(u64, u64)>> {
    let opts = self::options(py, &options)?;
    let storage = crate::file::storage_options(py, storage)?;
    let paths = locations(py, &paths)?;
    let ranges = py
        .detach(|| {
            tensorsmith_dataset::task_ranges(&Input::open_at(&paths, &storage)?, &opts, tasks)
        })
        .py_err(py)?;
    Ok(ranges.into_iter().map(|r| (r.start, r.end)).collect())
}

/// One task of a direct write: rows `start..end` of the input files, read by Rust (Parquet
/// pages copied or decoded where they can be), as task `task` of job `job_id`; returns the
/// task's report (JSON text).
#[pyfunction]
#[pyo3(signature = (paths, path, job_id, task, start, end, options, storage = Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub fn write_job_range(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    path: PathBuf,
    job_id: &str,
    task: u64,
    start: u64,
    end: u64,
    options: BTreeMap<String, String>,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let opts = self::options(py, &options)?;
    let storage = crate::file::storage_options(py, storage)?;
    let path = location(py, &path)?;
    let paths = locations(py, &paths)?;
    let progress = Progress::default();
    let r = py
        .detach(|| {
            let input = Input::open_at(&paths, &storage)?;
            write_task_range_at(
                &input,
                &path,
                &storage,
                job_id,
                task,
                start..end,
                &opts,
                &progress,
            )
        })
        .py_err(py)?;
    Ok(serde_json::to_string(&r).expect("reports serialize"))
}

/// The driver's commit: every task's report; returns the manifest's JSON text.
#[pyfunction]
#[pyo3(signature = (path, job_id, reports, options, mode, storage = Vec::new()))]
pub fn commit_job_reports(
    py: Python<'_>,
    path: PathBuf,
    job_id: &str,
    reports: Vec<String>,
    options: BTreeMap<String, String>,
    mode: &str,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let opts = self::options(py, &options)?;
    let storage = crate::file::storage_options(py, storage)?;
    let path = location(py, &path)?;
    let mode = self::mode(py, mode)?;
    let reports = reports
        .iter()
        .map(|r| serde_json::from_str::<TaskReport>(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            raise(
                py,
                "DatasetFailure",
                format!("a task report is malformed: {e}"),
            )
        })?;
    let m = py
        .detach(|| {
            let job = JobOptions::new().with_mode(mode);
            commit_job_at(&path, &storage, job_id, reports, &opts, &job)
        })
        .py_err(py)?;
    Ok(m.to_json())
}

/// Whether a dataset is at `path` (a local folder or a URL): what mode "error" refuses.
#[pyfunction]
#[pyo3(signature = (path, storage = Vec::new()))]
pub fn dataset_exists(
    py: Python<'_>,
    path: PathBuf,
    storage: Vec<(String, String)>,
) -> PyResult<bool> {
    let storage = crate::file::storage_options(py, storage)?;
    let path = location(py, &path)?;
    py.detach(|| tensorsmith_dataset::exists_at(&path, &storage))
        .py_err(py)
}

/// The input files `paths` name (local paths and URLs; folders and prefixes listed in name
/// order, `_`/`.` names skipped), as a direct write reads them.
#[pyfunction]
#[pyo3(signature = (paths, storage = Vec::new()))]
pub fn input_files(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    storage: Vec<(String, String)>,
) -> PyResult<Vec<String>> {
    let storage = crate::file::storage_options(py, storage)?;
    let paths = locations(py, &paths)?;
    py.detach(|| tensorsmith_dataset::input_locations(&paths, &storage))
        .py_err(py)
}

/// The driver's abort: removes every shard the job wrote.
#[pyfunction]
#[pyo3(signature = (path, job_id, storage = Vec::new()))]
pub fn abort_job_shards(
    py: Python<'_>,
    path: PathBuf,
    job_id: &str,
    storage: Vec<(String, String)>,
) -> PyResult<()> {
    let storage = crate::file::storage_options(py, storage)?;
    let path = location(py, &path)?;
    py.detach(|| abort_job_at(&path, &storage, job_id))
        .py_err(py)
}

/// A dataset opened for reading (map-style: sample i in batch mode, tensor i or by key in KV
/// mode).
#[pyclass(frozen, module = "tensorsmith._native")]
pub struct DatasetReader {
    /// Shared with every zero-copy `Bytes` handed out: the shards' maps live while any view
    /// of them does.
    ds: Arc<Dataset>,
    keys: Vec<String>,
}

impl DatasetReader {
    fn owner(&self) -> Arc<dyn std::any::Any + Send + Sync> {
        Arc::clone(&self.ds) as Arc<dyn std::any::Any + Send + Sync>
    }

    fn items(&self, cols: Vec<ColumnView<'_>>) -> Vec<Item> {
        let owner = self.owner();
        cols.into_iter()
            .map(|c| {
                (
                    c.name,
                    c.dtype.safetensors_name(),
                    c.shape,
                    Bytes::of(&owner, c.data),
                )
            })
            .collect()
    }
}

type Item = (String, &'static str, Vec<u64>, Bytes);

#[pymethods]
impl DatasetReader {
    /// Opens the current version of the dataset at `path`, or version `version`.
    #[new]
    #[pyo3(signature = (path, version = None, storage = Vec::new()))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        version: Option<u64>,
        storage: Vec<(String, String)>,
    ) -> PyResult<Self> {
        let storage = crate::file::storage_options(py, storage)?;
        let path = location(py, &path)?;
        let ds = py
            .detach(|| Dataset::open_at(&path, &storage, version))
            .py_err(py)?;
        let keys = match ds.mode() {
            DatasetMode::Kv => ds.tensor_keys().py_err(py)?,
            DatasetMode::Batch => Vec::new(),
        };
        Ok(DatasetReader {
            ds: Arc::new(ds),
            keys,
        })
    }

    /// The version read (0: a dataset written before versions).
    #[getter]
    fn version(&self) -> u64 {
        self.ds.version()
    }

    /// "batch" or "kv".
    #[getter]
    fn mode(&self) -> &'static str {
        match self.ds.mode() {
            DatasetMode::Batch => "batch",
            DatasetMode::Kv => "kv",
        }
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        match self.ds.mode() {
            DatasetMode::Kv => Ok(self.keys.len()),
            DatasetMode::Batch => Ok(self.ds.len().py_err(py)? as usize),
        }
    }

    /// Tensor keys (KV mode), sorted.
    fn keys(&self) -> Vec<String> {
        self.keys.clone()
    }

    /// KV mode: the shard (position in the manifest) of each key of `keys()`, in that order.
    fn key_shards(&self, py: Python<'_>) -> PyResult<Vec<usize>> {
        let at = self.ds.key_shards().py_err(py)?;
        Ok(self.keys.iter().map(|k| at[k]).collect())
    }

    fn manifest_json(&self) -> String {
        self.ds.manifest().to_json()
    }

    /// Sample `i` (batch mode): `(column, dtype, shape, bytes)` per column; the bytes are a
    /// view of the shard's map.
    fn sample(&self, py: Python<'_>, i: u64) -> PyResult<Vec<Item>> {
        let cols = self.ds.sample_view(i).py_err(py)?;
        Ok(self.items(cols))
    }

    /// Samples `a..b` (batch mode) as one batch per column (of `columns` only, when given):
    /// a view of the shard's map (on a store: of its range cache, read by range) when they
    /// lie in one shard, gathered where they span shards.
    #[pyo3(signature = (a, b, columns = None))]
    fn rows(
        &self,
        py: Python<'_>,
        a: u64,
        b: u64,
        columns: Option<Vec<String>>,
    ) -> PyResult<Vec<Item>> {
        let names: Option<Vec<&str>> = columns.as_ref().map(|c| c.iter().map(|s| &**s).collect());
        let cols = py
            .detach(|| self.ds.rows_of(a..b, names.as_deref()))
            .py_err(py)?;
        Ok(self.items(cols))
    }

    /// Every sample of shard `k` (batch mode), one batch per column (of `columns` only, when
    /// given): views of its map, or, on a store, of the shard's range cache (the columns
    /// read by range; most of the shard's bytes asked for: the shard fetched whole).
    #[pyo3(signature = (k, columns = None))]
    fn shard(&self, py: Python<'_>, k: usize, columns: Option<Vec<String>>) -> PyResult<Vec<Item>> {
        if k >= self.ds.shard_starts().len() {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "shard {k} of {}",
                self.ds.shard_starts().len()
            )));
        }
        let n = self.ds.manifest().shards[k].samples_count;
        let names: Option<Vec<&str>> = columns.as_ref().map(|c| c.iter().map(|s| &**s).collect());
        let cols = py
            .detach(|| self.ds.shard_columns(k, 0..n, names.as_deref()))
            .py_err(py)?;
        Ok(self.items(cols))
    }

    /// Samples before each shard (batch mode).
    fn shard_starts(&self) -> Vec<u64> {
        self.ds.shard_starts().to_vec()
    }

    /// A tensor by key (KV mode).
    fn tensor(&self, py: Python<'_>, key: &str) -> PyResult<Item> {
        let t = py.detach(|| self.ds.tensor(key)).py_err(py)?;
        Ok((
            key.to_owned(),
            t.dtype.safetensors_name(),
            t.shape,
            Bytes::owned(t.data),
        ))
    }
}

/// A job's heartbeat, kept by the driver from the job's start to its commit or abort: the
/// staging folder's marker is renewed every minute, so `dataset clean` (and the next commit)
/// can tell a dead driver's folder from a live one.
#[pyclass(module = "tensorsmith._native")]
pub struct JobHeartbeat {
    beat: Option<tensorsmith_dataset::Heartbeat>,
}

#[pymethods]
impl JobHeartbeat {
    #[new]
    #[pyo3(signature = (path, job_id, storage = Vec::new()))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        job_id: &str,
        storage: Vec<(String, String)>,
    ) -> PyResult<Self> {
        let storage = crate::file::storage_options(py, storage)?;
        let path = location(py, &path)?;
        let beat = py
            .detach(|| {
                tensorsmith_dataset::start_job_at(
                    &path,
                    &storage,
                    job_id,
                    tensorsmith_dataset::DEFAULT_HEARTBEAT,
                )
            })
            .py_err(py)?;
        Ok(JobHeartbeat { beat: Some(beat) })
    }

    /// Stops renewing (before the commit or the abort removes the folder).
    fn stop(&mut self) {
        self.beat = None;
    }
}

/// Input locations as text (local paths or URLs).
fn locations(py: Python<'_>, paths: &[PathBuf]) -> PyResult<Vec<String>> {
    paths.iter().map(|p| location(py, p)).collect()
}

/// A dataset location as text: a local folder or a URL (`s3://`, `az://`, `gs://` prefix).
pub fn location(py: Python<'_>, p: &std::path::Path) -> PyResult<String> {
    p.to_str().map(str::to_owned).ok_or_else(|| {
        raise(
            py,
            "DatasetInputError",
            format!("{}: a dataset path must be UTF-8", p.display()),
        )
    })
}
