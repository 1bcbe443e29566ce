//! `tensorsmith hash FILE...`: a format-neutral structural ID per model (and with `--content`
//! a digest of the tensor bytes), one line per model like `sha256sum`; `--json` for machines.

use crate::progress_view::{with_bar, QuietArgs};
use crate::render::printable;
use crate::{fail, OpenArgs, EXIT_OK};
use clap::{Args, ValueEnum};
use serde_json::json;
use tensorsmith::ops::hash::{content_id_with, structural_id};
use tensorsmith::Model;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Compat {
    /// weight-inspect's structural hash and `wi:` short ID, byte for byte.
    WeightInspect,
}

#[derive(Args)]
pub struct HashArgs {
    /// Files (any name; a pipe, or - for stdin, is read whole into a temporary file first) or
    /// http(s):// URLs.
    #[arg(required = true)]
    files: Vec<std::path::PathBuf>,
    /// Also digest every tensor's bytes (reads all data; parallel).
    #[arg(long)]
    content: bool,
    /// With --content: hash tensors without checking the digests their file records (by
    /// default a tensor that no longer matches its recorded digest is an error naming it).
    #[arg(long, requires = "content")]
    no_digest_check: bool,
    /// Print another tool's hash instead of ours. weight-inspect hashes the one file it is
    /// given: a part of a split GGUF model is hashed alone (ours hashes the whole model).
    #[arg(long, value_enum, conflicts_with = "content")]
    compat: Option<Compat>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    progress: QuietArgs,
}

pub fn run(a: &HashArgs) -> u8 {
    // Only the content digest reads tensor bytes: the structural IDs take a moment.
    let show = a.content && a.progress.shows();
    let (code, took) = with_bar(show, "hash", || hash_all(a));
    if show {
        let (bytes, _) = tensorsmith::progress::snapshot();
        eprintln!(
            "hashed {}: {}",
            crate::render::count(a.files.len(), "model"),
            crate::progress_view::size_and_time(bytes, took)
        );
    }
    code
}

fn hash_all(a: &HashArgs) -> u8 {
    // weight-inspect reads the one file it is given, a split GGUF part included.
    let opts = a
        .open
        .open_options()
        .with_part_only(a.compat.is_some() || a.open.part_only);
    let mut code = EXIT_OK;
    for f in &a.files {
        let model = match crate::input_arg::open_input(f.as_os_str(), &opts) {
            Ok(m) => m,
            Err(e) => {
                code = code.max(fail(&e));
                continue;
            }
        };
        match line(a, &crate::input_arg::shown_name(f.as_os_str()), &model) {
            Ok(l) => outln!("{l}"),
            Err(e) => {
                code = code.max(fail(&e));
            }
        }
    }
    code
}

fn line(a: &HashArgs, f: &str, model: &Model) -> tensorsmith::Result<String> {
    if let Some(Compat::WeightInspect) = a.compat {
        let wi = tensorsmith::ops::hash::wi_hash::weight_inspect(&model.index)?;
        return Ok(if a.json {
            json!({"file": f, "structural_hash": wi.hash, "id": wi.short_id}).to_string()
        } else {
            format!("{}  {}  {}", wi.hash, wi.short_id, printable(f))
        });
    }
    let id = structural_id(&model.index);
    let content = if a.content {
        Some(content_id_with(model, !a.no_digest_check)?)
    } else {
        None
    };
    Ok(if a.json {
        let mut v = json!({"file": f, "structural_id": id});
        if let Some(c) = &content {
            v["content_digest"] = json!(c);
        }
        v.to_string()
    } else {
        match content {
            Some(c) => format!("{id}  {c}  {}", printable(f)),
            None => format!("{id}  {}", printable(f)),
        }
    })
}
