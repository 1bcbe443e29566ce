//! A task's shards: named `part-{task:05}-{n:04}-{uuid}.safetensors`, written into the
//! staging folder without waiting for the disk (a pipelined task's writer thread: fsynced at
//! once), recorded in the task's report (index entries, sample schema) and the progress
//! counters, and fsynced together at the task's end.

use crate::column::Samples;
use crate::error::{DatasetError, Result};
use crate::manifest::{shard_content_digest, ShardInfo, TensorSchema};
use crate::tensor_index_file::{IndexEntry, SharedNames};
use crate::write::task_context::Ctx;
use crate::write::task_report::TaskReport;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tensorsmith::dtype::DType;

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

    /// The namer that named `name` (a shard of `task`), going on from its number: the same
    /// uuid, the next name `name` itself. `None` if `name` is not such a name.
    pub(crate) fn resume(task: u64, name: &str) -> Option<Self> {
        let rest = name
            .strip_prefix(&format!("part-{task:05}-"))?
            .strip_suffix(".safetensors")?;
        let (n, uuid) = rest.split_once('-')?;
        Some(ShardNamer {
            task,
            next: n.parse().ok()?,
            uuid: uuid::Uuid::parse_str(uuid).ok()?,
        })
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

/// The attempt (`<task>-<uuid>`) a shard name `part-<task>-<n>-<uuid>.safetensors` is of.
pub(crate) fn attempt_of(shard: &str) -> Option<String> {
    let rest = shard.strip_prefix("part-")?.strip_suffix(".safetensors")?;
    let (task, rest) = rest.split_once('-')?;
    let (_, uuid) = rest.split_once('-')?;
    Some(format!("{task}-{uuid}"))
}

/// Whether `name` is a shard name a writer's [`ShardNamer`] gives: `part-`, five or more
/// digits, four or more digits, a UUID, `.safetensors`. A store's clean takes a file it finds
/// no version listing for an abandoned upload only if it is so named (a user's
/// `part-0.safetensors` never is).
pub(crate) fn is_writer_shard_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("part-")
        .and_then(|r| r.strip_suffix(".safetensors"))
    else {
        return false;
    };
    let mut it = rest.splitn(3, '-');
    let (Some(task), Some(n), Some(uuid)) = (it.next(), it.next(), it.next()) else {
        return false;
    };
    let digits = |s: &str, min: usize| s.len() >= min && s.bytes().all(|b| b.is_ascii_digit());
    digits(task, 5) && digits(n, 4) && uuid::Uuid::try_parse(uuid).is_ok()
}

/// fsyncs shards of the staging folder, a few at a time so the disk sees them together.
pub(crate) fn sync_files(staging: &Path, shards: &[ShardInfo]) -> Result<()> {
    use rayon::prelude::*;
    shards.par_iter().try_for_each(|s| {
        let p = staging.join(&s.shard_path);
        std::fs::File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(|e| DatasetError::io(&p, e))
    })
}

/// Writes a shard into the staging folder. Without `sync`, it does not wait for the disk:
/// nothing in staging is visible before the commit, and the task fsyncs its shards together
/// at its end (`run_task`), so their writeback overlaps its work. With `sync` (a pipelined
/// task's writer thread), the shard is on disk when this returns. A shard cut short by a
/// failure or a kill stays in staging, which is removed.
fn write_staged(w: tensorsmith::safetensors::Writer<'_>, path: &Path, sync: bool) -> Result<u64> {
    let io = |e| DatasetError::io(path, e);
    let f = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, f);
    let n = w.write_to(&mut out).map_err(|e| e.in_file(path))?;
    let f = out.into_inner().map_err(|e| io(e.into_error()))?;
    if sync {
        f.sync_all().map_err(io)?;
    }
    Ok(n)
}

/// A shard's tensors: key, the samples, the tensor's shape.
pub(crate) type ShardTensors = Vec<(String, Samples, Vec<u64>)>;

