//! Writing a dataset: rows split into contiguous ranges, one per task (a worker thread with
//! its own taskId), each task reading its own range and writing its shards into a staging
//! folder; then the commit: shards renamed into the dataset folder, the index written, and
//! the manifest written last, atomically. A failure or a kill before the manifest's rename
//! leaves the previous dataset as it was (its manifest names only its own shards).

use crate::column::{ColumnPlan, Samples};
use crate::error::{DatasetError, Result};
use crate::index;
use crate::input::Input;
use crate::manifest::{Manifest, ShardInfo, TensorSchema, INDEX_NAME, MANIFEST_NAME};
use crate::options::{Duplicates, Naming, TailStrategy, WriteOptions};
use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tensorsmith::sink::AtomicFile;

/// What to do when the folder already holds a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Refuse (the default).
    #[default]
    ErrorIfExists,
    /// Replace it: its shards and index are removed once the new manifest is in place.
    Overwrite,
    /// Add shards and rewrite the manifest (and the index) over old and new.
    Append,
}

/// Counters a progress display can poll while a write runs.
#[derive(Debug, Default)]
pub struct Progress {
    pub rows: AtomicU64,
    pub bytes: AtomicU64,
    pub shards: AtomicU64,
}

#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    pub mode: Mode,
    /// Worker threads (tasks); 0 means one per core.
    pub threads: usize,
}

/// One tensor entry of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub tensor_key: String,
    pub file_name: String,
    pub shape: Vec<u64>,
    pub dtype: String,
}

#[derive(Debug, Default)]
struct TaskOut {
    shards: Vec<ShardInfo>,
    index: Vec<IndexEntry>,
    /// Per tensor key (batch mode: column): dtype and sample shape.
    samples: BTreeMap<String, (String, Vec<u64>)>,
}

struct Ctx<'a> {
    input: &'a Input,
    opts: &'a WriteOptions,
    plans: Vec<ColumnPlan>,
    read_cols: Vec<String>,
    staging: PathBuf,
    progress: &'a Progress,
    failed: &'a AtomicBool,
    /// KV lastWin: (row, column index) pairs superseded by a later row.
    superseded: HashSet<(u64, usize)>,
}

const READ_BATCH_ROWS: usize = 4096;
const STAGING_PREFIX: &str = "_tensorsmith_staging-";

