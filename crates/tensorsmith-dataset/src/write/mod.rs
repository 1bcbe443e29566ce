//! Writing a dataset: the plan, tasks and their ranges, shards and their records, the
//! batch strategy and duplicates, the job API (start, tasks, commit, abort) and
//! `write_dataset`.

pub(crate) mod batch_strategy;
pub(crate) mod duplicates;
pub(crate) mod entry;
pub(crate) mod job;
pub(crate) mod job_at;
pub(crate) mod job_options;
pub(crate) mod plan;
pub(crate) mod shard_pipe;
pub(crate) mod shard_record;
pub(crate) mod task;
pub(crate) mod task_at;
pub(crate) mod task_context;
pub(crate) mod task_ranges;
pub(crate) mod task_report;
