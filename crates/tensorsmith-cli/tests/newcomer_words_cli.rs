//! What a newcomer reads says what it means: each argument of the commands one meets first
//! has a description that names everything it takes, usage lines name the output apart from
//! the inputs, and `dataset info` says what made each version in words that do not read as a
//! failure.

#[path = "support/cli.rs"]
mod cli;
use cli::{data, ok, p, run};

fn help(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(0));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The help text of one positional argument: its line in "Arguments:" after the name.
fn argument<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no argument {name} in:\n{text}"))
}

#[test]
fn every_first_command_describes_what_it_takes() {
    let convert = help(&["convert", "--help"]);
    assert!(argument(&convert, "<INPUT>").len() > 20, "{convert}");
    assert!(argument(&convert, "<OUTPUT>").len() > 20, "{convert}");
    let inspect = help(&["inspect", "--help"]);
    assert!(
        inspect.contains("Usage: tensorsmith inspect [OPTIONS] <MODEL>"),
        "{inspect}"
    );
    let model = argument(&inspect, "<MODEL>");
    for what in [
        "sharded checkpoint",
        "split GGUF",
        "s3://",
        "az://",
        "gs://",
        "hf://",
    ] {
        assert!(model.contains(what), "{what} missing from: {model}");
    }
    let write = help(&["dataset", "write", "--help"]);
    assert!(
        write.contains("Usage: tensorsmith dataset write [OPTIONS] <INPUT>... <OUT_DIR>"),
        "{write}"
    );
    assert!(
        argument(&write, "<OUT_DIR>").contains("dataset folder"),
        "{write}"
    );
    // One path is an input without an output: refused by the parser, naming what is missing.
    let o = run(&[
        "dataset",
        "write",
        "--batch-size",
        "2",
        "--dtype",
        "F32",
        "in.parquet",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("<OUT_DIR>"), "{err}");
}

#[test]
fn dataset_info_says_what_made_each_version() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let input = data("dataset/input_snappy_dict_v1.parquet");
    for mode in ["error", "append", "overwrite"] {
        let args = [
            "dataset",
            "write",
            &input,
            p(&ds),
            "--batch-size",
            "4",
            "--dtype",
            "F32",
        ];
        ok(&[&args[..], &["--mode", mode, "-q"]].concat());
    }
    let info = ok(&["dataset", "info", p(&ds)]);
    let rows: Vec<Vec<&str>> = info
        .lines()
        .skip_while(|l| *l != "versions:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let made: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        made,
        [("1", "created"), ("2", "appended"), ("3", "overwrote")],
        "{info}"
    );
    assert!(!info.contains(" error "), "{info}");
}
