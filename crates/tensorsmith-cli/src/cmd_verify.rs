//! `tensorsmith verify FILE...`: checks every digest a file records (zTensor: every part's
//! crc32c, sha256 or xxh3, decoding compressed parts) and every data rule the reader leaves to
//! a full read. Formats without digests are validated and reported as having none.
//! Exit 0 when all check out, 1 when any digest or rule fails, 2 when a file cannot be read.

use crate::render::printable;
use crate::{shown, OpenArgs, EXIT_ERROR, EXIT_NO, EXIT_OK};
use clap::Args;
use std::path::PathBuf;
use tensorsmith::ops::open::{open, sniff, Sniffed};

#[derive(Args)]
pub struct VerifyArgs {
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    open: OpenArgs,
}

fn first_bytes(path: &std::path::Path) -> Vec<u8> {
    let mut first = [0u8; 8];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut first))
        .unwrap_or(0);
    first[..n].to_vec()
}

pub fn run(a: &VerifyArgs) -> u8 {
    let mut code = EXIT_OK;
    for path in &a.files {
        let result = if sniff(&first_bytes(path)) == Sniffed::Ztensor {
            let opts = tensorsmith::ztensor::OpenOptions {
                backend: a.open.read_options().backend,
                ..Default::default()
            };
            tensorsmith::ztensor::open(path, &opts).map(|f| {
                let r = f.verify();
                (r.checked, r.undigested, r.failures)
            })
        } else {
            open(&path.to_string_lossy(), &a.open.open_options()).map(|m| {
                let parts = m.index.tensors.iter().map(|t| t.parts.len() as u64).sum();
                (0, parts, Vec::new())
            })
        };
        match result {
            Ok((checked, undigested, failures)) if failures.is_empty() => {
                println!(
                    "ok: {}: {checked} digests match, {undigested} parts without a digest",
                    shown(path)
                );
            }
            Ok((checked, _, failures)) => {
                for e in &failures {
                    println!("FAILED: {}", printable(&e.to_string()));
                }
                println!(
                    "failed: {}: {} problems ({checked} digests checked)",
                    shown(path),
                    failures.len()
                );
                code = code.max(EXIT_NO);
            }
            Err(e) if e.is_invalid_input() => {
                println!("invalid: {}", printable(&e.to_string()));
                code = code.max(EXIT_NO);
            }
            Err(e) => {
                eprintln!("error: {}", printable(&e.to_string()));
                code = EXIT_ERROR;
            }
        }
    }
    code
}
