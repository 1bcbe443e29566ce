//! One task: a range of the input's rows written as shards into a staging folder, and what
//! was written reported (`TaskReport`, no tensor data) for the commit. Batch mode: every
//! `batch_size` rows one shard, the tail strategy applied to the task's last partial batch;
//! KV mode: a tensor per row and column, shards rolled over at the target size.
//! `write_dataset` runs several tasks as threads; a Spark job runs one per partition.

use crate::column::{ColumnPlan, Samples};
use crate::duplicates;
use crate::error::{DatasetError, Result};
use crate::input::Input;
use crate::job_options::Progress;
use crate::manifest::{ShardInfo, TensorSchema};
use crate::options::{Naming, TailStrategy, WriteOptions};
use crate::tensor_index_file::IndexEntry;
use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use tensorsmith::dtype::DType;

/// What one task wrote, sent to the commit (from executor to driver as JSON in a Spark job).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskReport {
    /// The task id (Spark: the partition id); shard names carry it.
    pub task: u64,
    /// Shards in the staging folder, in the order written.
    pub shards: Vec<ShardInfo>,
    /// One entry per tensor of those shards, shard by shard.
    pub index: Vec<IndexEntry>,
    /// Per tensor key (batch mode: column): dtype and sample shape (no batch dimension).
    pub samples: BTreeMap<String, TensorSchema>,
    /// Input rows the task read.
    pub rows: u64,
}

impl TaskReport {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("serializable")
    }

    pub fn from_json(text: &[u8]) -> Result<TaskReport> {
        serde_json::from_slice(text)
            .map_err(|e| DatasetError::input(format!("not a task report: {e}")))
    }
}

/// The options checked against the input schema: which columns become tensors and how.
pub(crate) struct Plan {
    pub columns: Vec<String>,
    pub plans: Vec<ColumnPlan>,
    /// Columns read: the tensor columns, then the key column (KV mode).
    pub read_cols: Vec<String>,
    pub name_col: Option<String>,
}

