//! `tensorsmith inspect FILE`: a human summary, or the stable JSON document with `--json`.

use crate::render::{grouped, human_bytes, printable};
use crate::{fail, OpenArgs, EXIT_OK};
use clap::Args;
use std::fmt::Write as _;
use std::path::PathBuf;
use tensorsmith::index::TensorIndex;
use tensorsmith::ops::inspect::{inspect_json, meta_json};
use tensorsmith::remote::is_url;
use tensorsmith::safetensors::{open_remote, SafetensorsFile};

#[derive(Args)]
pub struct InspectArgs {
    /// A file, or an http(s):// URL (only the header is fetched, by range requests).
    file: PathBuf,
    /// Print the machine-readable form (schema "tensorsmith.inspect/1").
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    open: OpenArgs,
}

pub fn run(a: &InspectArgs) -> u8 {
    // A URL is read with HTTP range requests (the header only); a path is opened.
    let remote_index;
    let local;
    let index: &TensorIndex = match a.file.to_str().filter(|s| is_url(s)) {
        Some(url) => match open_remote(url, &a.open.read_options()) {
            Ok((ix, _)) => {
                remote_index = ix;
                &remote_index
            }
            Err(e) => return fail(&e),
        },
        None => match SafetensorsFile::open_with(&a.file, &a.open.read_options()) {
            Ok(f) => {
                local = f;
                local.index()
            }
            Err(e) => return fail(&e),
        },
    };
    let out = if a.json {
        let mut s = serde_json::to_string_pretty(&inspect_json(&a.file, index))
            .expect("JSON values serialize");
        s.push('\n');
        s
    } else {
        text(&a.file, index)
    };
    print!("{out}");
    EXIT_OK
}

fn text(path: &std::path::Path, ix: &TensorIndex) -> String {
    let mut s = String::new();
    let total_bytes: u64 = ix.tensors.iter().map(|t| t.byte_len()).sum();
    let _ = writeln!(s, "file:        {}", crate::shown(path));
    let _ = writeln!(s, "format:      {}", ix.format.name());
    let _ = writeln!(
        s,
        "size:        {} ({} bytes)",
        human_bytes(ix.file_len),
        grouped(ix.file_len)
    );
    let _ = writeln!(s, "header:      {} bytes", grouped(ix.header_len));
    let _ = writeln!(s, "tensors:     {}", grouped(ix.tensors.len() as u64));
    let _ = writeln!(s, "parameters:  {}", grouped(ix.total_elements()));
    let _ = writeln!(s, "data:        {}", human_bytes(total_bytes));
    if !ix.tensors.is_empty() {
        let _ = writeln!(s, "\nby dtype:");
        let _ = writeln!(
            s,
            "  {:<12} {:>8} {:>16} {:>12}",
            "dtype", "tensors", "parameters", "bytes"
        );
        for (d, n, el, b) in ix.dtype_totals() {
            let _ = writeln!(
                s,
                "  {:<12} {:>8} {:>16} {:>12}",
                d.safetensors_name(),
                grouped(n),
                grouped(el),
                human_bytes(b)
            );
        }
    }
    if !ix.metadata.is_empty() {
        let _ = writeln!(s, "\nmetadata:");
        for (k, v) in &ix.metadata {
            let v = match v {
                tensorsmith::index::MetaValue::Str(x) => x.clone(),
                other => meta_json(other).to_string(),
            };
            let _ = writeln!(s, "  {}: {}", printable(k), printable(&v));
        }
    }
    if !ix.tensors.is_empty() {
        let names: Vec<String> = ix.tensors.iter().map(|t| printable(&t.name)).collect();
        let w = names
            .iter()
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(4)
            .clamp(4, 80);
        let _ = writeln!(
            s,
            "\n  {:<w$}  {:<11} {:<20} {:>12}",
            "name", "dtype", "shape", "bytes"
        );
        for (t, n) in ix.tensors.iter().zip(&names) {
            let shape = format!("{:?}", t.shape);
            let _ = writeln!(
                s,
                "  {:<w$}  {:<11} {:<20} {:>12}",
                n,
                t.dtype.safetensors_name(),
                shape,
                grouped(t.byte_len())
            );
        }
    }
    s
}
