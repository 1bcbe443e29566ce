//! Batch-mode writes straight from Parquet pages. A list column of numbers, every row of one
//! length and no nulls, already holds a batch's tensor values in its pages, the rows in
//! order. Stored PLAIN and uncompressed, in the target dtype, they are the shard's bytes: a
//! shard is its header followed by file-to-file copies of those page ranges (copy_file_range
//! on Linux), the bytes never entering this process. Compressed (snappy, gzip, zstd, LZ4) or
//! dictionary-encoded pages, or values cast to another dtype, are decoded straight into the
//! shard as it is written, a page at a time, never through Arrow arrays.
//!
//! `plan` reads the page headers, levels and dictionaries of the column chunks a task covers
//! (chunk.rs) and answers `None` whenever anything is otherwise, before a byte is written:
//! the task then runs through the Parquet reader (batch_strategy.rs), which converts, pads
//! and reports errors by row. A corrupt page (CRC, compressed bytes, values short of the
//! levels) is an error naming file, column and page. Bottom-up: `levels.rs`,
//! `page_codec.rs`, `value_cast.rs`, `dict_indices.rs`, `page_crc.rs` (also the reader
//! path's CRC check), `chunk.rs`, `page_plan.rs`, `page_cursor.rs`, `shard_copy.rs`.

mod chunk;
mod dict_indices;
mod levels;
mod page_codec;
mod page_crc;
mod page_cursor;
mod page_plan;
mod shard_copy;
mod value_cast;

pub(crate) use page_crc::check_range;
pub(crate) use page_plan::plan;
pub(crate) use shard_copy::batch_task;
