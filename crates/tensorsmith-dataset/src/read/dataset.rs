//! Reading a dataset through its manifest. Batch mode (one tensor per column in every shard,
//! the first dimension the shard's samples): sample `i` is row `i` of each column, found by
//! the shards' cumulative sample counts. KV mode (one tensor per key): a tensor by key, found
//! through `_tensor_index.parquet` when it agrees with the manifest, else through the shard
//! headers. With such an index, the mode is told from it too, so a tensor by key opens its
//! own shard and no other. Shards are opened on demand and kept open (`shard_file.rs`): a
//! local one memory-mapped, one on a store read by ranged GETs pinned to the version opened
//! (only its header at open, then the tensors a read asks for, kept in a mapped sparse temp
//! file; a read of most of a shard fetches it whole in one download). A read may ask for
//! some columns only (`shard_columns`, `rows_of`): on a store, only their bytes travel.
//! A dataset is opened at one version (the current one, or one asked for) and reads that
//! version to the end: later commits retire shards, they do not delete them.

use crate::commit::versions::{self, Snapshot};
use crate::error::{DatasetError, Result};
use crate::manifest::Manifest;
use crate::store::open::open_store;
use crate::store::seam::Store;
use crate::store::versions as sv;
use crate::tensor_index_file;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tensorsmith::bytes::StorageOptions;
use tensorsmith::dtype::DType;

use crate::read::shard_file::ShardFile;

/// What a shard's open fetches from a store: a batch shard's header (a few hundred bytes a
/// column) fits, and little of its first tensor travels unasked; a larger header (KV shards)
/// costs one more ranged GET.
const SHARD_OPEN_BYTES: u64 = 4096;

/// How a dataset's rows became tensors, told from its first shard (or its index) when it is
/// opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetMode {
    /// One tensor per column in every shard, its first dimension the shard's samples: read
    /// by sample or row range.
    Batch,
    /// One tensor per row and column, named by key: read by key.
    Kv,
}

/// A column's rows as they lie in a shard: borrowed from the shard's memory map (a local
/// shard's, or the range cache of a shard on a store) when they are one contiguous run
/// (always, within a shard), gathered into a new buffer across shards.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnView<'a> {
    /// The column's name (its tensor's name in the shards).
    pub name: String,
    /// The column's dtype.
    pub dtype: DType,
    /// The rows' shape: `[rows, sample dims...]`, or the sample's dims for one sample.
    pub shape: Vec<u64>,
    /// The rows' bytes, little-endian, row after row.
    pub data: Cow<'a, [u8]>,
}

/// One tensor read from a dataset: its dtype, shape and little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// The tensor's dtype.
    pub dtype: DType,
    /// The tensor's shape.
    pub shape: Vec<u64>,
    /// The tensor's bytes, little-endian, in row-major order.
    pub data: Vec<u8>,
}

/// A dataset opened for reading at one version (the current one, or one asked for), in a
/// local folder or on an object store. Shards are opened when first read and kept open; the
/// version stays readable to the end even when later commits replace it, until a
/// `dataset clean` removes it.
pub struct Dataset {
    dir: PathBuf,
    /// The version read (0: a dataset written before versions).
    version: u64,
    manifest: Manifest,
    mode: DatasetMode,
    /// Samples before each shard (batch mode).
    starts: Vec<u64>,
    files: Vec<OnceLock<ShardFile>>,
    /// KV: tensor key to shard position.
    keys: OnceLock<HashMap<String, usize>>,
    /// `_tensor_index.parquet`, when it agrees with the manifest (every entry in one of its
    /// shards): what `keys` and the mode come from without opening a shard.
    index: Option<Vec<tensor_index_file::IndexEntry>>,
    /// Shards opened so far (for tests: which shards a read needed).
    opened: std::sync::atomic::AtomicUsize,
    /// The store of a dataset on object storage (`None`: a local folder, `dir`).
    store: Option<Box<dyn Store>>,
}

impl Dataset {
    /// Opens the current version of the dataset in `dir`.
    ///
    /// # Errors
    ///
    /// - [`DatasetError::Io`]: `dir` does not exist, or holds neither a
    ///   `dataset_manifest.json` nor versions.
    /// - [`DatasetError::Input`]: `dir` is a file.
    /// - [`DatasetError::Conflict`]: another writer (such as safetensors-spark) committed a
    ///   manifest over the current version; adopt it first.
    /// - [`DatasetError::Corrupt`]: the manifest or a version file is damaged.
    /// - [`DatasetError::Tensor`]: the first shard's header, read to tell the mode when there
    ///   is no usable index, is not valid safetensors.
    pub fn open(dir: impl AsRef<Path>) -> Result<Dataset> {
        let dir = dir.as_ref().to_path_buf();
        must_be_a_folder(&dir)?;
        match crate::commit::folder_versions::current_checked(&dir)? {
            Some(s) => Self::from_snapshot(dir, s),
            // No dataset: the manifest's own error, naming the file.
            None => Manifest::read(&dir).and_then(|_| unreachable_dataset(&dir)),
        }
    }

