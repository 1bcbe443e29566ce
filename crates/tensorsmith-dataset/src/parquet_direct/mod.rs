//! Batch-mode writes straight from Parquet pages. A list column of numbers stored PLAIN and
//! uncompressed, every row of one length and no nulls, already holds a batch's tensor bytes:
//! its pages' values, back to back, are the rows in order, little-endian as safetensors wants
//! them. When the target dtype is the column's own, a shard is its header followed by
//! file-to-file copies of those page ranges (copy_file_range on Linux): no decoding, no
//! buffers, the bytes never enter this process.
//!
//! `plan` reads the page headers and levels of the column chunks a task covers (chunk.rs)
//! and answers `None` whenever anything is otherwise, before a byte is written: the task then
//! runs through the Parquet reader (batch_strategy.rs), which converts, pads and reports
//! errors by row. `page_plan.rs` is the plan, `shard_copy.rs` writes its shards.

mod chunk;
mod levels;
mod page_plan;
mod shard_copy;

pub(crate) use page_plan::plan;
pub(crate) use shard_copy::batch_task;
