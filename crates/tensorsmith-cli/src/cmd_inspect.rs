//! `tensorsmith inspect FILE`: a human summary, or the stable JSON document with `--json`.

use crate::render::{
    count, grouped, human_bytes, pad_right, printable, size_with_bytes, width, NAME_COLUMN_MAX,
};
use crate::{fail, OpenArgs, EXIT_OK};
use clap::Args;
use std::fmt::Write as _;
use std::path::PathBuf;
use tensorsmith::index::MetaValue;
use tensorsmith::ops::inspect::{bits_per_weight, inspect_json_text, meta_item_text, meta_text};

/// Array metadata longer than this shows its first items and its length (vocabularies).
const ARRAY_PREVIEW: usize = 8;
use tensorsmith::Model;

#[derive(Args)]
pub struct InspectArgs {
    /// A model: a file of any format, a sharded checkpoint (its folder or index), a part of a
    /// split GGUF, an http(s)://, s3://, az://, gs:// or hf:// URL (only the header is
    /// fetched, by range requests), a pipe (/dev/stdin) or - for stdin (read whole into a
    /// temporary file first).
    #[arg(value_name = "MODEL")]
    file: PathBuf,
    /// Print the machine-readable form (schema "tensorsmith.inspect/1").
    #[arg(long, conflicts_with_all = ["tree", "pretty_metadata"])]
    json: bool,
    /// List tensors grouped by dotted name prefix, with counts and sizes per group.
    #[arg(long)]
    tree: bool,
    /// Pretty-print metadata strings that hold JSON (configs, tokenizer settings).
    #[arg(long)]
    pretty_metadata: bool,
    #[command(flatten)]
    open: OpenArgs,
}

pub fn run(a: &InspectArgs) -> u8 {
    // A URL is read with HTTP range requests (the header only); a path is opened; the format
    // is told by the first bytes.
    let model = match crate::input_arg::open_input(a.file.as_os_str(), &a.open.open_options()) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    let out = if a.json {
        inspect_json_text(&a.file, &model)
    } else {
        text(&a.file, &model, a)
    };
    out!("{out}");
    EXIT_OK
}

