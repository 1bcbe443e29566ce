//! Writing a GGUF model split into parts, byte-identical to gguf-py's `GGUFWriter` with the
//! same `split_max_tensors`, `split_max_size` and `small_first_shard`: the same boundaries
//! (`SplitLimits::plan`), the same names (`{stem}-{no:05d}-of-{count:05d}.gguf` beside the
//! output), the model's metadata in the first part only, and `split.no` (UINT16),
//! `split.count` (UINT16) and `split.tensors.count` (INT32) at the end of every part's
//! metadata. One part (no limit reached) is written as the output itself, without the keys,
//! as gguf-py does.
//!
//! The parts appear together: each is written and fsynced into a staging folder beside the
//! output, then renamed into place, the first part last (an older first part of the same name
//! is removed before the others are renamed). A crash can leave: the staging folder (hidden,
//! removed by the next split write to the same output); or, during the renames, later parts
//! without a first part, which every reader refuses (`split GGUF: part 1 of N … is missing`);
//! or, if an older model of the same name and part count was there, nothing mixed under a
//! first part, since the first part goes in last. Parts carry no mark of their own (they must
//! stay byte-identical to gguf-py's), so a reader relies on the `split.*` keys.

use super::split::{part_name, SplitLimits, KEY_COUNT, KEY_NO, KEY_TENSORS};
use super::value::GgufValue;
use super::write::Writer;
use crate::error::{Error, ErrorKind, Result};
use crate::sink::dead_writers;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Marker in a staging folder's name: `.{output name}{STAGING_MARKER}{pid}`.
const STAGING_MARKER: &str = ".split-staging-";

/// Writes `w` at `out` split by `limits`; returns each file written and its length, in part
/// order (the one file `out` when the model fits one part).
pub fn write_split(w: Writer<'_>, out: &Path, limits: &SplitLimits) -> Result<Vec<(PathBuf, u64)>> {
    let sizes: Vec<u64> = w.tensors.iter().map(|t| t.byte_len).collect();
    let plan = limits.plan(&sizes);
    if plan.len() == 1 {
        let n = w.write_file(out)?;
        return Ok(vec![(out.to_path_buf(), n)]);
    }
    let count = plan.len() as u64;
    let (Ok(count16), Ok(total)) = (u16::try_from(count), i32::try_from(sizes.len())) else {
        return Err(Error::new(ErrorKind::Unsupported(format!(
            "{count} parts of {} tensors: split.count is a UINT16 and split.tensors.count an INT32",
            sizes.len()
        )))
        .in_file(out));
    };
    let align = w.alignment().map_err(|e| e.in_file(out))?;
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Writer {
        metadata, tensors, ..
    } = w;
    let mut tensors = tensors.into_iter();
    let mut parts = Vec::with_capacity(plan.len());
    for (i, range) in plan.iter().enumerate() {
        let mut part = Writer::new();
        if i == 0 {
            part.metadata = metadata.clone();
        }
        part.set(KEY_NO, GgufValue::U16(i as u16));
        part.set(KEY_COUNT, GgufValue::U16(count16));
        part.set(KEY_TENSORS, GgufValue::I32(total));
        part.forced_alignment = Some(align);
        part.tensors = tensors.by_ref().take(range.len()).collect();
        parts.push((part_name(&stem, i as u64 + 1, count), part));
    }
    if !dir.is_dir() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no such folder");
        return Err(Error::from(missing).in_file(&dir));
    }
    let file_name = out
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    remove_stale_staging(&dir, &file_name);
    let staging = Staging::create(&dir, &file_name)?;
    let mut written = Vec::with_capacity(parts.len());
    for (name, part) in parts {
        let path = staging.path.join(&name);
        let write = || -> Result<u64> {
            let f = std::fs::File::create(&path)?;
            let mut buf = std::io::BufWriter::with_capacity(1 << 20, f);
            let n = part.write_to(&mut buf)?;
            buf.flush()?;
            buf.into_inner()
                .map_err(|e| Error::from(e.into_error()))?
                .sync_all()?;
            Ok(n)
        };
        let n = write().map_err(|e| e.in_file(&dir.join(&name)))?;
        written.push((name, n));
    }
    // The first part is the commit: an older one goes first, the new one comes in last.
    let first = dir.join(&written[0].0);
    match std::fs::remove_file(&first) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Error::from(e).in_file(&first));
        }
        _ => {}
    }
    for (name, _) in written.iter().skip(1).chain(written.iter().take(1)) {
        let to = dir.join(name);
        std::fs::rename(staging.path.join(name), &to).map_err(|e| Error::from(e).in_file(&to))?;
    }
    sync_dir(&dir)?;
    Ok(written
        .into_iter()
        .map(|(name, n)| (dir.join(name), n))
        .collect())
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::from(e).in_file(dir))
}

/// The staging folder of one split write; removed (with what is left in it) when dropped.
struct Staging {
    path: PathBuf,
}

impl Staging {
    fn create(dir: &Path, file_name: &str) -> Result<Staging> {
        let path = dir.join(format!(
            ".{file_name}{STAGING_MARKER}{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).map_err(|e| Error::from(e).in_file(&path))?;
        Ok(Staging { path })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes staging folders that split writes to the same output left when their process was
/// killed.
fn remove_stale_staging(dir: &Path, file_name: &str) {
    for p in dead_writers(dir, &format!(".{file_name}{STAGING_MARKER}")) {
        let _ = std::fs::remove_dir_all(p);
    }
}