impl Plan {
    pub fn new(input: &Input, opts: &WriteOptions) -> Result<Plan> {
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
            if !duplicates::is_key_type(f.data_type()) {
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
            .map_err(|e| e.in_file(input.name()))?;
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
                .map_err(|e| e.in_file(input.name()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Plan {
            columns,
            plans,
            read_cols,
            name_col,
        })
    }

    /// KV mode reads the input twice (the duplicate-key pass, then the tensors): a one-pass
    /// stream is collected into memory first. `None`: use the input as it is.
    fn rereadable(&self, input: &Input) -> Result<Option<Input>> {
        match self.name_col {
            Some(_) => input.multi_pass(),
            None => Ok(None),
        }
    }

    /// KV mode: the (row, column) pairs a later row replaces (duplicatesStrategy=lastWin) or
    /// the first duplicate key as an error (fail), from one pass over the key column.
    fn superseded(&self, input: &Input, opts: &WriteOptions) -> Result<HashSet<(u64, usize)>> {
        match &self.name_col {
            Some(n) => {
                duplicates::pre_pass(input, n, &self.columns, &opts.kv_separator, opts.duplicates)
            }
            None => Ok(HashSet::new()),
        }
    }

    /// Runs `f` with the context the tasks of one write share: the input made re-readable
    /// where KV mode needs its pre-pass, the rows lastWin supersedes, no task failed yet.
    pub(crate) fn with_ctx<T>(
        &self,
        input: &Input,
        opts: &WriteOptions,
        staging: &Path,
        progress: &Progress,
        direct: bool,
        f: impl FnOnce(&Ctx) -> Result<T>,
    ) -> Result<T> {
        let collected = self.rereadable(input)?;
        let input = collected.as_ref().unwrap_or(input);
        let first_failed = AtomicU64::new(u64::MAX);
        let ctx = Ctx {
            input,
            opts,
            plan: self,
            staging,
            progress,
            first_failed: &first_failed,
            direct,
            superseded: self.superseded(input, opts)?,
        };
        f(&ctx)
    }
}

/// What every task of one write shares.
pub(crate) struct Ctx<'a> {
    pub input: &'a Input,
    pub opts: &'a WriteOptions,
    pub plan: &'a Plan,
    pub staging: &'a Path,
    pub progress: &'a Progress,
    /// The lowest task number that failed (`u64::MAX`: none). Tasks after it stop early;
    /// tasks before it run on, so the error reported is always the first in input order.
    pub first_failed: &'a AtomicU64,
    /// Batch mode may copy shards straight from Parquet pages (parquet_direct).
    pub direct: bool,
    /// KV lastWin: (row, column index) pairs superseded by a later row.
    pub superseded: HashSet<(u64, usize)>,
}

const READ_BATCH_ROWS: usize = 4096;

/// Runs task `task` over the input rows `rows`.
pub(crate) fn run_task(ctx: &Ctx, task: u64, rows: Range<u64>) -> Result<TaskReport> {
    let r = match ctx.opts.naming {
        Naming::Batch(bs) => match crate::parquet_direct::plan(ctx, rows.clone()) {
            Some(p) => crate::parquet_direct::batch_task(ctx, task, rows, bs, &p),
            None => batch_task(ctx, task, rows, bs),
        },
        Naming::Kv { ref name_col } => kv_task(ctx, task, rows, name_col),
    }
    .and_then(|report| {
        // Shards are written without waiting for the disk; the task's are flushed together
        // at its end, on the machine that wrote them (in a cluster a driver's commit could
        // not flush another node's page cache), before anyone may commit them.
        sync_files(ctx.staging, &report.shards)?;
        Ok(report)
    });
    if r.is_err() {
        ctx.first_failed.fetch_min(task, Ordering::Relaxed);
    }
    r
}

/// `part-{task:05}-{n:04}-{uuid}.safetensors`, one uuid per task (as safetensors-spark names
/// them: a retried task's shards never collide with the first attempt's).
pub(crate) struct ShardNamer {
    task: u64,
    next: usize,
    uuid: uuid::Uuid,
}

impl ShardNamer {
    pub(crate) fn new(task: u64) -> Self {
        ShardNamer {
            task,
            next: 0,
            uuid: uuid::Uuid::new_v4(),
        }
    }

    pub(crate) fn next(&mut self) -> String {
        let n = format!(
            "part-{:05}-{:04}-{}.safetensors",
            self.task, self.next, self.uuid
        );
        self.next += 1;
        n
    }
}

pub(crate) fn new_report(task: u64) -> TaskReport {
    TaskReport {
        task,
        ..Default::default()
    }
}

/// fsyncs shards of the staging folder, a few at a time so the disk sees them together.
fn sync_files(staging: &Path, shards: &[ShardInfo]) -> Result<()> {
    use rayon::prelude::*;
    shards.par_iter().try_for_each(|s| {
        let p = staging.join(&s.shard_path);
        std::fs::File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(|e| DatasetError::io(&p, e))
    })
}

/// Writes a shard into the staging folder without waiting for the disk: nothing in staging
/// is visible before the commit, and the task fsyncs its shards together at its end
/// (`run_task`), so their writeback overlaps its work. A shard cut short by a failure or a
/// kill stays in staging, which is removed.
fn write_staged(w: tensorsmith::safetensors::Writer<'_>, path: &Path) -> Result<u64> {
    let io = |e| DatasetError::io(path, e);
    let f = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, f);
    let n = w.write_to(&mut out).map_err(|e| e.in_file(path))?;
    std::io::Write::flush(&mut out).map_err(io)?;
    Ok(n)
}

