//! One task of a distributed job or of a store write, as it writes: its rows into a staging
//! folder as shards, KV duplicates within the task resolved (store_job.rs moves or uploads
//! each finished shard).

use crate::error::Result;
use crate::input::files::Input;
use crate::kv::resolve;
use crate::options::{Naming, WriteOptions};
use crate::write::job_options::Progress;
use crate::write::plan::Plan;
use crate::write::task::run_task;
use crate::write::task_context::with_ctx;
use crate::write::task_report::TaskReport;
use std::ops::Range;
use std::path::Path;

/// Where and how one task of a job writes: its shards into `staging` (each handed to
/// `on_shard` once complete, when set).
pub(crate) struct TaskAt<'a> {
    pub plan: &'a Plan,
    pub input: &'a Input,
    pub opts: &'a WriteOptions,
    pub staging: &'a Path,
    pub progress: &'a Progress,
    pub pipelined: bool,
    pub on_shard: Option<&'a (dyn Fn(&str) + Sync)>,
}

impl TaskAt<'_> {
    /// Rows `rows` of the input as task `task`: shards into staging, KV duplicates within
    /// the task resolved.
    pub(crate) fn run(&self, task: u64, rows: Range<u64>) -> Result<TaskReport> {
        with_ctx(
            self.plan,
            self.input,
            self.opts,
            self.staging,
            self.progress,
            true,
            self.pipelined,
            self.on_shard,
            |ctx| {
                let mut report = run_task(ctx, task, rows)?;
                if let Naming::Kv { .. } = self.opts.naming {
                    resolve::resolve(ctx, std::slice::from_mut(&mut report))?;
                }
                Ok(report)
            },
        )
    }
}
