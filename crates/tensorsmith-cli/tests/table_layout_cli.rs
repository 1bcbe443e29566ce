//! The `stats` and `inspect` tables: each column as wide as its cells on a terminal (a wide
//! character takes two columns, so names in Chinese or Japanese keep the next column
//! aligned), and the name column stops at 80 columns, so one very long name does not pad
//! every other row.

#[path = "support/cli.rs"]
mod cli;
use cli::run;
use std::path::Path;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn out(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn model(path: &Path, names: &[&str]) {
    let mut w = Writer::new();
    for n in names {
        w.add(n, DType::F32, &[2], vec![0u8; 8]).unwrap();
    }
    w.write_file(path).unwrap();
}

/// Terminal columns before `needle` on the line that starts with `name`.
fn column_of(text: &str, first: &str, needle: &str) -> usize {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(first))
        .unwrap_or_else(|| panic!("no line {first} in\n{text}"));
    let at = line
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} in {line}"));
    line[..at]
        .chars()
        .map(|c| {
            if ('\u{3040}'..='\u{9fff}').contains(&c) {
                2
            } else {
                1
            }
        })
        .sum()
}

#[test]
fn wide_characters_keep_the_columns_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    model(&m, &["重み", "ab"]);
    let p = m.to_str().unwrap();
    let stats = out(&["stats", p]);
    assert_eq!(
        column_of(&stats, "重み", "F32"),
        column_of(&stats, "ab", "F32"),
        "{stats}"
    );
    let inspect = out(&["inspect", p]);
    assert_eq!(
        column_of(&inspect, "重み", "F32"),
        column_of(&inspect, "ab", "F32"),
        "{inspect}"
    );
}

#[test]
fn one_long_name_does_not_pad_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    let long = "x".repeat(300);
    model(&m, &[&long, "short"]);
    let stats = out(&["stats", m.to_str().unwrap()]);
    let short = stats.lines().find(|l| l.starts_with("short")).unwrap();
    assert!(short.len() < 250, "{short}");
    assert_eq!(column_of(&stats, "short", "F32"), 82, "{stats}");
    // The long name's row still shows its values.
    let row = stats.lines().find(|l| l.starts_with(&long)).unwrap();
    assert!(row.contains("F32"), "{row}");
}