    /// Opens version `version` of the dataset in `dir` (while `dataset clean` keeps it).
    ///
    /// # Errors
    ///
    /// - [`DatasetError::VersionRemoved`]: `dataset clean` removed that version.
    /// - [`DatasetError::Corrupt`]: the dataset has no such version (or there is no dataset),
    ///   or the version file is damaged.
    /// - [`DatasetError::Io`]: `dir` does not exist.
    /// - [`DatasetError::Input`]: `dir` is a file.
    /// - [`DatasetError::Tensor`]: the first shard's header, read to tell the mode when there
    ///   is no usable index, is not valid safetensors.
    pub fn open_version(dir: impl AsRef<Path>, version: u64) -> Result<Dataset> {
        let dir = dir.as_ref().to_path_buf();
        must_be_a_folder(&dir)?;
        let s = Snapshot::at(&dir, version)?;
        Self::from_snapshot(dir, s)
    }

    /// Opens the dataset at `location`, a local folder or an `s3://`, `az://` or `gs://` prefix (with the
    /// settings of `storage` and the environment): the current version, or `version`. A
    /// shard on a store is opened when first read (its header, by range, its version pinned)
    /// and read by range; a read asking for most of it downloads it whole once (`ShardFile`).
    ///
    /// # Errors
    ///
    /// Those of [`Dataset::open`] and [`Dataset::open_version`], on a store as in a folder
    /// (a prefix that holds no dataset is [`DatasetError::Corrupt`]), and:
    ///
    /// - [`DatasetError::Input`]: `location` is a URL datasets do not live on (`hf://`,
    ///   `http(s)://`).
    /// - [`DatasetError::Tensor`]: the store cannot be reached or refuses access, or
    ///   `storage` holds an unknown or invalid setting.
    pub fn open_at(
        location: &str,
        storage: &StorageOptions,
        version: Option<u64>,
    ) -> Result<Dataset> {
        let Some(store) = open_store(location, storage, false)? else {
            return match version {
                Some(v) => Dataset::open_version(location, v),
                None => Dataset::open(location),
            };
        };
        let snap = match version {
            Some(v) => sv::at(&*store, v)?,
            None => sv::current_checked(&*store)?.ok_or_else(|| DatasetError::Corrupt {
                path: PathBuf::from(store.location()),
                msg: "no dataset here (no versions, no dataset_manifest.json)".into(),
            })?,
        };
        let index = sv::index_entries(&*store, &snap).ok().flatten();
        Self::with_index(PathBuf::from(store.location()), snap, index, Some(store))
    }

    fn from_snapshot(dir: PathBuf, snap: Snapshot) -> Result<Dataset> {
        let index = snap.index_entries(&dir).ok().flatten();
        Self::with_index(dir, snap, index, None)
    }

    fn with_index(
        dir: PathBuf,
        snap: Snapshot,
        index: Option<Vec<tensor_index_file::IndexEntry>>,
        store: Option<Box<dyn Store>>,
    ) -> Result<Dataset> {
        let index = index.filter(|e| {
            let shards: std::collections::HashSet<&str> = snap
                .manifest()
                .shards
                .iter()
                .map(|s| s.shard_path.as_str())
                .collect();
            !e.is_empty() && e.iter().all(|x| shards.contains(&*x.file_name))
        });
        let version = snap.version.version;
        let manifest = snap.version.manifest;
        let mut starts = Vec::with_capacity(manifest.shards.len());
        let mut n = 0u64;
        for s in &manifest.shards {
            starts.push(n);
            n += s.samples_count;
        }
        let files = manifest.shards.iter().map(|_| OnceLock::new()).collect();
        let mut d = Dataset {
            dir,
            version,
            manifest,
            mode: DatasetMode::Batch,
            starts,
            files,
            keys: OnceLock::new(),
            index,
            opened: Default::default(),
            store,
        };
        d.mode = d.detect_mode()?;
        Ok(d)
    }

