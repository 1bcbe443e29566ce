//! `tensorsmith validate FILE...`: every rule of the format, optionally the JSON schema too
//! (for formats whose header is JSON). Exit 0 when all are valid, 1 when any is invalid, 2
//! when any could not be read. Strict like the reference by default: packed I4/I2 need
//! `--packed-ints`.

use crate::render::{count, printable};
use crate::{schema, shown, OpenArgs, EXIT_NO, EXIT_OK};
use clap::Args;
use std::path::PathBuf;
use tensorsmith::Model;

#[derive(Args)]
pub struct ValidateArgs {
    /// Files, folders, URLs, or a pipe (/dev/stdin), or - for stdin: read whole into a temporary file first.
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
    let opts = a.open.open_options().with_packed_ints(a.packed_ints);
    let mut code = EXIT_OK;
    for path in &a.files {
        // A sharded checkpoint's shards must come from one write (their write ids agree).
        let opened = crate::input_arg::open_input(path.as_os_str(), &opts)
            .and_then(|m| tensorsmith::ops::write_id::check(&m).map(|()| m));
        match opened {
            Ok(m) => {
                let problems = if a.schema {
                    schema_problems(&m)
                } else {
                    Vec::new()
                };
                if problems.is_empty() {
                    if !a.quiet {
                        outln!(
                            "ok: {} ({})",
                            shown(path),
                            count(m.index.tensors.len(), "tensor")
                        );
                    }
                } else {
                    outln!(
                        "invalid: {}: {}",
                        shown(path),
                        printable(&problems.join("; "))
                    );
                    code = code.max(EXIT_NO);
                }
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

/// Schema problems of every file of the model whose header is JSON.
fn schema_problems(m: &Model) -> Vec<String> {
    let mut problems = Vec::new();
    for i in 0..m.files.len() {
        match m.json_header(i) {
            // The reader has already checked the header is UTF-8.
            Ok(Some(b)) => {
                problems.extend(schema::check_header(
                    std::str::from_utf8(&b).unwrap_or_default(),
                ));
            }
            Ok(None) => {}
            Err(e) => problems.push(e.to_string()),
        }
    }
    problems
}