/// Writes `input` as a dataset in `out`.
pub fn write_dataset(
    input: &Input,
    out: &Path,
    opts: &WriteOptions,
    job: &JobOptions,
    progress: &Progress,
) -> Result<Manifest> {
    opts.check()?;
    let schema = input.schema().clone();
    let name_col = match &opts.naming {
        Naming::Kv { name_col } => Some(name_col.clone()),
        Naming::Batch(_) => None,
    };
    let columns: Vec<String> = match &opts.columns {
        Some(c) => c.clone(),
        None => schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| Some(n) != name_col.as_ref())
            .collect(),
    };
    if columns.is_empty() {
        return Err(DatasetError::option("columns", "no column to write"));
    }
    if let Some(c) = opts.shapes.keys().find(|c| !columns.contains(c)) {
        return Err(DatasetError::option(
            "shapes",
            format!("names '{c}', which is not a written column"),
        ));
    }
    let mut read_cols = columns.clone();
    if let Some(n) = &name_col {
        read_cols.push(n.clone());
        let f = schema.field_with_name(n).map_err(|_| {
            DatasetError::option("name_col", format!("no column '{n}' in the input"))
        })?;
        if !matches!(
            f.data_type(),
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64
        ) {
            return Err(DatasetError::option(
                "name_col",
                format!(
                    "'{n}' is {}: keys come from strings or integers",
                    f.data_type()
                ),
            ));
        }
    }
    input
        .check_columns(&read_cols)
        .map_err(|e| e.in_file(&input.files[0].path))?;
    let plans = columns
        .iter()
        .map(|c| {
            ColumnPlan::new(
                &schema,
                c,
                opts.dtype,
                opts.shapes.get(c).cloned(),
                opts.f16_rounding,
            )
            .map_err(|e| e.in_file(&input.files[0].path))
        })
        .collect::<Result<Vec<_>>>()?;

    std::fs::create_dir_all(out).map_err(|e| DatasetError::io(out, e))?;
    remove_stale_staging(out);
    let old = if out.join(MANIFEST_NAME).exists() {
        match job.mode {
            Mode::ErrorIfExists => return Err(DatasetError::Exists(out.to_path_buf())),
            Mode::Overwrite | Mode::Append => Some(Manifest::read(out)?),
        }
    } else {
        None
    };

    let total = input.total_rows();
    let threads = if job.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        job.threads
    };
    let superseded = match &name_col {
        Some(n) => duplicates_pass(input, n, &columns, &opts.kv_separator, opts.duplicates)?,
        None => HashSet::new(),
    };
    let staging = out.join(format!(
        "{STAGING_PREFIX}{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    let failed = AtomicBool::new(false);
    let ctx = Ctx {
        input,
        opts,
        plans,
        read_cols,
        staging: staging.clone(),
        progress,
        failed: &failed,
        superseded,
    };
    let result =
        run_tasks(&ctx, total, threads).and_then(|outs| commit(&ctx, out, outs, old, job.mode));
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// Task ranges: batch mode splits whole batches, KV mode rows, into `threads` contiguous
/// ranges (so shard paths sort in input order). Unknown row counts: one task.
fn run_tasks(ctx: &Ctx, total: Option<u64>, threads: usize) -> Result<Vec<TaskOut>> {
    let ranges: Vec<(Range<u64>, bool)> = match total {
        None => vec![(0..u64::MAX, true)],
        Some(0) => vec![],
        Some(n) => {
            let (unit, units) = match ctx.opts.naming {
                Naming::Batch(bs) => (bs, n.div_ceil(bs)),
                Naming::Kv { .. } => (1, n),
            };
            let t = (threads as u64).clamp(1, units.max(1));
            (0..t)
                .map(|i| {
                    let (a, b) = (i * units / t, (i + 1) * units / t);
                    ((a * unit).min(n)..(b * unit).min(n), i + 1 == t)
                })
                .filter(|(r, _)| !r.is_empty())
                .collect()
        }
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = ranges
            .into_iter()
            .enumerate()
            .map(|(task, (range, last))| {
                s.spawn(move || {
                    let r = match ctx.opts.naming {
                        Naming::Batch(bs) => batch_task(ctx, task, range, bs, last),
                        Naming::Kv { ref name_col } => kv_task(ctx, task, range, name_col),
                    };
                    if r.is_err() {
                        ctx.failed.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let mut outs = Vec::new();
        let mut first_err = None;
        for h in handles {
            match h.join().expect("task thread panicked") {
                Ok(o) => outs.push(o),
                Err(e) => {
                    // The error of the earliest range is the one to report.
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(outs),
        }
    })
}

struct ShardNamer {
    task: usize,
    next: usize,
    uuid: uuid::Uuid,
}

impl ShardNamer {
    fn new(task: usize) -> Self {
        ShardNamer {
            task,
            next: 0,
            uuid: uuid::Uuid::new_v4(),
        }
    }

    fn next(&mut self) -> String {
        let n = format!(
            "part-{:05}-{:04}-{}.safetensors",
            self.task, self.next, self.uuid
        );
        self.next += 1;
        n
    }
}

/// Writes one shard file into the staging folder.
fn write_shard(
    ctx: &Ctx,
    name: &str,
    tensors: Vec<(String, Samples, Vec<u64>)>,
    samples_count: u64,
    out: &mut TaskOut,
) -> Result<()> {
    let mut w = tensorsmith::safetensors::Writer::new();
    for (key, s, shape) in tensors {
        let dtype = s.dtype.expect("at least one sample");
        out.index.push(IndexEntry {
            tensor_key: key.clone(),
            file_name: name.to_string(),
            shape: shape.clone(),
            dtype: dtype.safetensors_name().to_string(),
        });
        w.add(&key, dtype, &shape, s.bytes)?;
    }
    let bytes = w.write_file(ctx.staging.join(name))?;
    ctx.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
    ctx.progress.shards.fetch_add(1, Ordering::Relaxed);
    out.shards.push(ShardInfo {
        shard_path: name.to_string(),
        samples_count,
        bytes,
    });
    Ok(())
}

fn note_sample(out: &mut TaskOut, key: &str, s: &Samples) -> Result<()> {
    let dtype = s.dtype.expect("sampled").safetensors_name().to_string();
    let shape = s.sample_shape.clone().expect("sampled");
    match out.samples.get(key) {
        Some((d, sh)) if *d != dtype || *sh != shape => Err(DatasetError::column(
            key,
            format!("samples of {dtype} {shape:?} after samples of {d} {sh:?}: every batch of a column must have one sample shape and dtype"),
        )),
        Some(_) => Ok(()),
        None => {
            out.samples.insert(key.to_string(), (dtype, shape));
            Ok(())
        }
    }
}

fn batch_task(ctx: &Ctx, task: usize, rows: Range<u64>, bs: u64, last: bool) -> Result<TaskOut> {
    let mut out = TaskOut::default();
    let mut namer = ShardNamer::new(task);
    let fresh = || {
        ctx.plans
            .iter()
            .map(|_| Samples::default())
            .collect::<Vec<_>>()
    };
    let mut cur = fresh();
    let mut in_batch = 0u64;
    let flush =
        |cur: Vec<Samples>, n: u64, out: &mut TaskOut, namer: &mut ShardNamer| -> Result<()> {
            let mut tensors = Vec::new();
            for (plan, s) in ctx.plans.iter().zip(cur) {
                note_sample(out, &plan.name, &s)?;
                let shape: Vec<u64> = std::iter::once(n)
                    .chain(s.sample_shape.clone().expect("sampled"))
                    .collect();
                tensors.push((plan.name.clone(), s, shape));
            }
            write_shard(ctx, &namer.next(), tensors, n, out)
        };
    ctx.input.read_range(
        rows,
        &ctx.read_cols,
        READ_BATCH_ROWS.min(bs as usize).max(1),
        &mut |b: &RecordBatch, row0, _| {
            if ctx.failed.load(Ordering::Relaxed) {
                return Err(DatasetError::input("stopped: another task failed"));
            }
            let mut r = 0usize;
            while r < b.num_rows() {
                let take = ((bs - in_batch) as usize).min(b.num_rows() - r);
                for (plan, s) in ctx.plans.iter().zip(cur.iter_mut()) {
                    plan.append_rows(b, r..r + take, row0, s)?;
                }
                r += take;
                in_batch += take as u64;
                ctx.progress.rows.fetch_add(take as u64, Ordering::Relaxed);
                if in_batch == bs {
                    flush(
                        std::mem::replace(&mut cur, fresh()),
                        bs,
                        &mut out,
                        &mut namer,
                    )?;
                    in_batch = 0;
                }
            }
            Ok(())
        },
    )?;
    if in_batch > 0 {
        debug_assert!(last, "only the last task has a partial batch");
        match ctx.opts.tail_strategy {
            TailStrategy::Drop => {}
            TailStrategy::Write => flush(cur, in_batch, &mut out, &mut namer)?,
            TailStrategy::Pad => {
                for s in cur.iter_mut() {
                    s.pad_to(bs);
                }
                flush(cur, bs, &mut out, &mut namer)?
            }
        }
    }
    Ok(out)
}

fn key_of(col: &dyn Array, r: usize) -> Option<String> {
    if col.is_null(r) {
        return None;
    }
    use arrow_array::types::*;
    Some(match col.data_type() {
        DataType::Utf8 => col.as_string::<i32>().value(r).to_string(),
        DataType::LargeUtf8 => col.as_string::<i64>().value(r).to_string(),
        DataType::Utf8View => col.as_string_view().value(r).to_string(),
        DataType::Int8 => col.as_primitive::<Int8Type>().value(r).to_string(),
        DataType::Int16 => col.as_primitive::<Int16Type>().value(r).to_string(),
        DataType::Int32 => col.as_primitive::<Int32Type>().value(r).to_string(),
        DataType::Int64 => col.as_primitive::<Int64Type>().value(r).to_string(),
        DataType::UInt8 => col.as_primitive::<UInt8Type>().value(r).to_string(),
        DataType::UInt16 => col.as_primitive::<UInt16Type>().value(r).to_string(),
        DataType::UInt32 => col.as_primitive::<UInt32Type>().value(r).to_string(),
        DataType::UInt64 => col.as_primitive::<UInt64Type>().value(r).to_string(),
        _ => unreachable!("checked in write_dataset"),
    })
}

fn null_key(name_col: &str, row: u64) -> DatasetError {
    DatasetError::Input {
        file: None,
        column: Some(name_col.to_string()),
        row: Some(row),
        msg: "the key (name_col) is null".into(),
    }
}

/// Reads the key column once over the whole input: duplicates are found across the whole
/// write, before anything is written. Returns the (row, column) pairs a later row replaces.
fn duplicates_pass(
    input: &Input,
    name_col: &str,
    columns: &[String],
    sep: &str,
    strategy: Duplicates,
) -> Result<HashSet<(u64, usize)>> {
    let mut last: HashMap<String, (u64, usize)> = HashMap::new();
    let mut superseded = HashSet::new();
    input.read_range(
        0..u64::MAX,
        &[name_col.to_string()],
        65536,
        &mut |b, row0, _| {
            let col = b.column_by_name(name_col).expect("projected");
            for r in 0..b.num_rows() {
                let row = row0 + r as u64;
                let name = key_of(col.as_ref(), r).ok_or_else(|| null_key(name_col, row))?;
                for (ci, c) in columns.iter().enumerate() {
                    let key = format!("{name}{sep}{c}");
                    if let Some((prev_row, prev_ci)) = last.insert(key.clone(), (row, ci)) {
                        match strategy {
                            Duplicates::Fail => {
                                return Err(DatasetError::DuplicateKey {
                                    key,
                                    first: prev_row,
                                    second: row,
                                })
                            }
                            Duplicates::LastWin => {
                                superseded.insert((prev_row, prev_ci));
                            }
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    Ok(superseded)
}

fn kv_task(ctx: &Ctx, task: usize, rows: Range<u64>, name_col: &str) -> Result<TaskOut> {
    let mut out = TaskOut::default();
    let mut namer = ShardNamer::new(task);
    let target = ctx.opts.target_shard_bytes();
    let mut tensors: Vec<(String, Samples, Vec<u64>)> = Vec::new();
    let mut shard_rows = 0u64;
    let mut shard_bytes = 0u64;
    let sep = &ctx.opts.kv_separator;
    ctx.input.read_range(
        rows,
        &ctx.read_cols,
        READ_BATCH_ROWS,
        &mut |b: &RecordBatch, row0, _| {
            if ctx.failed.load(Ordering::Relaxed) {
                return Err(DatasetError::input("stopped: another task failed"));
            }
            let keys = b.column_by_name(name_col).expect("projected");
            for r in 0..b.num_rows() {
                let row = row0 + r as u64;
                let name = key_of(keys.as_ref(), r).ok_or_else(|| null_key(name_col, row))?;
                let mut wrote = false;
                for (ci, plan) in ctx.plans.iter().enumerate() {
                    if ctx.superseded.contains(&(row, ci)) {
                        continue;
                    }
                    let mut s = Samples::default();
                    plan.append_rows(b, r..r + 1, row0, &mut s)?;
                    let key = format!("{name}{sep}{}", plan.name);
                    shard_bytes += s.bytes.len() as u64 + 200;
                    let shape = s.sample_shape.clone().expect("sampled");
                    tensors.push((key, s, shape));
                    wrote = true;
                }
                ctx.progress.rows.fetch_add(1, Ordering::Relaxed);
                if wrote {
                    shard_rows += 1;
                }
                if shard_bytes >= target {
                    for (k, s, _) in &tensors {
                        note_sample(&mut out, k, s)?;
                    }
                    write_shard(
                        ctx,
                        &namer.next(),
                        std::mem::take(&mut tensors),
                        shard_rows,
                        &mut out,
                    )?;
                    shard_rows = 0;
                    shard_bytes = 0;
                }
            }
            Ok(())
        },
    )?;
    if !tensors.is_empty() {
        for (k, s, _) in &tensors {
            note_sample(&mut out, k, s)?;
        }
        write_shard(ctx, &namer.next(), tensors, shard_rows, &mut out)?;
    }
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| DatasetError::io(dir, e))
}

fn commit(
    ctx: &Ctx,
    out: &Path,
    outs: Vec<TaskOut>,
    old: Option<Manifest>,
    mode: Mode,
) -> Result<Manifest> {
    let mut shards = Vec::new();
    let mut entries = Vec::new();
    let mut samples: BTreeMap<String, (String, Vec<u64>)> = BTreeMap::new();
    for o in outs {
        shards.extend(o.shards);
        entries.extend(o.index);
        for (k, v) in o.samples {
            if let Some(prev) = samples.get(&k) {
                if *prev != v {
                    return Err(DatasetError::column(
                        &k,
                        format!(
                            "samples of {} {:?} in one part of the input and {} {:?} in another",
                            v.0, v.1, prev.0, prev.1
                        ),
                    ));
                }
            }
            samples.insert(k, v);
        }
    }
    if shards.is_empty() {
        return Err(DatasetError::Empty(match ctx.input.total_rows() {
            Some(0) | None => "the input has no rows: no dataset written".into(),
            Some(n) => format!("all {n} rows were dropped (tail_strategy=drop, fewer rows than batch_size): no dataset written"),
        }));
    }
    let mut schema: BTreeMap<String, TensorSchema> = samples
        .into_iter()
        .map(|(k, (dtype, shape))| {
            let shape = match ctx.opts.naming {
                Naming::Batch(bs) => std::iter::once(bs).chain(shape).collect(),
                Naming::Kv { .. } => shape,
            };
            (k, TensorSchema { dtype, shape })
        })
        .collect();
    let mut all = shards.clone();
    if let (Some(old), Mode::Append) = (&old, mode) {
        for (k, v) in &old.schema {
            match (schema.get(k), &ctx.opts.naming) {
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
        if ctx.opts.generate_index {
            entries.extend(index::entries_from_headers(out, &old.shards)?);
        }
    }
    // Shards into place (new names: nothing is overwritten), then the index, then the
    // manifest: the commit point.
    for s in &shards {
        let from = ctx.staging.join(&s.shard_path);
        let to = out.join(&s.shard_path);
        std::fs::rename(&from, &to).map_err(|e| DatasetError::io(&to, e))?;
    }
    sync_dir(out)?;
    let manifest = Manifest::new(all, schema);
    let index_path = out.join(INDEX_NAME);
    if ctx.opts.generate_index {
        entries.sort_by(|a, b| (&a.file_name, &a.tensor_key).cmp(&(&b.file_name, &b.tensor_key)));
        index::write(&index_path, &entries)?;
    }
    let mpath = out.join(MANIFEST_NAME);
    let mut f = AtomicFile::create(&mpath)?;
    std::io::Write::write_all(&mut f, manifest.to_json().as_bytes())
        .map_err(|e| DatasetError::io(&mpath, e))?;
    f.commit()?;
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
    if mode == Mode::Overwrite && !ctx.opts.generate_index {
        let _ = std::fs::remove_file(&index_path);
    }
    Ok(manifest)
}

/// Removes staging folders of writers that are gone (killed before their commit).
fn remove_stale_staging(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(STAGING_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