    /// Batch mode when the first shard holds exactly the schema's tensors, each with the
    /// shard's sample count as first dimension; KV mode otherwise. Told from the index when
    /// there is one, else from the first shard's header.
    fn detect_mode(&self) -> Result<DatasetMode> {
        let samples = self.manifest.shards[0].samples_count;
        let first_shard = &self.manifest.shards[0].shard_path;
        let tensors: Vec<(&str, Option<u64>)> = match &self.index {
            Some(entries) => entries
                .iter()
                .filter(|e| *e.file_name == **first_shard)
                .map(|e| (e.tensor_key.as_str(), e.shape.first().copied()))
                .collect(),
            None => self
                .file(0)?
                .index()
                .tensors
                .iter()
                .map(|t| (t.name.as_str(), t.shape.first().copied()))
                .collect(),
        };
        Ok(mode_of(&self.manifest, samples, &tensors))
    }

    /// Whether the dataset is read by sample (batch mode) or by key (KV mode).
    pub fn mode(&self) -> DatasetMode {
        self.mode
    }

    /// The version this dataset reads (0: a dataset written before versions).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The manifest of the version read.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The dataset's folder, or its store location (a URL, as errors show it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Samples (batch mode) or tensors (KV mode).
    pub fn len(&self) -> Result<u64> {
        Ok(match self.mode {
            DatasetMode::Batch => self.manifest.total_samples,
            DatasetMode::Kv => self.keys()?.len() as u64,
        })
    }

    /// Whether the dataset holds no samples (batch mode) or no tensors (KV mode).
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Shard `shard` (its position in the manifest), opened on first use: its header only.
    pub fn file(&self, shard: usize) -> Result<&ShardFile> {
        if let Some(f) = self.files[shard].get() {
            return Ok(f);
        }
        let key = &self.manifest.shards[shard].shard_path;
        let f = match &self.store {
            Some(store) => store
                .open_head(key, SHARD_OPEN_BYTES)
                .and_then(|src| ShardFile::open_remote(PathBuf::from(store.show(key)), src)),
            None => ShardFile::open_local(&self.dir.join(key)),
        };
        let f = f.map_err(|e| self.removed_or(e))?;
        self.opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(self.files[shard].get_or_init(|| f))
    }

    /// `e`, or the removal error when the version read was removed by `dataset clean` (its
    /// shards gone from under it).
    pub(crate) fn removed_or(&self, e: DatasetError) -> DatasetError {
        if let DatasetError::Tensor(t) = &e {
            if matches!(t.kind(), tensorsmith::ErrorKind::ChangedDuringRead { .. }) {
                return e;
            }
        }
        match &self.store {
            Some(store) => match sv::removed_at(&**store, self.version) {
                Some(at) => DatasetError::VersionRemoved {
                    dir: PathBuf::from(store.location()),
                    version: self.version,
                    at: versions::format_utc(at),
                },
                None => e,
            },
            None => match crate::commit::folder_versions::removed_at(&self.dir, self.version) {
                Some(at) => versions::removed_error(&self.dir, self.version, at),
                None => e,
            },
        }
    }

