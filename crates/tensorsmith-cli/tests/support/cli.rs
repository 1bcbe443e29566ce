//! What the CLI behaviour tests share: running the binary, paths as arguments, the bundled
//! test vectors. Included by each test file (`#[path = "support/cli.rs"] mod cli;`), which uses
//! what it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `tensorsmith` with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

/// Its stdout then its stderr, as text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `tensorsmith` with `args`, which must succeed; its stdout.
pub fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// A path as an argument.
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A file of the repository's `tests/data/`, by its path there.
pub fn data(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}
