//! `dataset_manifest.json` (schemas/manifest-jsonschema.json): totals computed from what was
//! written (total_bytes = shard file sizes), shards sorted by path, `schema` keyed by column
//! (batch mode, batch dimension included) or by tensor key (KV mode).

use crate::error::{DatasetError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const MANIFEST_NAME: &str = "dataset_manifest.json";
pub const INDEX_NAME: &str = "_tensor_index.parquet";
/// Largest manifest read (a million shards take about 200 MB).
pub const MAX_MANIFEST_LEN: u64 = 1 << 30;

/// One shard as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// The shard's file name in the dataset folder (a plain `.safetensors` name, no folders).
    pub shard_path: String,
    /// The samples (input rows) the shard holds.
    pub samples_count: u64,
    /// The shard file's length in bytes.
    pub bytes: u64,
    /// For shards written with the `digest` option: XXH3-64 of the shard's per-tensor digest
    /// record (`tensorsmith.digest`), pinning the shard's content to the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_digest: Option<String>,
}

/// The manifest's `content_digest` of a shard's header metadata: `None` when the shard records
/// no digests.
pub fn content_digest_of(meta: &BTreeMap<String, tensorsmith::index::MetaValue>) -> Option<String> {
    use tensorsmith::digest::{compute, spell, DigestKind};
    match meta.get(tensorsmith::safetensors::digest_record::DIGEST_KEY)? {
        tensorsmith::index::MetaValue::Str(record) => {
            Some(spell(&compute(DigestKind::Xxh3, record.as_bytes())))
        }
        _ => None,
    }
}

/// `content_digest_of` a shard file.
pub fn shard_content_digest(path: &Path) -> Result<Option<String>> {
    let f = tensorsmith::safetensors::SafetensorsFile::open(path)?;
    Ok(content_digest_of(f.metadata()))
}

/// The dtype and shape of one column's tensors (batch mode) or of one key's tensor (KV mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSchema {
    /// The safetensors dtype name (`F32`, `BF16`, `I64`, …).
    pub dtype: String,
    /// The shape. In a manifest's batch-mode schema it starts with the batch dimension (the
    /// batch size); in a task report's samples it is one sample's, without it.
    pub shape: Vec<u64>,
}

/// A dataset's `dataset_manifest.json`: its shards, their totals, and the schema of its
/// tensors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The layout's version; only `1.0` is known.
    pub format_version: String,
    /// The safetensors format version of the shards; only `1.0` is known.
    pub safetensors_version: String,
    /// The samples (input rows) of all shards together.
    pub total_samples: u64,
    /// The bytes of all shard files together.
    pub total_bytes: u64,
    /// The shards in row order: sorted by `shard_path` within one write (its paths sort in
    /// input order), an append's after the shards it was appended to.
    pub shards: Vec<ShardInfo>,
    /// Per column (batch mode) or per tensor key (KV mode): the dtype and shape; empty, and
    /// left out of the JSON, when the writer recorded none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub schema: BTreeMap<String, TensorSchema>,
}

/// A shard path that is a plain `.safetensors` file name in the dataset folder (nothing a
/// manifest or a task report names can point elsewhere).
pub fn is_shard_file_name(n: &str) -> bool {
    n.ends_with(".safetensors") && !n.contains('/') && !n.contains('\\') && !n.starts_with('.')
}

/// An index file's name in `_tensorsmith/index/` (a plain `.parquet` file name).
pub fn is_index_file_name(n: &str) -> bool {
    n.ends_with(".parquet") && !n.contains('/') && !n.contains('\\') && !n.starts_with('.')
}

impl Manifest {
    /// A manifest over `shards` (sorted here) with totals computed from them.
    pub fn new(mut shards: Vec<ShardInfo>, schema: BTreeMap<String, TensorSchema>) -> Manifest {
        shards.sort_by(|a, b| a.shard_path.cmp(&b.shard_path));
        Manifest::in_order(shards, schema)
    }

    /// A manifest over `shards` in the order given (an append: the base's shards, then the
    /// write's), with totals computed from them.
    pub fn in_order(shards: Vec<ShardInfo>, schema: BTreeMap<String, TensorSchema>) -> Manifest {
        Manifest {
            format_version: "1.0".into(),
            safetensors_version: "1.0".into(),
            total_samples: shards.iter().map(|s| s.samples_count).sum(),
            total_bytes: shards.iter().map(|s| s.bytes).sum(),
            shards,
            schema,
        }
    }

    /// Reads and checks `dataset_manifest.json` in the folder `dir`.
    ///
    /// # Errors
    ///
    /// - [`DatasetError::Io`]: the file does not exist or cannot be read.
    /// - [`DatasetError::Corrupt`]: it is over 1 GiB, not a manifest, of an unknown format
    ///   version, lists no shards or a shard path outside the folder, or has totals that do
    ///   not match its shards.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST_NAME);
        let meta = std::fs::metadata(&path).map_err(|e| DatasetError::io(&path, e))?;
        if meta.len() > MAX_MANIFEST_LEN {
            return Err(DatasetError::Corrupt {
                path,
                msg: format!(
                    "{} bytes, over the {MAX_MANIFEST_LEN}-byte limit for a manifest",
                    meta.len()
                ),
            });
        }
        let text = std::fs::read(&path).map_err(|e| DatasetError::io(&path, e))?;
        Self::parse(&text, &path)
    }

    /// Parses and checks manifest bytes; `path` is named in errors.
    pub fn parse(text: &[u8], path: &Path) -> Result<Manifest> {
        let path = path.to_path_buf();
        let m: Manifest = serde_json::from_slice(text).map_err(|e| DatasetError::Corrupt {
            path: path.clone(),
            msg: format!("not a dataset manifest: {e}"),
        })?;
        let bad = |msg: String| DatasetError::Corrupt {
            path: path.clone(),
            msg,
        };
        if m.format_version != "1.0" || m.safetensors_version != "1.0" {
            return Err(bad(format!(
                "format_version {} / safetensors_version {}: only 1.0 is known",
                m.format_version, m.safetensors_version
            )));
        }
        if m.shards.is_empty() {
            return Err(bad("lists no shards".into()));
        }
        for s in &m.shards {
            if !is_shard_file_name(&s.shard_path) {
                return Err(bad(format!(
                    "shard path '{}' is not a file name in the dataset folder",
                    s.shard_path
                )));
            }
        }
        let sum =
            |f: fn(&ShardInfo) -> u64| m.shards.iter().try_fold(0u64, |a, s| a.checked_add(f(s)));
        if sum(|s| s.samples_count) != Some(m.total_samples)
            || sum(|s| s.bytes) != Some(m.total_bytes)
        {
            return Err(bad("totals do not match the shard list".into()));
        }
        Ok(m)
    }

    /// The manifest as pretty-printed JSON with a final newline, as the writers store it.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("serializable");
        s.push('\n');
        s
    }
}
