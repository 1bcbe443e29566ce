//! `tensorsmith validate FILE...`: every rule of the format, optionally the JSON schema too.
//! Exit 0 when all are valid, 1 when any is invalid, 2 when any could not be read. Strict
//! like the reference by default: packed I4/I2 need `--packed-ints`.

use crate::render::printable;
use crate::{schema, shown, OpenArgs, EXIT_ERROR, EXIT_NO, EXIT_OK};
use clap::Args;
use std::path::PathBuf;
use tensorsmith::ops::open::{open, sniff, Sniffed};
use tensorsmith::safetensors::SafetensorsFile;

#[derive(Args)]
pub struct ValidateArgs {
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Also check the header against the safetensors JSON schema.
    #[arg(long)]
    schema: bool,
    /// Accept the packed I4/I2 dtypes, which the reference library rejects.
    #[arg(long)]
    packed_ints: bool,
    /// Print nothing for valid files.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    open: OpenArgs,
}

pub fn run(a: &ValidateArgs) -> u8 {
    let mut opts = a.open.read_options();
    opts.packed_ints = a.packed_ints;
    let mut code = EXIT_OK;
    for path in &a.files {
        // Other formats (GGUF, zTensor, shard folders and indexes): every rule of their reader.
        if !is_safetensors_file(path) {
            match open(&path.to_string_lossy(), &a.open.open_options()) {
                Ok(m) => {
                    if !a.quiet {
                        println!("ok: {} ({} tensors)", shown(path), m.index.tensors.len());
                    }
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
            continue;
        }
        match SafetensorsFile::open_with(path, &opts) {
            Ok(f) => {
                let problems = if a.schema {
                    schema_problems(&f)
                } else {
                    Vec::new()
                };
                if problems.is_empty() {
                    if !a.quiet {
                        println!("ok: {} ({} tensors)", shown(path), f.index().tensors.len());
                    }
                } else {
                    println!(
                        "invalid: {}: {}",
                        shown(path),
                        printable(&problems.join("; "))
                    );
                    code = code.max(EXIT_NO);
                }
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

/// A local file that is neither GGUF nor zTensor by its first bytes (nor a folder or index).
fn is_safetensors_file(path: &std::path::Path) -> bool {
    if path.is_dir() || path.to_string_lossy().ends_with(".index.json") {
        return false;
    }
    let mut first = [0u8; 8];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut first))
        .unwrap_or(0);
    sniff(&first[..n]) == Sniffed::Safetensors
}

fn schema_problems(f: &SafetensorsFile) -> Vec<String> {
    let r = 8..f.index().header_len;
    match f.source().bytes(r) {
        // The reader has already checked the header is UTF-8.
        Ok(b) => schema::check_header(std::str::from_utf8(&b).unwrap_or_default()),
        Err(e) => vec![e.to_string()],
    }
}
