//! Any model to safetensors (one file, or shards plus their index): every tensor streamed from
//! the open source into the atomic writer,
//! optionally cast to another float dtype on the way (one chunk at a time, so memory stays
//! bounded whatever the tensor size). Without a cast, raw tensors of local files are copied
//! by the kernel (`copy_file_range`), never passing through this process. ggml
//! block-quantized tensors are dequantized to F32 (then cast) a chunk of blocks at a time.

use crate::cast::{cast, Rounding};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::file_lock::{self, FileLock};
use crate::index::{Layout, TensorInfo};
use crate::model::Model;
use crate::ops::convert::options::ConvertOptions;
use crate::ops::convert::skip::skipped;
use crate::ops::convert::{dequantize, meta_carry};
use crate::ops::write_id;
use crate::safetensors::{FilePieces, Piece, TensorData, Writer};
use crate::sink::{write_atomically, AtomicFile};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Elements cast per chunk: 1 Mi elements keeps the buffers at a few MiB.
const CAST_CHUNK_ELEMENTS: u64 = 1 << 20;
/// Bytes copied per chunk from a model file.
const COPY_CHUNK: u64 = 8 << 20;

/// A tensor's bytes read from its model in bounded chunks, optionally cast; with `check`, the
/// digest its file records is checked on the same read (a remote input is fetched once), and
/// the write fails, naming the tensor, before its output is committed.
struct ModelRange<'a> {
    model: &'a Model,
    tensor: &'a TensorInfo,
    /// `Some((from, to, rounding))` to cast.
    cast: Option<(DType, DType, Rounding)>,
    check: bool,
}

impl TensorData for ModelRange<'_> {
    fn len(&self) -> u64 {
        let n = self.tensor.byte_len();
        match self.cast {
            None => n,
            Some((from, to, _)) => {
                n / from.byte_size().unwrap_or(1) as u64 * to.byte_size().unwrap_or(1) as u64
            }
        }
    }

    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        let (model, t) = (self.model, self.tensor);
        let checked = self.check && model.has_digest(t);
        if self.cast.is_none() && !checked {
            return model.copy_to(t, COPY_CHUNK, out);
        }
        let step = match self.cast {
            None => COPY_CHUNK,
            Some((from, _, _)) => CAST_CHUNK_ELEMENTS * from.byte_size().expect("float") as u64,
        };
        let cast_to = self.cast;
        let mut emit = |bytes: &[u8]| -> Result<()> {
            match cast_to {
                None => Ok(out.write_all(bytes)?),
                Some((from, to, rounding)) => Ok(out.write_all(&cast(bytes, from, to, rounding)?)?),
            }
        };
        if !checked {
            return model.for_each_chunk(t, step, emit);
        }
        match model.digest_hasher(t) {
            // Plain: hashed piece by piece as it streams.
            Some(mut h) => {
                model.for_each_chunk(t, step, |bytes| {
                    h.update(bytes);
                    emit(bytes)
                })?;
                model.compare_digest(t, h)
            }
            // Decoded whole anyway (compressed, big-endian): checked as it is decoded.
            None => model
                .part_bytes_checked(t, 0, true)?
                .chunks(step as usize)
                .try_for_each(emit),
        }
    }
}

/// A block-quantized tensor's values, dequantized to F32 and cast to `to`, chunk by chunk.
struct Dequantized<'a> {
    model: &'a Model,
    tensor: &'a TensorInfo,
    to: DType,
    rounding: Rounding,
}

impl TensorData for Dequantized<'_> {
    fn len(&self) -> u64 {
        self.tensor.elements() * self.to.byte_size().unwrap_or(4) as u64
    }

    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        dequantize::for_each_chunk_as(self.model, self.tensor, self.to, self.rounding, |b| {
            Ok(out.write_all(b)?)
        })
    }
}

/// What a conversion wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// Every file written: the output, or the shards then the index.
    pub files: Vec<PathBuf>,
    /// Bytes written over all those files.
    pub bytes: u64,
}

