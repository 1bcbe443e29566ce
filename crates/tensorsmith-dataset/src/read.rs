//! Reading a dataset through its manifest. Batch mode (one tensor per column in every shard,
//! the first dimension the shard's samples): sample `i` is row `i` of each column, found by
//! the shards' cumulative sample counts. KV mode (one tensor per key): a tensor by key, found
//! through `_tensor_index.parquet` when it agrees with the manifest, else through the shard
//! headers. Shards are opened (and memory-mapped) on demand and kept open.

use crate::error::{DatasetError, Result};
use crate::manifest::{Manifest, INDEX_NAME};
use crate::tensor_index_file;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::SafetensorsFile;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetMode {
    Batch,
    Kv,
}

/// One tensor read from a dataset: its dtype, shape and little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
}

pub struct Dataset {
    dir: PathBuf,
    manifest: Manifest,
    mode: DatasetMode,
    /// Samples before each shard (batch mode).
    starts: Vec<u64>,
    files: Vec<OnceLock<SafetensorsFile>>,
    /// KV: tensor key to shard position.
    keys: OnceLock<HashMap<String, usize>>,
}

impl Dataset {
    pub fn open(dir: impl AsRef<Path>) -> Result<Dataset> {
        let dir = dir.as_ref().to_path_buf();
        let manifest = Manifest::read(&dir)?;
        let mut starts = Vec::with_capacity(manifest.shards.len());
        let mut n = 0u64;
        for s in &manifest.shards {
            starts.push(n);
            n += s.samples_count;
        }
        let files = manifest.shards.iter().map(|_| OnceLock::new()).collect();
        let mut d = Dataset {
            dir,
            manifest,
            mode: DatasetMode::Batch,
            starts,
            files,
            keys: OnceLock::new(),
        };
        d.mode = d.detect_mode()?;
        Ok(d)
    }

    /// Batch mode when the first shard holds exactly the schema's tensors, each with the
    /// shard's sample count as first dimension; KV mode otherwise.
    fn detect_mode(&self) -> Result<DatasetMode> {
        let first = self.file(0)?;
        let samples = self.manifest.shards[0].samples_count;
        let idx = first.index();
        let batch = !self.manifest.schema.is_empty()
            && idx.tensors.len() == self.manifest.schema.len()
            && idx.tensors.iter().all(|t| {
                self.manifest.schema.contains_key(&t.name) && t.shape.first() == Some(&samples)
            });
        Ok(if batch {
            DatasetMode::Batch
        } else {
            DatasetMode::Kv
        })
    }

    pub fn mode(&self) -> DatasetMode {
        self.mode
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

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

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    pub fn file(&self, shard: usize) -> Result<&SafetensorsFile> {
        if let Some(f) = self.files[shard].get() {
            return Ok(f);
        }
        let f = SafetensorsFile::open(self.dir.join(&self.manifest.shards[shard].shard_path))?;
        Ok(self.files[shard].get_or_init(|| f))
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

    /// Sample `i` (batch mode): one tensor per column, without the batch dimension.
    pub fn sample(&self, i: u64) -> Result<Vec<(String, Tensor)>> {
        if self.mode != DatasetMode::Batch {
            return Err(DatasetError::input(
                "sample(i) is for batch-mode datasets; use tensor(key)",
            ));
        }
        if i >= self.manifest.total_samples {
            return Err(DatasetError::input(format!(
                "sample {i} is out of range: the dataset has {}",
                self.manifest.total_samples
            )));
        }
        let shard = self.starts.partition_point(|&s| s <= i) - 1;
        let row = i - self.starts[shard];
        let f = self.file(shard)?;
        let mut out = Vec::new();
        for t in &f.index().tensors {
            let n = *t.shape.first().unwrap_or(&0);
            if row >= n {
                return Err(DatasetError::Corrupt {
                    path: f.path().to_path_buf(),
                    msg: format!(
                        "tensor '{}' has {n} samples, the manifest says {}",
                        t.name, self.manifest.shards[shard].samples_count
                    ),
                });
            }
            let view = f.tensor(&t.name)?;
            let rows = row..row + 1;
            let (shape, bytes) = view.slice(std::slice::from_ref(&rows))?;
            out.push((
                t.name.clone(),
                Tensor {
                    dtype: t.dtype,
                    shape: shape[1..].to_vec(),
                    data: bytes.into_owned(),
                },
            ));
        }
        Ok(out)
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
        // The index, when every entry points at a shard of this manifest; else the headers.
        let from_index = tensor_index_file::read(&self.dir.join(INDEX_NAME))
            .ok()
            .filter(|e| !e.is_empty() && e.iter().all(|x| pos.contains_key(x.file_name.as_str())));
        match from_index {
            Some(entries) => {
                for e in entries {
                    keys.insert(e.tensor_key, pos[e.file_name.as_str()]);
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

    /// Tensor keys (KV mode), sorted.
    pub fn tensor_keys(&self) -> Result<Vec<String>> {
        let mut k: Vec<String> = self.keys()?.keys().cloned().collect();
        k.sort();
        Ok(k)
    }

    /// A tensor by key (KV mode).
    pub fn tensor(&self, key: &str) -> Result<Tensor> {
        let shard = *self
            .keys()?
            .get(key)
            .ok_or_else(|| DatasetError::input(format!("no tensor '{key}' in the dataset")))?;
        let f = self.file(shard)?;
        let t = f.info(key)?;
        Ok(Tensor {
            dtype: t.dtype,
            shape: t.shape.to_vec(),
            data: f.tensor(key)?.bytes().to_vec(),
        })
    }
}
