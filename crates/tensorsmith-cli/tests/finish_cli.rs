//! What a user feels first: a closed stdout (`tensorsmith inspect big | head -1`) ends every
//! printing command quietly with exit 0, never with a panic (exit 101), so scripts with `set -o
//! pipefail` keep working; options that contradict the output's format are refused, nothing written.

use std::process::{Command, Stdio};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

/// A file of 20,000 small tensors: far more output than a pipe buffer holds.
fn many(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("many.safetensors");
    let names: Vec<String> = (0..20_000).map(|i| format!("layer.{i:05}.w")).collect();
    let mut w = Writer::new();
    for n in &names {
        w.add(n, DType::F32, &[2], vec![0u8; 8]).unwrap();
    }
    w.write_file(&path).unwrap();
    path
}

/// Runs the CLI with its stdout a pipe whose reading end is closed at once.
fn closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_ends_each_command_quietly_with_exit_0() {
    let d = tempfile::tempdir().unwrap();
    let f = many(d.path());
    let f = f.to_str().unwrap();
    let many_files: Vec<&str> = std::iter::repeat_n(f, 200).collect();
    let cases: Vec<Vec<&str>> = vec![
        vec!["inspect", f],
        vec!["inspect", "--json", f],
        [vec!["validate"], many_files.clone()].concat(),
        [vec!["hash"], many_files.clone()].concat(),
        vec!["diff", f, f, "--values", "--all"],
        vec!["stats", f],
        vec!["stats", "--json", "--check", f],
    ];
    for args in cases {
        let (code, stderr) = closed_stdout(&args);
        assert_eq!(code, Some(0), "{:?}: {stderr}", &args[..2]);
        assert!(!stderr.contains("panicked"), "{:?}: {stderr}", &args[..2]);
    }
}