/// A shard file written into the staging folder, not yet in the task's report.
pub(crate) struct WrittenShard {
    pub name: String,
    tensors: Vec<(String, DType, Vec<u64>)>,
    bytes: u64,
    samples_count: u64,
    content_digest: Option<String>,
    /// The samples' buffers, emptied, for the next shard.
    pub buffers: Vec<Vec<u8>>,
}

/// Writes one shard file into the staging folder (fsynced with `sync`).
pub(crate) fn write_shard_file(
    ctx: &Ctx,
    name: String,
    tensors: ShardTensors,
    samples_count: u64,
    sync: bool,
) -> Result<WrittenShard> {
    let parts = tensors.iter().map(|(key, s, shape)| {
        let dtype = s.dtype.expect("at least one sample");
        (key.as_str(), dtype, &shape[..], &s.bytes[..])
    });
    let (bytes, content_digest) = write_tensors(ctx, &name, parts, sync)?;
    let mut described = Vec::with_capacity(tensors.len());
    // The buffers go back to the caller, emptied, for the next shard: no fresh pages to
    // fault in and zero for every shard.
    let mut buffers = Vec::with_capacity(tensors.len());
    for (key, s, shape) in tensors {
        described.push((key, s.dtype.expect("at least one sample"), shape));
        let mut b = s.bytes;
        b.clear();
        buffers.push(b);
    }
    Ok(WrittenShard {
        name,
        tensors: described,
        bytes,
        samples_count,
        content_digest,
        buffers,
    })
}

/// Writes shard file `name` of `tensors` (key, dtype, shape, bytes) into the staging folder
/// (fsynced with `sync`); returns its size and, when the options ask for digests, its
/// content digest.
pub(crate) fn write_tensors<'a>(
    ctx: &Ctx,
    name: &str,
    tensors: impl Iterator<Item = (&'a str, DType, &'a [u64], &'a [u8])>,
    sync: bool,
) -> Result<(u64, Option<String>)> {
    let mut w = tensorsmith::safetensors::Writer::new();
    w.record_digests(ctx.opts.digest);
    for (key, dtype, shape, bytes) in tensors {
        w.add(key, dtype, shape, bytes)?;
    }
    let path = ctx.staging.join(name);
    let bytes = write_staged(w, &path, sync)?;
    let content_digest = match ctx.opts.digest {
        Some(_) => shard_content_digest(&path)?,
        None => None,
    };
    Ok((bytes, content_digest))
}

/// Records a written shard in the task's report; returns its buffers.
pub(crate) fn record_written(ctx: &Ctx, w: WrittenShard, out: &mut TaskReport) -> Vec<Vec<u8>> {
    note_shard(
        ctx,
        &w.name,
        w.tensors,
        w.bytes,
        w.samples_count,
        w.content_digest,
        out,
    );
    w.buffers
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
) -> Result<()> {
    let content_digest = match ctx.opts.digest {
        Some(_) => shard_content_digest(&ctx.staging.join(name))?,
        None => None,
    };
    note_shard(
        ctx,
        name,
        tensors,
        bytes,
        samples_count,
        content_digest,
        out,
    );
    Ok(())
}

/// Notes a shard in the task's report: an index entry per tensor (key, dtype, shape), the
/// shard, the progress counters.
pub(crate) fn note_shard(
    ctx: &Ctx,
    name: &str,
    tensors: impl IntoIterator<Item = (String, DType, Vec<u64>)>,
    bytes: u64,
    samples_count: u64,
    content_digest: Option<String>,
    out: &mut TaskReport,
) {
    let file: Arc<str> = name.into();
    let mut names = SharedNames::default();
    for (key, dtype, shape) in tensors {
        out.index.push(IndexEntry {
            tensor_key: key,
            file_name: file.clone(),
            shape,
            dtype: names.get(dtype.safetensors_name()),
        });
    }
    ctx.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
    ctx.progress.shards.fetch_add(1, Ordering::Relaxed);
    out.shards.push(ShardInfo {
        shard_path: name.to_string(),
        samples_count,
        bytes,
        content_digest,
    });
    if let Some(f) = ctx.on_shard {
        f(name);
    }
}

pub(crate) fn note_sample(out: &mut TaskReport, key: &str, s: &Samples) -> Result<()> {
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