/// Writes one shard file into the staging folder.
fn write_shard(
    ctx: &Ctx,
    name: &str,
    tensors: Vec<(String, Samples, Vec<u64>)>,
    samples_count: u64,
    out: &mut TaskReport,
) -> Result<Vec<Vec<u8>>> {
    let mut w = tensorsmith::safetensors::Writer::new();
    let mut described = Vec::new();
    for (key, s, shape) in &tensors {
        let dtype = s.dtype.expect("at least one sample");
        w.add(key, dtype, shape, &s.bytes[..])?;
        described.push((key.clone(), dtype, shape.clone()));
    }
    let bytes = write_staged(w, &ctx.staging.join(name))?;
    record_shard(ctx, name, described, bytes, samples_count, out);
    // The buffers go back to the caller, emptied, for the next shard: no fresh pages to
    // fault in and zero for every shard.
    Ok(tensors
        .into_iter()
        .map(|(_, s, _)| {
            let mut b = s.bytes;
            b.clear();
            b
        })
        .collect())
}

/// Notes a shard written into the staging folder: its tensors (key, dtype, shape) in the
/// index, its size in the progress counters, the shard in the report.
pub(crate) fn record_shard(
    ctx: &Ctx,
    name: &str,
    tensors: Vec<(String, DType, Vec<u64>)>,
    bytes: u64,
    samples_count: u64,
    out: &mut TaskReport,
) {
    for (key, dtype, shape) in tensors {
        out.index.push(IndexEntry {
            tensor_key: key,
            file_name: name.to_string(),
            shape,
            dtype: dtype.safetensors_name().to_string(),
        });
    }
    ctx.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
    ctx.progress.shards.fetch_add(1, Ordering::Relaxed);
    out.shards.push(ShardInfo {
        shard_path: name.to_string(),
        samples_count,
        bytes,
    });
}

fn note_sample(out: &mut TaskReport, key: &str, s: &Samples) -> Result<()> {
    note_schema(
        out,
        key,
        s.dtype.expect("sampled"),
        s.sample_shape.as_deref().expect("sampled"),
    )
}

/// Notes a tensor's sample dtype and shape in the report: the same for every shard of a
/// column.
pub(crate) fn note_schema(
    out: &mut TaskReport,
    key: &str,
    dtype: DType,
    shape: &[u64],
) -> Result<()> {
    let dtype = dtype.safetensors_name().to_string();
    let shape = shape.to_vec();
    match out.samples.get(key) {
        Some(t) if t.dtype != dtype || t.shape != shape => Err(DatasetError::column(
            key,
            format!("samples of {dtype} {shape:?} after samples of {} {:?}: every batch of a column must have one sample shape and dtype", t.dtype, t.shape),
        )),
        Some(_) => Ok(()),
        None => {
            out.samples.insert(key.to_string(), TensorSchema { dtype, shape });
            Ok(())
        }
    }
}

pub(crate) fn stopped(ctx: &Ctx, task: u64) -> Result<()> {
    if ctx.first_failed.load(Ordering::Relaxed) < task {
        return Err(DatasetError::Stopped);
    }
    Ok(())
}