    /// `range` of shard `shard`, its errors the removal error where the version was removed.
    fn read_shard<'a>(&self, f: &'a ShardFile, range: Range<u64>) -> Result<Cow<'a, [u8]>> {
        f.read(range).map_err(|e| self.removed_or(e))
    }

    /// How many shards this dataset has opened so far (each once): a read by key through the
    /// index opens one.
    pub fn shards_opened(&self) -> usize {
        self.opened.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Column names (batch mode), in the first shard's order.
    pub fn columns(&self) -> Result<Vec<String>> {
        Ok(self
            .file(0)?
            .index()
            .tensors
            .iter()
            .map(|t| t.name.clone())
            .collect())
    }

    /// Samples before each shard (batch mode): shard `k` holds samples
    /// `shard_starts()[k]..shard_starts()[k] + samples_count`.
    pub fn shard_starts(&self) -> &[u64] {
        &self.starts
    }

    fn batch_only(&self, what: &str) -> Result<()> {
        if self.mode != DatasetMode::Batch {
            return Err(DatasetError::input(format!(
                "{what} is for batch-mode datasets; use tensor(key)"
            )));
        }
        Ok(())
    }

    /// Rows `rows` of every column of shard `shard` (batch mode), borrowed from its map: one
    /// contiguous run per column, as shards hold samples row-major.
    pub fn shard_rows(&self, shard: usize, rows: Range<u64>) -> Result<Vec<ColumnView<'_>>> {
        self.shard_columns(shard, rows, None)
    }

    /// Rows `rows` of the columns `columns` (every column: `None`) of shard `shard` (batch
    /// mode), in the shard's column order: views of a mapped shard, or, on a store, the
    /// columns' runs read by range (the shard downloaded whole first when the runs are most of
    /// it). A column the shard lacks is an error naming it.
    pub fn shard_columns(
        &self,
        shard: usize,
        rows: Range<u64>,
        columns: Option<&[&str]>,
    ) -> Result<Vec<ColumnView<'_>>> {
        self.batch_only("shard_rows")?;
        let f = self.file(shard)?;
        if let Some(cols) = columns {
            for c in cols {
                f.info(c)?;
            }
        }
        let mut runs = Vec::with_capacity(f.index().tensors.len());
        for t in &f.index().tensors {
            if columns.is_some_and(|c| !c.contains(&t.name.as_str())) {
                continue;
            }
            let n = *t.shape.first().unwrap_or(&0);
            if rows.end > n || rows.start > rows.end {
                return Err(DatasetError::Corrupt {
                    path: f.path().to_path_buf(),
                    msg: format!(
                        "tensor '{}' has {n} samples, the manifest says {}",
                        t.name, self.manifest.shards[shard].samples_count
                    ),
                });
            }
            // Rows are contiguous: row r's bytes are [r * row_bytes, (r + 1) * row_bytes).
            let r = t.data_range();
            let row_bits = (r.end - r.start) * 8 / n.max(1);
            if row_bits % 8 != 0 {
                return Err(DatasetError::Corrupt {
                    path: f.path().to_path_buf(),
                    msg: format!(
                        "tensor '{}': a sample is not a whole number of bytes",
                        t.name
                    ),
                });
            }
            let row_bytes = row_bits / 8;
            let start = r.start + rows.start * row_bytes;
            runs.push((t, start..start + (rows.end - rows.start) * row_bytes));
        }
        // Whole or by range, by the bytes asked for (a store's shard; see `ShardFile`).
        f.will_read(runs.iter().map(|(_, r)| r.end - r.start).sum())
            .map_err(|e| self.removed_or(e))?;
        let mut out = Vec::with_capacity(runs.len());
        for (t, run) in runs {
            let mut shape = t.shape.to_vec();
            shape[0] = rows.end - rows.start;
            out.push(ColumnView {
                name: t.name.clone(),
                dtype: t.dtype,
                shape,
                data: self.read_shard(f, run)?,
            });
        }
        Ok(out)
    }

    /// Samples `range` (batch mode) as one batch per column: borrowed from the map when the
    /// range lies in one shard, gathered where it spans shards.
    pub fn rows(&self, range: Range<u64>) -> Result<Vec<ColumnView<'_>>> {
        self.rows_of(range, None)
    }

    /// As [`Dataset::rows`], of the columns `columns` only (every column: `None`): on a store,
    /// only their bytes are read.
    pub fn rows_of(
        &self,
        range: Range<u64>,
        columns: Option<&[&str]>,
    ) -> Result<Vec<ColumnView<'_>>> {
        self.batch_only("rows(a..b)")?;
        let total = self.manifest.total_samples;
        if range.start > range.end || range.end > total {
            return Err(DatasetError::input(format!(
                "rows {}..{} are out of range: the dataset has {total}",
                range.start, range.end
            )));
        }
        if range.is_empty() {
            let mut cols = self.shard_columns(0, 0..0, columns)?;
            for c in &mut cols {
                c.data = Cow::Owned(Vec::new());
            }
            return Ok(cols);
        }
        let first = self.starts.partition_point(|&s| s <= range.start) - 1;
        let mut out: Option<Vec<ColumnView<'_>>> = None;
        let mut shard = first;
        while shard < self.starts.len() && self.starts[shard] < range.end {
            let s = self.starts[shard];
            let n = self.manifest.shards[shard].samples_count;
            let local = range.start.max(s) - s..range.end.min(s + n) - s;
            let part = self.shard_columns(shard, local.clone(), columns)?;
            out = Some(match out {
                None => part,
                Some(mut acc) => {
                    for (a, p) in acc.iter_mut().zip(part) {
                        a.data.to_mut().extend_from_slice(&p.data);
                        a.shape[0] += local.end - local.start;
                    }
                    acc
                }
            });
            shard += 1;
        }
        Ok(out.unwrap_or_default())
    }

    /// Sample `i` (batch mode): one view per column, without the batch dimension, borrowed
    /// from the shard's map.
    pub fn sample_view(&self, i: u64) -> Result<Vec<ColumnView<'_>>> {
        self.batch_only("sample(i)")?;
        if i >= self.manifest.total_samples {
            return Err(DatasetError::input(format!(
                "sample {i} is out of range: the dataset has {}",
                self.manifest.total_samples
            )));
        }
        let mut cols = self.rows(i..i + 1)?;
        for c in &mut cols {
            c.shape.remove(0);
        }
        Ok(cols)
    }

    /// Sample `i` (batch mode): one tensor per column, without the batch dimension (owned; see
    /// [`Dataset::sample_view`] for the zero-copy form).
    pub fn sample(&self, i: u64) -> Result<Vec<(String, Tensor)>> {
        Ok(self
            .sample_view(i)?
            .into_iter()
            .map(|c| {
                (
                    c.name,
                    Tensor {
                        dtype: c.dtype,
                        shape: c.shape,
                        data: c.data.into_owned(),
                    },
                )
            })
            .collect())
    }

    fn keys(&self) -> Result<&HashMap<String, usize>> {
        if let Some(k) = self.keys.get() {
            return Ok(k);
        }
        let pos: HashMap<&str, usize> = self
            .manifest
            .shards
            .iter()
            .enumerate()
            .map(|(i, s)| (s.shard_path.as_str(), i))
            .collect();
        let mut keys = HashMap::new();
        match &self.index {
            Some(entries) => {
                for e in entries {
                    keys.insert(e.tensor_key.clone(), pos[&*e.file_name]);
                }
            }
            None => {
                for i in 0..self.manifest.shards.len() {
                    for t in &self.file(i)?.index().tensors {
                        keys.insert(t.name.clone(), i);
                    }
                }
            }
        }
        Ok(self.keys.get_or_init(|| keys))
    }

    /// The shard (its position in the manifest) holding each tensor key (KV mode): from the
    /// index when it agrees with the manifest, else from every shard's header.
    pub fn key_shards(&self) -> Result<&HashMap<String, usize>> {
        self.keys()
    }

    /// Tensor keys (KV mode), sorted.
    pub fn tensor_keys(&self) -> Result<Vec<String>> {
        let mut k: Vec<String> = self.keys()?.keys().cloned().collect();
        k.sort();
        Ok(k)
    }

    /// A tensor by key (KV mode): on a store, its bytes alone are read by range (unless
    /// [`Dataset::will_read_keys`] had its shard downloaded whole).
    pub fn tensor(&self, key: &str) -> Result<Tensor> {
        let shard = *self
            .keys()?
            .get(key)
            .ok_or_else(|| DatasetError::NoSuchKey(key.to_string()))?;
        let f = self.file(shard)?;
        let t = f.info(key)?;
        Ok(Tensor {
            dtype: t.dtype,
            shape: t.shape.to_vec(),
            data: self.read_shard(f, t.data_range())?.into_owned(),
        })
    }

    /// Tells the shards holding `keys` (KV mode) that those tensors are about to be read one
    /// by one: a shard on a store of which they are most is downloaded whole once, instead of
    /// a ranged GET per tensor (`ShardFile::will_read`). Unknown keys are left to `tensor`.
    pub fn will_read_keys(&self, keys: &[String]) -> Result<()> {
        let at = self.keys()?;
        let mut asked: HashMap<usize, u64> = HashMap::new();
        for k in keys {
            if let Some(&s) = at.get(k) {
                let r = self.file(s)?.info(k)?.data_range();
                *asked.entry(s).or_default() += r.end - r.start;
            }
        }
        for (s, bytes) in asked {
            self.file(s)?
                .will_read(bytes)
                .map_err(|e| self.removed_or(e))?;
        }
        Ok(())
    }
}

/// Batch mode when the first shard (of `samples` samples) holds exactly the schema's
/// tensors (name, first dimension), each with the shard's sample count first; else KV.
pub(crate) fn mode_of(m: &Manifest, samples: u64, tensors: &[(&str, Option<u64>)]) -> DatasetMode {
    let batch = !m.schema.is_empty()
        && tensors.len() == m.schema.len()
        && tensors
            .iter()
            .all(|(name, first)| m.schema.contains_key(*name) && *first == Some(samples));
    if batch {
        DatasetMode::Batch
    } else {
        DatasetMode::Kv
    }
}

fn unreachable_dataset(dir: &Path) -> Result<Dataset> {
    Err(DatasetError::input(format!(
        "{}: holds no dataset",
        dir.display()
    )))
}

/// A dataset is a folder: a missing one is "no such folder" (not a missing manifest inside
/// it), and a file is named as not a dataset.
fn must_be_a_folder(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(DatasetError::input(format!(
            "{}: a file, not a dataset (a dataset is a folder holding dataset_manifest.json)",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(DatasetError::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such dataset folder"),
        )),
        Err(e) => Err(DatasetError::io(dir, e)),
    }
}
