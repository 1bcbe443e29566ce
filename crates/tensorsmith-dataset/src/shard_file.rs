//! One shard as a dataset reader sees it: its safetensors header, validated, and the bytes
//! behind it. A local shard is memory-mapped (reads are views of the map). A shard on an
//! object store is read by range through the store's `ReadAt` (`Store::open`: the first bytes
//! fetched at open hold the header; every later request is pinned to the version opened, so
//! an object replaced mid-read is `ChangedDuringRead`, never a mix): a reader moves the
//! tensors it reads and no more.
//!
//! Whole or by range is decided by the bytes a read asks for ([`ShardFile::will_read`]): a
//! read that asks for at least `1 / WHOLE_OVER` of a remote shard (most of it: every column
//! of an export, a whole shard of the Python reader) downloads the shard whole instead, once,
//! in one streamed parallel download into an unlinked temporary file (the same pinned
//! version) that is then mapped and serves every later read. The download then moves at most
//! `WHOLE_OVER` times the bytes asked for, and the reads that follow are views of the map, not
//! buffers in memory; a smaller read (one column of several) moves only its ranges.

use crate::error::{DatasetError, Result};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tensorsmith::bytes::{Backend, LocalFile, ReadAt};
use tensorsmith::index::{TensorIndex, TensorInfo};
use tensorsmith::OpenOptions;

/// A remote shard is downloaded whole when a read asks for at least `1 / WHOLE_OVER` of its
/// bytes: the download then costs at most 1.1 times what was asked.
const WHOLE_OVER: f64 = 1.1;

#[derive(Debug)]
pub struct ShardFile {
    /// How errors name the shard (a path, or the store's URL without credentials).
    path: PathBuf,
    /// The mapped file (local), or the store's ranged reader (remote).
    source: Box<dyn ReadAt>,
    remote: bool,
    index: TensorIndex,
    by_name: OnceLock<HashMap<String, usize>>,
    /// A remote shard downloaded whole (after a read of most of it), mapped.
    whole: OnceLock<LocalFile>,
}

impl ShardFile {
    /// A local shard, memory-mapped, its header validated.
    pub(crate) fn open_local(path: &Path) -> Result<ShardFile> {
        let opts = OpenOptions::new();
        let source = LocalFile::open(path, opts.backend()).map_err(|e| e.in_file(path))?;
        Self::new(path.to_path_buf(), Box::new(source), false)
    }

    /// A shard on a store: `source` is `Store::open`'s reader (its version pinned); only the
    /// header is read here, from the bytes fetched at open.
    pub(crate) fn open_remote(shown: PathBuf, source: Box<dyn ReadAt>) -> Result<ShardFile> {
        Self::new(shown, source, true)
    }

    fn new(path: PathBuf, source: Box<dyn ReadAt>, remote: bool) -> Result<ShardFile> {
        let index = tensorsmith::safetensors::read_index(&*source, &OpenOptions::new())
            .map_err(|e| e.in_file(&path))?;
        Ok(ShardFile {
            path,
            source,
            remote,
            index,
            by_name: OnceLock::new(),
            whole: OnceLock::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn index(&self) -> &TensorIndex {
        &self.index
    }

    /// The shard's length in bytes.
    pub fn len(&self) -> u64 {
        self.source.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the shard is on a store (read by range, or downloaded whole).
    pub fn is_remote(&self) -> bool {
        self.remote
    }

    /// Whether a remote shard has been downloaded whole (a read asked for most of it).
    pub fn is_downloaded(&self) -> bool {
        self.whole.get().is_some()
    }

    /// Describes a tensor, or says there is none of that name.
    pub fn info(&self, name: &str) -> Result<&TensorInfo> {
        let map = self.by_name.get_or_init(|| self.index.by_name());
        map.get(name)
            .map(|&i| &self.index.tensors[i])
            .ok_or_else(|| {
                DatasetError::Tensor(
                    tensorsmith::Error::new(tensorsmith::error::ErrorKind::NoSuchTensor)
                        .at_tensor(name)
                        .in_file(&self.path),
                )
            })
    }

    /// Tells the shard that the reads to come ask for `bytes` of it: a remote shard is then
    /// downloaded whole when that is most of it (see the module's doc), else left to ranges.
    pub fn will_read(&self, bytes: u64) -> Result<()> {
        if !self.remote || self.whole.get().is_some() || self.is_empty() {
            return Ok(());
        }
        if (bytes as f64) * WHOLE_OVER >= self.len() as f64 {
            let f = self.download()?;
            let _ = self.whole.set(f);
        }
        Ok(())
    }

    /// The bytes of `range`: a view of the map (local, or a remote shard downloaded whole), or
    /// ranged GETs of the pinned version into a new buffer.
    pub fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        let r = match self.whole.get() {
            Some(f) => f.read(range),
            None => self.source.read(range),
        };
        r.map_err(|e| DatasetError::Tensor(e.in_file(&self.path)))
    }

    /// A tensor's stored bytes.
    pub fn tensor_bytes(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        let r = self.info(name)?.data_range();
        self.read(r).map_err(|e| in_tensor(e, name))
    }

    /// The whole shard streamed into an unlinked temporary file (parallel ranged GETs of the
    /// pinned version, memory bounded by the transfer's parts), then mapped.
    fn download(&self) -> Result<LocalFile> {
        let temp = std::env::temp_dir().join(format!(
            ".tensorsmith-shard-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let io = |e| DatasetError::io(&temp, e);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(io)?;
        let _ = std::fs::remove_file(&temp);
        self.source
            .copy_to(0..self.len(), &mut file)
            .map_err(|e| DatasetError::Tensor(e.in_file(&self.path)))?;
        LocalFile::from_file(file, Backend::Mmap)
            .map_err(|e| DatasetError::Tensor(e.in_file(&self.path)))
    }
}

fn in_tensor(e: DatasetError, name: &str) -> DatasetError {
    match e {
        DatasetError::Tensor(t) => DatasetError::Tensor(t.at_tensor(name)),
        e => e,
    }
}
