//! The report page's model: what `tensorsmith report` shows, as one JSON object
//! (`schema: "tensorsmith.report/1"`; fields are only ever added, never renamed). A summary
//! (format, files, parameters, bytes, dtypes, metadata as text) and a `tensors` array with a
//! row per tensor: name, type, shape, parameters, bytes, layout, bits per weight and the layer
//! index parsed from the name. A row carries a `stats` object when the caller has one for that
//! tensor (`tensorsmith.stats/1`'s per-tensor object); the page then shows stats columns.
//!
//! Written directly, not through a JSON tree: 100,000 rows take milliseconds.

use crate::index::{LayoutNames, MetaValue, TensorInfo};
use crate::model::Model;
use crate::ops::inspect::{bits_per_weight, dtype_totals_json, meta_item_text, meta_text};
use crate::ops::stats::json::{tensor_json, STATS_SCHEMA};
use crate::ops::stats::StatsReport;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Version tag of the page's JSON.
pub const REPORT_SCHEMA: &str = "tensorsmith.report/1";

/// Metadata arrays longer than this show their first items and their length (vocabularies).
const ARRAY_PREVIEW: usize = 16;
/// Metadata text longer than this (in chars) is cut (chat templates, configs).
const TEXT_PREVIEW: usize = 2000;

/// What goes on the page besides the model's index.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// The page's title; the model's file name when `None`.
    pub title: Option<String>,
    /// Per-tensor statistics by tensor name (each a JSON object, as `tensorsmith.stats/1`
    /// gives per tensor), attached to the rows as `stats`; `stats_schema` names their schema.
    pub stats: Option<HashMap<String, Value>>,
    /// The schema of `stats` (`tensorsmith.stats/1`).
    pub stats_schema: Option<String>,
}

impl ReportOptions {
    /// No title (the model's file name is used), no statistics.
    pub fn new() -> ReportOptions {
        ReportOptions::default()
    }

    /// The page's title, in place of the model's file name.
    pub fn with_title(mut self, title: impl Into<String>) -> ReportOptions {
        self.title = Some(title.into());
        self
    }

    /// Statistics per tensor name, under `schema`.
    pub fn with_stats(mut self, schema: &str, stats: HashMap<String, Value>) -> ReportOptions {
        self.stats_schema = Some(schema.to_owned());
        self.stats = Some(stats);
        self
    }

    /// The statistics `ops::stats` measured, each tensor's object as `tensorsmith stats
    /// --json` gives it.
    pub fn with_stats_report(self, report: &StatsReport) -> ReportOptions {
        let by_name = report
            .tensors
            .iter()
            .map(|t| (t.name.clone(), tensor_json(t)))
            .collect();
        self.with_stats(STATS_SCHEMA, by_name)
    }
}

/// The page title `opts` gives for `model`: its own, else the last part of the model's path.
pub fn page_title(model: &Model, opts: &ReportOptions) -> String {
    match &opts.title {
        Some(t) => t.clone(),
        None => {
            let l = model.location.trim_end_matches('/');
            l.rsplit('/').next().unwrap_or(l).to_owned()
        }
    }
}

