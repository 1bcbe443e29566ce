//! Operations written once against the neutral index and the [`crate::Model`]: inspect
//! (summaries and a stable JSON form), hash, diff, convert, densify, verify, value
//! statistics and the HTML report page. Each command with more than one file has a folder;
//! the folder's module is the command's API (its `run.rs` re-exported), its other files the
//! parts.
pub mod convert;
pub mod diff;
pub mod hash;
pub mod inspect;
pub mod name_glob;
pub mod report;
pub mod stats;
pub mod tree;
pub mod verify;
pub use crate::model::write_id;

// The paths these modules had before they moved into folders, kept for callers.
#[doc(hidden)]
pub use convert::{densify, dequantize, skip as convert_skip};
#[doc(hidden)]
pub use diff::{
    json as diff_json, llama as diff_llama, metrics as diff_metrics, page as diff_page,
    pairing as diff_pairing,
};
#[doc(hidden)]
pub use hash::wi_hash;
#[doc(hidden)]
pub use report::data as report_data;
#[doc(hidden)]
pub use stats::{check as stats_check, fp_fit, json as stats_json};
