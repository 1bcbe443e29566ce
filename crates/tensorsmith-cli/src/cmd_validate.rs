//! `tensorsmith validate FILE...`: every rule of the format, optionally the JSON schema too.
//! Exit 0 when all are valid, 1 when any is invalid, 2 when any could not be read. Strict
//! like the reference by default: packed I4/I2 need `--packed-ints`.

use crate::render::printable;
use crate::{schema, shown, OpenArgs, EXIT_ERROR, EXIT_NO, EXIT_OK};
use clap::Args;
use std::path::PathBuf;
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

fn schema_problems(f: &SafetensorsFile) -> Vec<String> {
    let r = 8..f.index().header_len;
    match f.source().bytes(r) {
        // The reader has already checked the header is UTF-8.
        Ok(b) => schema::check_header(std::str::from_utf8(&b).unwrap_or_default()),
        Err(e) => vec![e.to_string()],
    }
}