/// The layer a tensor belongs to: the first all-digit part of its dotted name
/// (`model.layers.12.mlp.up_proj.weight` and `blk.12.ffn_up.weight`: 12).
pub fn layer_of(name: &str) -> Option<u64> {
    name.split('.')
        .find(|s| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
}

/// A metadata value as the page shows it: text, long arrays and strings cut.
pub fn meta_preview(v: &MetaValue) -> String {
    let text = match v {
        MetaValue::Str(s) => s.clone(),
        MetaValue::Array(items) if items.len() > ARRAY_PREVIEW => {
            let head: Vec<String> = items[..ARRAY_PREVIEW]
                .iter()
                .map(|x| cut(&meta_item_text(x), 80))
                .collect();
            return format!("[{}, …] ({} items)", head.join(", "), items.len());
        }
        other => meta_text(other),
    };
    let n = text.chars().count();
    if n > TEXT_PREVIEW {
        format!("{}… ({n} characters)", cut(&text, TEXT_PREVIEW))
    } else {
        text
    }
}

/// The first `n` chars of `s`.
fn cut(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

/// The page's JSON for `model`, as text.
pub fn report_json(model: &Model, opts: &ReportOptions) -> String {
    let ix = &model.index;
    let total_bytes: u64 = ix.tensors.iter().map(|t| t.byte_len()).sum();
    let params = ix.total_elements();
    let dtypes = dtype_totals_json(ix);
    let metadata: Map<String, Value> = ix
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(meta_preview(v))))
        .collect();
    let files: Vec<Value> = model
        .files
        .iter()
        .map(|f| json!({"name": f.name, "bytes": f.file_len}))
        .collect();
    let head = json!({
        "schema": REPORT_SCHEMA,
        "generator": concat!("tensorsmith ", env!("CARGO_PKG_VERSION")),
        "title": page_title(model, opts),
        "model": model.location,
        "format": ix.format.name(),
        "format_version": ix.format.version(),
        "file_size": model.files.iter().map(|f| f.file_len).sum::<u64>(),
        "files": files,
        "split": model.split().map(|s| json!({"count": s.count, "tensors": s.tensors})),
        "tensor_count": ix.tensors.len(),
        "parameters": params,
        "bytes": total_bytes,
        "bits_per_weight": bits_per_weight(total_bytes, params),
        "dtypes": dtypes,
        "metadata": metadata,
        "stats_schema": opts.stats_schema,
    });
    let mut out = head.to_string();
    out.pop(); // the closing brace
    out.reserve(ix.tensors.len() * 150);
    out.push_str(",\"tensors\":[");
    let sharded = model.is_sharded() || model.split().is_some();
    for (i, t) in ix.tensors.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let file = sharded.then(|| model.file_of(t).name.as_str());
        let stats = opts.stats.as_ref().and_then(|m| m.get(&t.name));
        row(&mut out, t, file, stats);
    }
    out.push_str("]}");
    out
}

/// One tensor's row.
fn row(out: &mut String, t: &TensorInfo, file: Option<&str>, stats: Option<&Value>) {
    let params = t.elements();
    let bytes = t.byte_len();
    out.push_str("{\"name\":");
    push_str_json(out, &t.name);
    let _ = write!(out, ",\"dtype\":\"{}\",\"shape\":[", t.type_name());
    for (j, d) in t.shape.iter().enumerate() {
        let _ = write!(out, "{}{d}", if j == 0 { "" } else { "," });
    }
    let _ = write!(
        out,
        "],\"parameters\":{params},\"bytes\":{bytes},\"layout\":"
    );
    push_str_json(out, &t.layout.name(LayoutNames::Python));
    out.push_str(",\"bits_per_weight\":");
    match bits_per_weight(bytes, params) {
        // Display of an f64 is its shortest round-trip form, valid JSON for finite values.
        Some(b) => {
            let _ = write!(out, "{b}");
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"layer\":");
    match layer_of(&t.name) {
        Some(l) => {
            let _ = write!(out, "{l}");
        }
        None => out.push_str("null"),
    }
    if let Some(f) = file {
        out.push_str(",\"file\":");
        push_str_json(out, f);
    }
    if let Some(s) = stats {
        out.push_str(",\"stats\":");
        out.push_str(&s.to_string());
    }
    out.push('}');
}

fn push_str_json(out: &mut String, s: &str) {
    out.push_str(&serde_json::to_string(s).expect("strings serialize"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_are_the_first_number_in_the_name() {
        assert_eq!(layer_of("model.layers.12.mlp.up_proj.weight"), Some(12));
        assert_eq!(layer_of("blk.0.attn_q.weight"), Some(0));
        assert_eq!(layer_of("model.layers.3.mlp.experts.7.w1"), Some(3));
        assert_eq!(layer_of("model.embed_tokens.weight"), None);
        assert_eq!(layer_of("x.12345678901.y"), None);
        assert_eq!(layer_of("a..b"), None);
    }

    #[test]
    fn long_metadata_is_cut() {
        let vocab = MetaValue::Array((0..1000).map(MetaValue::Int).collect());
        let p = meta_preview(&vocab);
        assert!(p.ends_with("…] (1000 items)"), "{p}");
        let long = MetaValue::Str("é".repeat(5000));
        let p = meta_preview(&long);
        assert!(p.ends_with("… (5000 characters)"));
        assert_eq!(p.chars().filter(|&c| c == 'é').count(), TEXT_PREVIEW);
        assert_eq!(meta_preview(&MetaValue::UInt(7)), "7");
    }
}