/// Writes `input`'s tensors and metadata (any format, one file or shards) as safetensors:
/// one file at `out`, or with `shard_size` shards named after `out` plus their index.
pub fn convert_safetensors(input: &Model, out: &Path, opts: &ConvertOptions) -> Result<Written> {
    if let Some(to) = opts.dtype {
        if !to.is_castable_float() {
            return Err(Error::new(ErrorKind::UnsupportedCast {
                from: "float tensors".into(),
                to: to.to_string(),
            }));
        }
    }
    let index = &input.index;
    for t in index.tensors.iter().filter(|t| !skipped(t)) {
        let sparse = crate::ops::convert::densify::is_sparse(t);
        if dequantize::block_type(t).is_some() {
            dequantize::check(input, t)?;
            continue;
        }
        if t.layout != Layout::Dense && !(sparse && opts.densify) {
            let what = match &t.layout {
                Layout::Ggml(g) => format!("a {g} (ggml block-quantized) tensor"),
                _ if sparse => format!(
                    "a sparse tensor ({}; --densify writes it dense)",
                    t.layout.name(crate::index::LayoutNames::Message)
                ),
                other => format!(
                    "a tensor of layout {}",
                    other.name(crate::index::LayoutNames::Message)
                ),
            };
            return Err(Error::new(ErrorKind::Unsupported(format!(
                "{what}, which safetensors cannot hold"
            )))
            .at_tensor(&t.name)
            .in_file(Path::new(&input.location)));
        }
        if let Some(ty) = t.parts.first().and_then(|p| p.unknown_type()) {
            return Err(Error::new(ErrorKind::ZtUnknownType(ty.to_string()))
                .at_tensor(&t.name)
                .in_file(Path::new(&input.location)));
        }
    }
    // A checkpoint's write id is not carried: a sharded output gets its own. A GGUF file
    // written from safetensors gives back its `__metadata__` keys.
    let meta: BTreeMap<String, String> =
        meta_carry::restored(index, meta_carry::SAFETENSORS_PREFIX)
            .map_err(|e| e.in_file(Path::new(&input.location)))?
            .iter()
            .map(|(k, v)| (k.clone(), crate::ops::inspect::meta_text(v)))
            .collect();
    let tensors: Vec<&TensorInfo> = index.tensors.iter().filter(|t| !skipped(t)).collect();
    let groups = match opts.shard_size {
        None => vec![tensors],
        Some(limit) => shard_groups(tensors, limit, opts),
    };
    if opts.shard_size.is_none() {
        let (bytes, file) = write_group(input, &groups[0], &meta, opts, out)?;
        file.commit()?;
        remove_sharded_layout(out)?;
        return Ok(Written {
            files: vec![out.to_path_buf()],
            bytes,
        });
    }
    write_shards(input, out, &groups, &meta, opts)
}

/// Output bytes of a tensor after the optional cast.
fn out_len(t: &TensorInfo, opts: &ConvertOptions) -> u64 {
    if dequantize::block_type(t).is_some() {
        return t.elements() * opts.dtype.unwrap_or(DType::F32).byte_size().unwrap_or(4) as u64;
    }
    match opts.dtype {
        Some(to) if t.dtype.is_castable_float() => t.elements() * to.byte_size().unwrap() as u64,
        _ => t.byte_len(),
    }
}

/// Splits tensors, in file order, into groups of at most `limit` tensor bytes (a tensor
/// larger than the limit gets a shard of its own), as the Hugging Face splitter does.
fn shard_groups<'a>(
    tensors: Vec<&'a TensorInfo>,
    limit: u64,
    opts: &ConvertOptions,
) -> Vec<Vec<&'a TensorInfo>> {
    let mut groups: Vec<Vec<&TensorInfo>> = vec![Vec::new()];
    let mut size = 0u64;
    for t in tensors {
        let n = out_len(t, opts);
        let current = groups.last_mut().expect("never empty");
        if !current.is_empty() && size + n > limit {
            groups.push(Vec::new());
            size = 0;
        }
        size += n;
        groups.last_mut().expect("never empty").push(t);
    }
    groups
}