fn text(path: &std::path::Path, model: &Model, a: &InspectArgs) -> String {
    let ix = &model.index;
    let mut s = String::new();
    let total_bytes: u64 = ix.tensors.iter().map(|t| t.byte_len()).sum();
    let _ = writeln!(s, "file:        {}", crate::shown(path));
    match ix.format.version() {
        Some(v) => {
            let _ = writeln!(s, "format:      {} (version {v})", ix.format.name());
        }
        None => {
            let _ = writeln!(s, "format:      {}", ix.format.name());
        }
    }
    let _ = writeln!(s, "size:        {}", size_with_bytes(ix.file_len));
    let _ = writeln!(s, "header:      {} bytes", grouped(ix.header_len));
    if let Some(split) = model.split() {
        let _ = writeln!(
            s,
            "split:       {}, {} (split.count, split.tensors.count)",
            count(split.count, "part"),
            count(split.tensors, "tensor")
        );
        for (i, f) in model.files.iter().enumerate() {
            let n = ix
                .tensors
                .iter()
                .filter(|t| std::ptr::eq(model.file_of(t), f))
                .count();
            let _ = writeln!(
                s,
                "  part {}:    {} ({}, {})",
                i + 1,
                printable(&f.name),
                count(n, "tensor"),
                human_bytes(f.file_len)
            );
        }
    } else if model.is_sharded() {
        let _ = writeln!(s, "shards:      {}", model.files.len());
    }
    let _ = writeln!(s, "tensors:     {}", grouped(ix.tensors.len() as u64));
    let _ = writeln!(s, "parameters:  {}", grouped(ix.total_elements()));
    let _ = writeln!(s, "data:        {}", human_bytes(total_bytes));
    if !ix.tensors.is_empty() {
        let _ = writeln!(s, "\nby dtype:");
        let _ = writeln!(
            s,
            "  {:<12} {:>8} {:>16} {:>12} {:>6}",
            "dtype", "tensors", "parameters", "bytes", "bits/w"
        );
        for (d, n, el, b) in ix.dtype_totals() {
            let bpw = bits_per_weight(b, el).map_or("-".into(), |x| format!("{x:.2}"));
            let _ = writeln!(
                s,
                "  {:<12} {:>8} {:>16} {:>12} {:>6}",
                d,
                grouped(n),
                grouped(el),
                human_bytes(b),
                bpw
            );
        }
    }
    if !ix.metadata.is_empty() {
        let _ = writeln!(s, "\nmetadata:");
        for (k, v) in &ix.metadata {
            if let (MetaValue::Str(x), true) = (v, a.pretty_metadata) {
                if let Some(lines) = pretty_json_lines(x) {
                    let _ = writeln!(s, "  {}:", printable(k));
                    for l in lines {
                        let _ = writeln!(s, "    {}", printable(&l));
                    }
                    continue;
                }
            }
            let v = match v {
                MetaValue::Str(x) => x.clone(),
                MetaValue::Array(items) if items.len() > ARRAY_PREVIEW => {
                    let head: Vec<String> =
                        items[..ARRAY_PREVIEW].iter().map(meta_item_text).collect();
                    format!(
                        "[{}, … ({} items)]",
                        head.join(", "),
                        grouped(items.len() as u64)
                    )
                }
                other => meta_text(other),
            };
            let _ = writeln!(s, "  {}: {}", printable(k), printable(&v));
        }
    }
    if a.tree && !ix.tensors.is_empty() {
        s.push('\n');
        let root = tensorsmith::ops::tree::build(ix);
        for c in &root.children {
            tree_lines(&mut s, c, 1);
        }
        return s;
    }
    if !ix.tensors.is_empty() {
        let names: Vec<String> = ix.tensors.iter().map(|t| printable(&t.name)).collect();
        let w = names
            .iter()
            .map(|n| width(n))
            .max()
            .unwrap_or(4)
            .clamp(4, NAME_COLUMN_MAX);
        // A split model's tensors name their part (1-based, as the file names count).
        let part_of = |t: &tensorsmith::index::TensorInfo| {
            let f = model.file_of(t);
            model
                .files
                .iter()
                .position(|g| std::ptr::eq(g, f))
                .map_or(0, |i| i + 1)
        };
        let split = model.split().is_some();
        let _ = writeln!(
            s,
            "\n  {}  {:<11} {:<20} {:>12}{}",
            pad_right("name", w),
            "dtype",
            "shape",
            "bytes",
            if split { "  part" } else { "" }
        );
        for (t, n) in ix.tensors.iter().zip(&names) {
            let shape = format!("{:?}", t.shape);
            let part = if split {
                format!("  {:>4}", part_of(t))
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "  {}  {:<11} {:<20} {:>12}{part}",
                pad_right(n, w),
                t.type_name(),
                shape,
                grouped(t.byte_len())
            );
        }
    }
    s
}

/// The lines of a metadata string that parses as a JSON object or array, pretty-printed.
fn pretty_json_lines(x: &str) -> Option<Vec<String>> {
    let t = x.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    let v = serde_json::from_str::<serde_json::Value>(x).ok()?;
    let pretty = serde_json::to_string_pretty(&v).expect("JSON values serialize");
    Some(pretty.lines().map(str::to_owned).collect())
}

/// One line per group (name, tensor count, size) and per tensor (dtype, shape, size).
fn tree_lines(s: &mut String, n: &tensorsmith::ops::tree::Node, depth: usize) {
    let indent = "  ".repeat(depth);
    let seg = printable(n.segment);
    // A tensor that is also a prefix of others (`a` and `a.b`) shows as both.
    if let Some(t) = n.tensor {
        let _ = writeln!(
            s,
            "{indent}{seg}  {} {:?}  {}",
            t.type_name(),
            t.shape,
            human_bytes(t.byte_len())
        );
    }
    if !n.children.is_empty() {
        let _ = writeln!(
            s,
            "{indent}{seg}/  {}, {}",
            count(n.tensors - u64::from(n.tensor.is_some()), "tensor"),
            human_bytes(n.bytes - n.tensor.map_or(0, |t| t.byte_len()))
        );
        for c in &n.children {
            tree_lines(s, c, depth + 1);
        }
    }
}
