//! What one task wrote, as the commit receives it (from executor to driver as JSON in a
//! Spark job): shards, index entries, sample dtypes and shapes, rows read; no tensor data.
//! Filled in by the task's shard recording (shard_record.rs), read by duplicates and commit.

use crate::error::{DatasetError, Result};
use crate::manifest::{ShardInfo, TensorSchema};
use crate::tensor_index_file::IndexEntry;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// KV mode, inside the writing process only (never sent): the input row and column of
    /// each `index` entry, in step with it: the key list duplicates are resolved from.
    #[serde(skip)]
    pub(crate) cells: Vec<(u64, u32)>,
    /// KV `fail`: a key repeated within the shard being filled, where the task stopped
    /// (key, first row, second row, column), for `kv_resolve` to weigh against the repeats
    /// between shards that come before it.
    #[serde(skip)]
    pub(crate) repeat: Option<(String, u64, u64, u32)>,
}

impl TaskReport {
    /// The report as JSON, to send from the task that wrote it to the one that commits.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("serializable")
    }

    /// A report read back from [`to_json`](Self::to_json)'s text.
    ///
    /// # Errors
    ///
    /// - [`DatasetError::Input`]: `text` is not a task report's JSON.
    pub fn from_json(text: &[u8]) -> Result<TaskReport> {
        serde_json::from_slice(text)
            .map_err(|e| DatasetError::input(format!("not a task report: {e}")))
    }
}

pub(crate) fn new_report(task: u64) -> TaskReport {
    TaskReport {
        task,
        ..Default::default()
    }
}