/// The writer's cast of `t`, if one applies.
fn cast_of(t: &TensorInfo, opts: &ConvertOptions) -> Option<(DType, DType, Rounding)> {
    match opts.dtype {
        Some(to) if to != t.dtype && t.dtype.is_castable_float() => {
            Some((t.dtype, to, opts.rounding))
        }
        _ => None,
    }
}

/// Writes `tensors` as one safetensors file at `path`: copied file to file by the kernel when
/// every tensor is dense, uncast and stored raw in a local file; streamed otherwise. Digests,
/// when asked for, are computed by the writer from the same sources either way.
///
/// Recorded digests are checked before the output is committed: beside a kernel copy by a
/// second thread (`digest_guard::beside`), on the same read when streamed (`ModelRange`).
fn write_group(
    input: &Model,
    tensors: &[&TensorInfo],
    meta: &BTreeMap<String, String>,
    opts: &ConvertOptions,
    path: &Path,
) -> Result<(u64, AtomicFile)> {
    let files: Option<Vec<&std::fs::File>> = tensors
        .iter()
        .map(|t| {
            (t.layout == Layout::Dense && input.is_plain(t) && cast_of(t, opts).is_none())
                .then(|| input.file_of(t).bytes().local_file())
                .flatten()
        })
        .collect();
    // An upload is streamed (there is no file to copy into); so is an input without local
    // files.
    let remote = crate::bytes::is_url(&path.to_string_lossy());
    let (Some(files), false) = (files, remote) else {
        let w = writer_for(input, tensors, meta, opts)?;
        let mut out = AtomicFile::create_with(path, &opts.storage)?;
        let n = w.write_to(&mut out).map_err(|e| e.in_file(path))?;
        return Ok((n, out));
    };
    crate::ops::convert::digest_guard::beside(input, tensors, opts, || {
        copy_group(input, tensors, &files, meta, opts, path)
    })
}

/// A group whose tensors are all plain ranges of local files, copied by the kernel.
fn copy_group(
    input: &Model,
    tensors: &[&TensorInfo],
    files: &[&std::fs::File],
    meta: &BTreeMap<String, String>,
    opts: &ConvertOptions,
    path: &Path,
) -> Result<(u64, AtomicFile)> {
    let mut w = new_writer(meta, opts);
    for (t, f) in tensors.iter().zip(files) {
        let data = FilePieces {
            pieces: vec![Piece::Range(f, t.data_range())],
        };
        w.add(&t.name, t.dtype, &t.shape, data)
            .map_err(|e| e.in_file(path))?;
    }
    if let Some(file) = same_file(input, &mut w, files)? {
        let mut whole = FilePieces {
            pieces: vec![Piece::Range(file, 0..w.file_len())],
        };
        let mut out = AtomicFile::create(path)?;
        let n = whole
            .copy_into_file(out.file()?)
            .expect("FilePieces always copies file to file")
            .map_err(|e| e.in_file(path))?;
        return Ok((n, out));
    }
    let mut out = AtomicFile::create(path)?;
    let n = w.write_to_file(out.file()?).map_err(|e| e.in_file(path))?;
    Ok((n, out))
}

/// The one file every tensor comes from, when the output would be that file byte for byte
/// (its header is the one the writer makes, and nothing follows its last tensor): a file the
/// reference wrote, converted without changes. It is then copied whole by one
/// `copy_file_range` from offset 0, as `cp` copies, which is a reflink on filesystems that
/// share extents (ranges at a header's unaligned offsets cannot be) and measurably cheaper
/// in the kernel than a copy per tensor.
fn same_file<'f>(
    input: &Model,
    w: &mut Writer<'_>,
    files: &[&'f std::fs::File],
) -> Result<Option<&'f std::fs::File>> {
    let Some(&first) = files.first() else {
        return Ok(None);
    };
    if !files.iter().all(|f| std::ptr::eq(*f, first)) {
        return Ok(None);
    }
    let Some(i) = input.files.iter().position(|f| {
        f.bytes()
            .local_file()
            .is_some_and(|g| std::ptr::eq(g, first))
    }) else {
        return Ok(None);
    };
    let Some(header) = w.planned_header()? else {
        return Ok(None);
    };
    if input.files[i].bytes().len() != w.file_len() {
        return Ok(None);
    }
    Ok((*input.header_bytes(i)? == header[..]).then_some(first))
}