fn batch_task(ctx: &Ctx, task: u64, rows: Range<u64>, bs: u64) -> Result<TaskReport> {
    let mut out = new_report(task);
    let mut namer = ShardNamer::new(task);
    let plans = &ctx.plan.plans;
    // One buffer per column, sized for a whole shard by its first sample and reused for
    // every shard of the task.
    let fresh = |pool: &mut Vec<Vec<u8>>| {
        plans
            .iter()
            .map(|_| Samples {
                bytes: pool.pop().unwrap_or_default(),
                ..Samples::expecting(bs)
            })
            .collect::<Vec<_>>()
    };
    let mut pool = Vec::new();
    let mut cur = fresh(&mut pool);
    let mut in_batch = 0u64;
    let flush = |cur: Vec<Samples>,
                 n: u64,
                 out: &mut TaskReport,
                 namer: &mut ShardNamer|
     -> Result<Vec<Vec<u8>>> {
        let mut tensors = Vec::new();
        for (plan, s) in plans.iter().zip(cur) {
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
        &ctx.plan.read_cols,
        READ_BATCH_ROWS.min(bs as usize).max(1),
        &mut |b: &RecordBatch, row0, _| {
            stopped(ctx, task)?;
            let mut r = 0usize;
            while r < b.num_rows() {
                let take = ((bs - in_batch) as usize).min(b.num_rows() - r);
                for (plan, s) in plans.iter().zip(cur.iter_mut()) {
                    plan.append_rows(b, r..r + take, row0, s)?;
                }
                r += take;
                in_batch += take as u64;
                out.rows += take as u64;
                ctx.progress.rows.fetch_add(take as u64, Ordering::Relaxed);
                if in_batch == bs {
                    let full = std::mem::take(&mut cur);
                    pool.extend(flush(full, bs, &mut out, &mut namer)?);
                    cur = fresh(&mut pool);
                    in_batch = 0;
                }
            }
            Ok(())
        },
    )?;
    // The task's tail (write_dataset: only its last task has one).
    if in_batch > 0 {
        match ctx.opts.tail_strategy {
            TailStrategy::Drop => {}
            TailStrategy::Write => drop(flush(cur, in_batch, &mut out, &mut namer)?),
            TailStrategy::Pad => {
                for s in cur.iter_mut() {
                    s.pad_to(bs);
                }
                drop(flush(cur, bs, &mut out, &mut namer)?);
            }
        }
    }
    Ok(out)
}

/// The key column's value of row `r` as text; `None` when null.
pub(crate) fn key_of(col: &dyn Array, r: usize) -> Option<String> {
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
        _ => unreachable!("checked by Plan::new"),
    })
}

pub(crate) fn null_key(name_col: &str, row: u64) -> DatasetError {
    DatasetError::Input {
        file: None,
        column: Some(name_col.to_string()),
        row: Some(row),
        msg: "the key (name_col) is null".into(),
    }
}

fn kv_task(ctx: &Ctx, task: u64, rows: Range<u64>, name_col: &str) -> Result<TaskReport> {
    let mut out = new_report(task);
    let mut namer = ShardNamer::new(task);
    let target = ctx.opts.target_shard_bytes();
    let mut tensors: Vec<(String, Samples, Vec<u64>)> = Vec::new();
    let mut shard_rows = 0u64;
    let mut shard_bytes = 0u64;
    let sep = &ctx.opts.kv_separator;
    let mut seal = |tensors: Vec<(String, Samples, Vec<u64>)>,
                    shard_rows: u64,
                    out: &mut TaskReport|
     -> Result<()> {
        for (k, s, _) in &tensors {
            note_sample(out, k, s)?;
        }
        write_shard(ctx, &namer.next(), tensors, shard_rows, out).map(drop)
    };
    ctx.input.read_range(
        rows,
        &ctx.plan.read_cols,
        READ_BATCH_ROWS,
        &mut |b: &RecordBatch, row0, _| {
            stopped(ctx, task)?;
            let keys = b.column_by_name(name_col).expect("projected");
            for r in 0..b.num_rows() {
                let row = row0 + r as u64;
                let name = key_of(keys.as_ref(), r).ok_or_else(|| null_key(name_col, row))?;
                let mut wrote = false;
                for (ci, plan) in ctx.plan.plans.iter().enumerate() {
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
                out.rows += 1;
                ctx.progress.rows.fetch_add(1, Ordering::Relaxed);
                if wrote {
                    shard_rows += 1;
                }
                if shard_bytes >= target {
                    seal(std::mem::take(&mut tensors), shard_rows, &mut out)?;
                    shard_rows = 0;
                    shard_bytes = 0;
                }
            }
            Ok(())
        },
    )?;
    if !tensors.is_empty() {
        seal(tensors, shard_rows, &mut out)?;
    }
    Ok(out)
}