#[test]
fn a_zt_version_for_a_gguf_output_is_refused_and_nothing_is_written() {
    let d = tempfile::tempdir().unwrap();
    let f = many(d.path());
    let out = d.path().join("out.gguf");
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["convert", f.to_str().unwrap(), out.to_str().unwrap()])
        .args(["--zt-version", "2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("contradicts"));
    assert!(!out.exists());
}

#[test]
fn a_file_of_another_kind_is_named_as_not_a_tensor_file() {
    let d = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 3] = [
        ("img.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "a PNG image"),
        ("notes.txt", b"Hello, this is plain text.\n", "(text)"),
        ("model.bin", b"PK\x03\x04\x14\0\0\0\0\0", "ZIP archive"),
    ];
    for (name, bytes, kind) in cases {
        let p = d.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
            .args(["validate", p.to_str().unwrap()])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(
            out.contains("not a tensor file") && out.contains(kind),
            "{out}"
        );
    }
}

#[test]
fn unread_url_schemes_are_refused_by_name() {
    for url in [
        "ftp://host/m.safetensors",
        "wasbs://container@acct.blob.core.windows.net/m.safetensors",
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
            .args(["inspect", url])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let scheme = url.split("://").next().unwrap();
        assert!(
            err.contains(&format!("unsupported URL scheme \"{scheme}\"")),
            "{err}"
        );
        assert!(!err.contains("No such file"), "{err}");
    }
}

#[test]
fn a_folder_of_unrelated_files_sharing_a_name_is_not_one_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    for f in ["a.safetensors", "b.safetensors"] {
        let mut w = Writer::new();
        w.add("shared.weight", DType::F32, &[1], vec![0u8; 4])
            .unwrap();
        w.write_file(d.path().join(f)).unwrap();
    }
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["validate", d.path().to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("not one checkpoint") && out.contains("a.safetensors and b.safetensors"),
        "{out}"
    );
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn contradicting_flags_are_refused_not_ignored() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("one.safetensors");
    let mut w = Writer::new();
    w.add("w", DType::F32, &[1], vec![0u8; 4]).unwrap();
    w.write_file(&p).unwrap();
    let f = p.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["diff", f, f, "--json", "--format", "md"], "--format"),
        (&["diff", f, f, "--all"], "--values"),
        (&["inspect", f, "--json", "--tree"], "--tree"),
        (
            &["inspect", f, "--json", "--pretty-metadata"],
            "--pretty-metadata",
        ),
        (
            &["hash", f, "--content", "--compat", "weight-inspect"],
            "--content",
        ),
    ];
    for (args, named) in cases {
        let (code, out, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {out}{err}");
        assert!(
            err.contains("cannot be used with") || err.contains("required"),
            "{err}"
        );
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    // The combinations that mean something still work.
    assert_eq!(run(&["diff", f, f, "--values", "--all"]).0, Some(0));
    assert_eq!(run(&["diff", f, f, "--format", "md"]).0, Some(0));
}

#[test]
fn counts_of_one_are_singular() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("one.safetensors");
    let mut w = Writer::new();
    w.add("w", DType::F32, &[1], vec![0u8; 4]).unwrap();
    w.write_file(&p).unwrap();
    let (code, out, _) = run(&["validate", p.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(out.ends_with("(1 tensor)\n"), "{out}");
    let (_, out, _) = run(&["verify", p.to_str().unwrap()]);
    assert!(out.contains("(1 part)"), "{out}");
    let (_, out, _) = run(&["validate", many(d.path()).to_str().unwrap()]);
    assert!(out.ends_with("(20,000 tensors)\n"), "{out}");
}

#[test]
fn max_header_size_applies_to_every_format() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/");
    for f in [
        "gguf/every_type.gguf",
        "ztensor/v2/all_dtypes.zt",
        "ztensor/v1.1/attributes.zt",
        "ztensor/v0.1/big_endian.zt",
        "safetensors/mixed_meta3.safetensors",
    ] {
        let p = format!("{data}{f}");
        // Each format's default passes; a limit of 16 bytes refuses each one's header.
        let (code, out, err) = run(&["validate", &p]);
        assert_eq!(code, Some(0), "{f}: {out}{err}");
        let (code, out, err) = run(&["validate", "--max-header-size", "16", &p]);
        assert_eq!(code, Some(1), "{f}: {out}{err}");
        assert!(out.contains("exceeds the limit of 16 bytes"), "{f}: {out}");
        let (code, out, err) = run(&["inspect", "--max-header-size", "100000", &p]);
        assert_eq!(code, Some(0), "{f}: {out}{err}");
    }
}

/// Runs the CLI with stdout and stderr on a terminal (util-linux `script`), as a user would.
fn on_a_terminal(args: &[&str]) -> String {
    let cmd: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_tensorsmith"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect();
    let o = Command::new("script")
        .args(["-qec", &cmd.join(" "), "/dev/null"])
        .output()
        .expect("util-linux script");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn long_commands_end_with_a_summary_on_a_terminal_only() {
    let d = tempfile::tempdir().unwrap();
    let f = many(d.path());
    let f = f.to_str().unwrap();
    let out = d.path().join("out.zt");
    let o = out.to_str().unwrap();
    let said = on_a_terminal(&["convert", f, o]);
    assert!(
        said.contains("wrote ") && said.contains("20,000 tensors"),
        "{said}"
    );
    assert!(said.contains(" in ") && said.contains("/s)"), "{said}");
    let said = on_a_terminal(&["verify", o]);
    assert!(said.contains("verified 1 model: "), "{said}");
    let said = on_a_terminal(&["hash", "--content", f]);
    assert!(said.contains("hashed 1 model: "), "{said}");
    let said = on_a_terminal(&["diff", "--values", f, o]);
    assert!(said.contains("compared values: "), "{said}");
    let said = on_a_terminal(&["stats", "--tensors", "layer.0000?.w", f]);
    assert!(said.contains("measured 10 tensors: "), "{said}");
    let said = on_a_terminal(&["stats", "-q", f]);
    assert!(!said.contains("measured "), "{said}");
    // --quiet, or stderr not a terminal: no summary.
    let said = on_a_terminal(&["convert", "-q", f, o]);
    assert!(!said.contains("wrote "), "{said}");
    let (code, _, err) = run(&["convert", f, o]);
    assert_eq!(code, Some(0));
    assert!(err.is_empty(), "{err}");
}

#[test]
fn an_output_in_a_missing_folder_names_the_folder() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("a.safetensors");
    let mut w = Writer::new();
    w.add("w", DType::F32, &[2], vec![0u8; 8]).unwrap();
    w.write_file(&src).unwrap();
    let missing = d.path().join("no").join("such");
    for out in ["out.safetensors", "out.zt", "out.gguf"] {
        let out = missing.join(out);
        let (code, _, err) = run(&["convert", src.to_str().unwrap(), out.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(&format!("the folder {} does not exist", missing.display())),
            "{err}"
        );
        assert!(!d.path().join("no").exists());
    }
    // Sharded: the lock file the writer takes inside the folder is not what the user named.
    let out = missing.join("model.safetensors");
    let (code, _, err) = run(&[
        "convert",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--shard-size",
        "1MB",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("the folder {} does not exist", missing.display())),
        "{err}"
    );
    assert!(err.contains(out.to_str().unwrap()), "{err}");
    assert!(!err.contains(".lock"), "{err}");
    assert!(!d.path().join("no").exists());
}