/// A writer with the file's metadata and the options every output shares.
fn new_writer<'a>(meta: &BTreeMap<String, String>, opts: &ConvertOptions) -> Writer<'a> {
    let mut w = Writer::new();
    w.allow_packed_ints(true).record_digests(opts.digest);
    if let Some(n) = opts.max_header_len {
        w.max_header_len(n);
    }
    if !meta.is_empty() {
        w.metadata(meta.clone());
    }
    w
}

fn writer_for<'a>(
    input: &'a Model,
    tensors: &[&'a TensorInfo],
    meta: &BTreeMap<String, String>,
    opts: &ConvertOptions,
) -> Result<Writer<'a>> {
    let mut w = new_writer(meta, opts);
    let check = !opts.skip_digest_check;
    for t in tensors {
        if check && t.layout != Layout::Dense {
            input.check_digests(t)?;
        }
        if dequantize::block_type(t).is_some() {
            let to = opts.dtype.unwrap_or(DType::F32);
            let data = Dequantized {
                model: input,
                tensor: t,
                to,
                rounding: opts.rounding,
            };
            w.add(&t.name, to, &t.shape, data)?;
            continue;
        }
        if t.layout != Layout::Dense {
            let (dtype, dense) = crate::ops::convert::densify::densify(input, t)?;
            let (dtype, data) = match opts.dtype {
                Some(to) if to != dtype && dtype.is_castable_float() => {
                    (to, cast(&dense, dtype, to, opts.rounding)?)
                }
                _ => (dtype, dense),
            };
            w.add(&t.name, dtype, &t.shape, data)?;
            continue;
        }
        let (dtype, cast) = match opts.dtype {
            Some(to) if to != t.dtype && t.dtype.is_castable_float() => {
                (to, Some((t.dtype, to, opts.rounding)))
            }
            _ => (t.dtype, None),
        };
        let data = ModelRange {
            model: input,
            tensor: t,
            cast,
            check,
        };
        w.add(&t.name, dtype, &t.shape, data)?;
    }
    Ok(w)
}

/// `model.safetensors` → `model-00001-of-00003.safetensors` … and
/// `model.safetensors.index.json`, next to `out`. Every shard is written whole under a
/// temporary name first, so a write that fails or is interrupted (SIGINT, SIGTERM: see
/// `interrupt`) before then leaves the old checkpoint as it was; then the old index is
/// removed, the shards renamed into place and the index written last, so a reader never
/// finds an index naming a shard that is not complete. Writers of one checkpoint take turns
/// under the lock file `.NAME.index.json.lock`. Every shard and the index carry one write id
/// (`model::write_id`), so a kill among the renames leaves a folder every reader refuses.
/// A single `NAME.safetensors` of the same name is removed once the index is in place (it
/// would be another layout of the checkpoint).
fn write_shards(
    input: &Model,
    out: &Path,
    groups: &[Vec<&TensorInfo>],
    meta: &BTreeMap<String, String>,
    opts: &ConvertOptions,
) -> Result<Written> {
    let dir = out.parent().unwrap_or(Path::new("."));
    let file = out
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file
        .strip_suffix(".safetensors")
        .unwrap_or(&file)
        .to_owned();
    let index_path = dir.join(format!("{stem}{}", crate::model::INDEX_SUFFIX));
    // A missing folder is named with the output, not with the lock file inside it.
    let lock = FileLock::acquire(
        &file_lock::beside(&index_path),
        file_lock::DEFAULT_LOCK_TIMEOUT,
    )
    .map_err(|e| e.in_file(out))?;
    // A failed or interrupted write leaves nothing of its own, the lock file included.
    let written = write_shards_locked(input, dir, &stem, &index_path, groups, meta, opts);
    lock.release_and_remove();
    written
}

