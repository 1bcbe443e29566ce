//! `tensorsmith verify FILE|URL...`: checks every digest a file records (zTensor: every
//! part's crc32c, sha256 or xxh3, decoding compressed parts; safetensors: the per-tensor
//! digests of `tensorsmith.digest`; ONNX: data files' `checksum`) and every data rule the
//! reader leaves to a full read. Formats without digests are validated and reported as having none.
//! Exit 0 when all check out, 1 when any digest or rule fails, 2 when a file cannot be read.

use crate::progress_view::{size_and_time, with_bar, QuietArgs};
use crate::render::{count, printable};
use crate::{shown, OpenArgs, EXIT_CHANGED, EXIT_ERROR, EXIT_NO, EXIT_OK};
use clap::Args;
use std::path::{Path, PathBuf};
use tensorsmith::ops::verify::verify;

#[derive(Args)]
pub struct VerifyArgs {
    /// Files, folders, URLs, or a pipe (/dev/stdin), or - for stdin: read whole into a temporary file first.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    progress: QuietArgs,
}

pub fn run(a: &VerifyArgs) -> u8 {
    let show = a.progress.shows();
    let (code, took) = with_bar(show, "verify", || verify_all(a));
    if show {
        let (bytes, _) = tensorsmith::progress::snapshot();
        eprintln!(
            "verified {}: {}",
            count(a.files.len(), "model"),
            size_and_time(bytes, took)
        );
    }
    code
}

fn verify_all(a: &VerifyArgs) -> u8 {
    let mut code = EXIT_OK;
    let opts = a.open.open_options();
    for path in &a.files {
        if path.join("dataset_manifest.json").is_file() {
            code = code.max(verify_dataset(path, &opts));
            continue;
        }
        let opened = crate::input_arg::open_input(path.as_os_str(), &opts)
            .and_then(|m| tensorsmith::ops::write_id::check(&m).map(|()| m));
        match opened.map(|m| verify(&m)) {
            Ok(r) if r.is_ok() && r.checked == 0 => {
                outln!(
                    "ok: {}: structure valid; no digest recorded, tensor bytes not checked ({})",
                    shown(path),
                    count(r.undigested, "part")
                );
            }
            Ok(r) if r.is_ok() => {
                outln!(
                    "ok: {}: {} match, {} without a digest",
                    shown(path),
                    count(r.checked, "digest"),
                    count(r.undigested, "part")
                );
            }
            Ok(r) => {
                for e in &r.failures {
                    outln!("FAILED: {}", printable(&e.to_string()));
                }
                outln!(
                    "failed: {}: {} ({} checked)",
                    shown(path),
                    count(r.failures.len(), "problem"),
                    count(r.checked, "digest")
                );
                // A read of a file that changed meanwhile is no verdict on the file.
                let changed = r.failures.iter().map(crate::error_code).max();
                code = code.max(changed.filter(|&c| c == EXIT_CHANGED).unwrap_or(EXIT_NO));
            }
            Err(e) if e.is_invalid_input() => {
                outln!("invalid: {}", printable(&e.to_string()));
                code = code.max(EXIT_NO);
            }
            Err(e) => {
                eprintln!("error: {}", printable(&e.to_string()));
                code = code.max(crate::error_code(&e));
            }
        }
    }
    code
}

/// A dataset folder: the dataset's own checks (manifest, shards, index), then every shard's
/// recorded digests.
fn verify_dataset(dir: &Path, opts: &tensorsmith::OpenOptions) -> u8 {
    let structure = match tensorsmith_dataset::verify(dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {}", printable(&e.to_string()));
            return EXIT_ERROR;
        }
    };
    let mut failed = !structure.is_ok();
    for p in &structure.problems {
        outln!("FAILED: {}: {}", shown(dir), printable(p));
    }
    for n in &structure.notes {
        outln!("note: {}: {}", shown(dir), printable(n));
    }
    // The current version's shards (the dataset's verify checked the entry files mirror it).
    let manifest = match tensorsmith_dataset::Snapshot::current(dir).and_then(|s| {
        s.map(|s| s.version.manifest)
            .map_or_else(|| tensorsmith_dataset::Manifest::read(dir), Ok)
    }) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {}", printable(&e.to_string()));
            return EXIT_ERROR;
        }
    };
    let (mut checked, mut undigested) = (0, 0);
    for shard in &manifest.shards {
        let path = dir.join(&shard.shard_path);
        match crate::input_arg::open_input(path.as_os_str(), opts).map(|m| verify(&m)) {
            Ok(r) => {
                checked += r.checked;
                undigested += r.undigested;
                for e in &r.failures {
                    outln!("FAILED: {}", printable(&e.to_string()));
                }
                failed |= !r.is_ok();
            }
            // Missing or unreadable shards are already among the dataset's problems.
            Err(_) => failed = true,
        }
    }
    if failed {
        outln!(
            "failed: {}: dataset ({} checked)",
            shown(dir),
            count(checked, "digest")
        );
        return EXIT_NO;
    }
    let digests = if checked == 0 {
        "no digest recorded, tensor bytes not checked".to_string()
    } else {
        format!(
            "{} match, {} without a digest",
            count(checked, "digest"),
            count(undigested, "part")
        )
    };
    outln!(
        "ok: {}: dataset of {}, {}; {digests}",
        shown(dir),
        count(structure.shards, "shard"),
        count(structure.tensors, "tensor")
    );
    EXIT_OK
}
