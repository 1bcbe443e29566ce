//! `report`: one self-contained HTML page about a model (summary, treemap of parameters,
//! bits per weight by layer, a table of every tensor), written atomically. The page's data
//! is `report_data`'s JSON; its HTML, style and script are `report_page`'s.

use crate::error::Result;
use crate::model::Model;
pub use crate::ops::report::data::{report_json, ReportOptions, REPORT_SCHEMA};
use std::io::Write as _;
use std::path::Path;

/// The page for `model`, as HTML text.
pub fn report_html(model: &Model, opts: &ReportOptions) -> String {
    let title = crate::ops::report::data::page_title(model, opts);
    crate::ops::report::page::render(&title, &report_json(model, opts))
}

/// Writes the page for `model` to `out` (a temporary file renamed into place: an existing
/// `out` is replaced whole or not at all). Returns the page's length in bytes.
pub fn write_report(model: &Model, out: &Path, opts: &ReportOptions) -> Result<u64> {
    let html = report_html(model, opts);
    crate::sink::write_atomically(out, |f| {
        f.write_all(html.as_bytes())?;
        Ok(html.len() as u64)
    })
}