/// [`write_shards`] under the checkpoint's lock.
fn write_shards_locked(
    input: &Model,
    dir: &Path,
    stem: &str,
    index_path: &Path,
    groups: &[Vec<&TensorInfo>],
    meta: &BTreeMap<String, String>,
    opts: &ConvertOptions,
) -> Result<Written> {
    let write_id = write_id::new_write_id();
    let mut meta = meta.clone();
    meta.insert(write_id::WRITE_ID_KEY.to_owned(), write_id.clone());
    let meta = &meta;
    let n = groups.len();
    let mut weight_map = BTreeMap::new();
    let mut files = Vec::with_capacity(n + 1);
    let (mut bytes, mut total_size) = (0, 0);
    let mut written = Vec::with_capacity(n);
    for (i, group) in groups.iter().enumerate() {
        let name = format!("{stem}-{:05}-of-{n:05}.safetensors", i + 1);
        let path = dir.join(&name);
        let (len, file) = write_group(input, group, meta, opts, &path)?;
        bytes += len;
        written.push(file);
        for t in group {
            weight_map.insert(t.name.clone(), serde_json::Value::String(name.clone()));
            total_size += out_len(t, opts);
        }
        files.push(path);
    }
    crate::interrupt::check()?;
    let old_shards = remove_old_index(index_path)?;
    for f in written {
        f.commit()?;
    }
    let index = serde_json::json!({
        "metadata": {"total_size": total_size, write_id::WRITE_ID_KEY: write_id},
        "weight_map": weight_map,
    });
    let mut text = serde_json::to_string_pretty(&index).expect("JSON values serialize");
    text.push('\n');
    write_atomically(index_path, |f| Ok(f.write_all(text.as_bytes())?))?;
    bytes += text.len() as u64;
    // Shards of the old checkpoint that the new one does not reuse (another shard count),
    // and a single file of the same name (the other layout).
    for name in old_shards {
        if !weight_map.values().any(|v| v.as_str() == Some(&name)) {
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }
    if !crate::bytes::is_url(&dir.to_string_lossy()) {
        let _ = std::fs::remove_file(dir.join(format!("{stem}.safetensors")));
    }
    files.push(index_path.to_path_buf());
    Ok(Written { files, bytes })
}

/// After a single `NAME.safetensors` is written: a sharded checkpoint of the same name beside
/// it (`NAME.safetensors.index.json` and the shards it names) is another layout of the same
/// checkpoint, which readers disagree on; it is removed, under the checkpoint's lock.
fn remove_sharded_layout(out: &Path) -> Result<()> {
    if crate::bytes::is_url(&out.to_string_lossy()) {
        return Ok(());
    }
    let index_path = PathBuf::from(format!("{}{}", out.to_string_lossy(), ".index.json"));
    if !index_path.is_file() {
        return Ok(());
    }
    let lock = FileLock::acquire(
        &file_lock::beside(&index_path),
        file_lock::DEFAULT_LOCK_TIMEOUT,
    )?;
    let dir = out.parent().unwrap_or(Path::new("."));
    for name in remove_old_index(&index_path)? {
        if dir.join(&name) != out {
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }
    lock.release_and_remove();
    Ok(())
}

/// Removes the index of the checkpoint being rewritten (durably) and returns the shards it
/// named (plain file names only: nothing outside the folder).
fn remove_old_index(index_path: &Path) -> Result<Vec<String>> {
    let json = match std::fs::read(index_path) {
        Ok(j) => j,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(Error::from(e).in_file(index_path)),
    };
    let shards = crate::model::parse_index(&index_path.to_string_lossy(), &json)
        .map(|(_, shards)| shards)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !s.contains('/') && !s.contains('\\') && !s.starts_with('.'))
        .collect();
    std::fs::remove_file(index_path).map_err(|e| Error::from(e).in_file(index_path))?;
    if let Some(dir) = index_path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(shards)
}
