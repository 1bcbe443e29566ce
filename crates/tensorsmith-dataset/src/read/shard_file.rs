//! One shard as a dataset reader sees it: its safetensors header, validated, and the bytes
//! behind it. A local shard is memory-mapped (reads are views of the map). A shard on an
//! object store is read by range through the store's `ReadAt` (`Store::open_head`: the first
//! bytes fetched at open hold the header; every later request is pinned to the version
//! opened, so an object replaced mid-read is `ChangedDuringRead`, never a mix): a reader
//! moves the tensors it reads and no more. What was read is kept on disk (`RangeCache`: a
//! sparse unlinked temporary file, mapped), so reads are views as of a local shard, memory
//! holds no shard, and a range read again moves nothing.
//!
//! Whole or by range is decided by the bytes a read asks for ([`ShardFile::will_read`]): a
//! read that asks for at least `1 / WHOLE_OVER` of a remote shard (most of it: every column
//! of an export, a whole shard of the Python reader) fetches the whole shard (what is not
//! held yet) in one streamed parallel download rather than as its runs; that moves at most
//! `WHOLE_OVER` times the bytes asked for. A smaller read (one column of several) moves only
//! its ranges.

use crate::error::{DatasetError, Result};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::read::range_cache::RangeCache;
use tensorsmith::bytes::{LocalFile, ReadAt};
use tensorsmith::index::{TensorIndex, TensorInfo};
use tensorsmith::OpenOptions;

/// A remote shard is fetched whole when a read asks for at least `1 / WHOLE_OVER` of its
/// bytes: the download then costs at most 1.1 times what was asked.
const WHOLE_OVER: f64 = 1.1;

/// One safetensors shard of a dataset, opened by [`Dataset::file`](crate::Dataset::file):
/// its validated header, and its bytes (a local file memory-mapped, or an object on a store
/// read by range, its version pinned).
#[derive(Debug)]
pub struct ShardFile {
    /// How errors name the shard (a path, or the store's URL without credentials).
    path: PathBuf,
    /// The mapped file (local), or the store's ranged reader (remote).
    source: Box<dyn ReadAt>,
    remote: bool,
    index: TensorIndex,
    by_name: OnceLock<HashMap<String, usize>>,
    /// A remote shard's ranges read so far, on disk (made at the first read past the header).
    cache: OnceLock<RangeCache>,
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
            cache: OnceLock::new(),
        })
    }

    /// The shard as errors name it: its local path, or its URL without credentials.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The shard's header: its tensors (name, dtype, shape, byte range) and metadata.
    pub fn index(&self) -> &TensorIndex {
        &self.index
    }

    /// The shard's length in bytes.
    pub fn len(&self) -> u64 {
        self.source.len()
    }

    /// Whether the shard has no bytes (never true of a valid shard, which has at least its
    /// header).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the shard is on a store (read by range, or downloaded whole).
    pub fn is_remote(&self) -> bool {
        self.remote
    }

    /// Whether a remote shard is held whole (read whole, or every byte of it read).
    pub fn is_downloaded(&self) -> bool {
        self.remote && self.bytes_held() == self.len()
    }

    /// Bytes of a remote shard read so far and kept (0 for a local shard).
    pub fn bytes_held(&self) -> u64 {
        self.cache.get().map_or(0, RangeCache::held)
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
    /// fetched whole when that is most of it (see the module's doc), else left to ranges.
    pub fn will_read(&self, bytes: u64) -> Result<()> {
        if self.remote && !self.is_empty() && (bytes as f64) * WHOLE_OVER >= self.len() as f64 {
            self.read(0..self.len())?;
        }
        Ok(())
    }

    /// The bytes of `range`: a view of the map (a local shard), or of the remote shard's
    /// range cache, fetched first by ranged GETs of the pinned version where not held.
    pub fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        let r = if self.remote {
            self.cache().and_then(|c| {
                c.read(&*self.source, range)
                    .map(Cow::Borrowed)
                    .map_err(DatasetError::Tensor)
            })
        } else {
            self.source.read(range).map_err(DatasetError::Tensor)
        };
        r.map_err(|e| match e {
            DatasetError::Tensor(t) => DatasetError::Tensor(t.in_file(&self.path)),
            e => e,
        })
    }

    /// A tensor's stored bytes.
    pub fn tensor_bytes(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        let r = self.info(name)?.data_range();
        self.read(r).map_err(|e| in_tensor(e, name))
    }

    fn cache(&self) -> Result<&RangeCache> {
        if let Some(c) = self.cache.get() {
            return Ok(c);
        }
        let c = RangeCache::new(self.len())?;
        Ok(self.cache.get_or_init(|| c))
    }
}

fn in_tensor(e: DatasetError, name: &str) -> DatasetError {
    match e {
        DatasetError::Tensor(t) => DatasetError::Tensor(t.at_tensor(name)),
        e => e,
    }
}
