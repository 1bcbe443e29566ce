//! Integration tests for the `tensorsmith` binary: text and JSON output of `inspect`, exit
//! codes and messages of `validate` (including `--schema`, `--max-header-size`, `--pread`),
//! and `convert` (byte-identical copies, F16/BF16 casts bit for bit, atomic replacement).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::{SafetensorsFile, Writer};

// ---------------------------------------------------------------------------------------------
// Helpers

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/safetensors")
}

fn vector(name: &str) -> PathBuf {
    data_dir().join(name)
}

/// Runs the binary with `args`.
fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .expect("the tensorsmith binary runs")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally, not by a signal")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and asserts the exit code, showing both streams on failure.
fn run_expect<I, S>(args: I, expected: i32) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let o = run(args);
    assert_eq!(
        code(&o),
        expected,
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    o
}

fn inspect_json(path: &Path, extra: &[&str]) -> Value {
    let mut args: Vec<&std::ffi::OsStr> = vec!["inspect".as_ref(), "--json".as_ref()];
    args.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
    args.push(path.as_os_str());
    let o = run_expect(args, 0);
    serde_json::from_slice(&o.stdout).expect("inspect --json prints JSON")
}

/// A safetensors file from a raw header text and data bytes (no padding added).
fn craft(dir: &Path, name: &str, header: &str, data: &[u8]) -> PathBuf {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A valid file of two small tensors, as bytes, written by the library's writer.
fn small_valid_bytes() -> Vec<u8> {
    let mut w = Writer::new();
    w.add("a", DType::F32, &[2], vec![1u8; 8]).unwrap();
    w.add("b", DType::U8, &[3], vec![7u8, 8, 9]).unwrap();
    w.to_bytes().unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn expected_cases() -> Vec<Value> {
    let text = std::fs::read_to_string(vector("expected.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let cases = v["cases"].as_array().unwrap().clone();
    assert!(cases.len() >= 20, "expected.json lists the vectors");
    cases
}

/// Files listed in the folder that the reader must accept.
fn valid_vectors() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .filter(|p| !p.file_name().unwrap().to_str().unwrap().contains("invalid"))
        .collect();
    v.sort();
    assert!(v.len() >= 25, "{v:?}");
    v
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// inspect (text)

/// The whitespace-separated fields of the first line that starts (after indentation) with
/// `first` as its first field.
fn row<'a>(out: &'a str, first: &str) -> Vec<&'a str> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row starting with {first:?} in:\n{out}"))
}

#[test]
fn inspect_text_summarises_the_file() {
    let p = vector("mixed_meta3.safetensors");
    let o = run_expect(["inspect".as_ref(), p.as_os_str()], 0);
    let out = stdout(&o);
    let size = std::fs::metadata(&p).unwrap().len();
    // A size under 1 KiB is said once ("807 bytes"), not twice ("807 B (807 bytes)").
    assert!(size < 1024);
    assert_eq!(row(&out, "size:"), ["size:", &size.to_string(), "bytes"]);
    assert_eq!(row(&out, "format:"), ["format:", "safetensors"]);
    assert_eq!(row(&out, "tensors:"), ["tensors:", "8"]);
    // 16 + 4 + 6 + 6 + 5 + 7 + 0 + 0 elements.
    assert_eq!(row(&out, "parameters:"), ["parameters:", "44"]);
    assert_eq!(row(&out, "data:"), ["data:", "151", "B"]);

    // Per-dtype table: dtype, tensors, parameters, bytes, bits per weight.
    let by_dtype = out.split("by dtype:").nth(1).expect("a by-dtype section");
    assert_eq!(row(by_dtype, "F32"), ["F32", "2", "20", "80", "B", "32.00"]);
    assert_eq!(
        row(by_dtype, "BF16"),
        ["BF16", "1", "6", "12", "B", "16.00"]
    );
    assert_eq!(row(by_dtype, "F16"), ["F16", "1", "6", "12", "B", "16.00"]);
    assert_eq!(row(by_dtype, "I64"), ["I64", "1", "5", "40", "B", "64.00"]);
    assert_eq!(row(by_dtype, "BOOL"), ["BOOL", "1", "7", "7", "B", "8.00"]);
    assert_eq!(row(by_dtype, "U8"), ["U8", "2", "0", "0", "B", "-"]);

    // Metadata, keys sorted, values escaped only where they hold control characters.
    let meta = out.split("metadata:").nth(1).expect("a metadata section");
    let meta_lines: Vec<&str> = meta.lines().skip(1).take(3).collect();
    assert_eq!(
        meta_lines,
        [
            r#"  config: {"a": [1, 2]}"#,
            "  format: pt",
            r#"  note: quote " backslash \\ tab \t é"#,
        ]
    );

    // Tensor table: one row per tensor with dtype, shape and byte length.
    assert_eq!(
        row(&out, "model.layers.0.weight"),
        ["model.layers.0.weight", "F32", "[4,", "4]", "64"]
    );
    assert_eq!(
        row(&out, "model.layers.10.weight"),
        ["model.layers.10.weight", "BF16", "[2,", "3]", "12"]
    );
    assert_eq!(row(&out, "ids"), ["ids", "I64", "[5]", "40"]);
    assert_eq!(row(&out, "z2"), ["z2", "U8", "[0]", "0"]);
    assert_eq!(row(&out, "mask"), ["mask", "BOOL", "[7]", "7"]);
}

#[test]
fn inspect_text_groups_large_counts_and_omits_empty_sections() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.safetensors");
    let mut w = Writer::new();
    w.add("w", DType::U8, &[1234, 1000], vec![0u8; 1_234_000])
        .unwrap();
    w.write_file(&p).unwrap();
    let out = stdout(&run_expect(["inspect".as_ref(), p.as_os_str()], 0));
    assert_eq!(row(&out, "parameters:"), ["parameters:", "1,234,000"]);
    assert_eq!(row(&out, "w"), ["w", "U8", "[1234,", "1000]", "1,234,000"]);
    assert!(!out.contains("metadata:"), "{out}");

    let out = stdout(&run_expect(
        ["inspect".as_ref(), vector("empty.safetensors").as_os_str()],
        0,
    ));
    assert_eq!(row(&out, "tensors:"), ["tensors:", "0"]);
    assert_eq!(row(&out, "parameters:"), ["parameters:", "0"]);
    assert!(!out.contains("by dtype:"), "{out}");
}

#[test]
fn inspect_text_escapes_control_characters_in_names() {
    let p = vector("odd_names.safetensors");
    let o = run_expect(["inspect".as_ref(), p.as_os_str()], 0);
    // No raw control byte other than the line feeds that end lines.
    for &b in &o.stdout {
        assert!(b >= 0x20 || b == b'\n', "raw control byte {b:#04x} printed");
    }
    assert!(!o.stdout.contains(&0x7f));
    let out = stdout(&o);
    // The name "ctrl\x01\x1f\n\ttab" stays on one line, escaped.
    let line = out
        .lines()
        .find(|l| l.contains("ctrl"))
        .expect("a row for the control-character name");
    assert!(line.contains(r"ctrl\u{1}\u{1f}\n\ttab"), "{line}");
    assert!(line.contains("U8"), "{line}");
    // Other odd names are shown as they are (backslash escaped, Unicode raw).
    assert!(out.contains(r#"quote"back\\slash"#), "{out}");
    assert!(out.contains("名前.重み"), "{out}");
    assert!(out.contains("slash/and space"), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("ctrl")).count(), 1);
}

#[test]
fn inspect_fails_with_exit_2_on_a_missing_or_invalid_file() {
    let o = run_expect(["inspect", "/nonexistent/x.safetensors"], 2);
    assert!(o.stdout.is_empty());
    assert!(
        stderr(&o).contains("/nonexistent/x.safetensors"),
        "{}",
        stderr(&o)
    );
    let bad = vector("reference_invalid_empty_meta.safetensors");
    for args in [vec!["inspect"], vec!["inspect", "--json"]] {
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        a.push(bad.as_os_str());
        let o = run_expect(a, 2);
        assert!(o.stdout.is_empty());
        assert!(
            stderr(&o).contains("reference_invalid_empty_meta"),
            "{}",
            stderr(&o)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// inspect --json

#[test]
fn inspect_json_matches_the_reference_vectors() {
    for case in expected_cases() {
        let file = case["file"].as_str().unwrap();
        let p = vector(file);
        let bytes = std::fs::read(&p).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let data = &bytes[8 + n..];
        let j = inspect_json(&p, &[]);
        let ctx = format!("{file}: {j:#}");

        assert_eq!(j["schema"], "tensorsmith.inspect/1", "{ctx}");
        assert_eq!(j["format"], "safetensors", "{ctx}");
        assert_eq!(j["file_size"], bytes.len() as u64, "{ctx}");
        assert_eq!(j["header_size"], (8 + n) as u64, "{ctx}");
        let tensors = case["tensors"].as_array().unwrap();
        assert_eq!(j["tensor_count"], tensors.len() as u64, "{ctx}");

        // Metadata: the same string map (absent or empty -> {}).
        let want_meta = case["metadata"].as_object().cloned().unwrap_or_default();
        assert_eq!(j["metadata"], Value::Object(want_meta), "{ctx}");

        // Tensors: every expected one, with its bytes where data_offsets say.
        let got = j["tensors"].as_array().unwrap();
        assert_eq!(got.len(), tensors.len(), "{ctx}");
        let mut totals: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        let mut total_params = 0;
        for t in tensors {
            let name = t["name"].as_str().unwrap();
            let g = got
                .iter()
                .find(|g| g["name"] == name)
                .unwrap_or_else(|| panic!("{file}: no tensor {name:?}"));
            let hex = unhex(t["hex"].as_str().unwrap());
            let shape: Vec<u64> = t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            let params: u64 = shape.iter().product();
            assert_eq!(g["dtype"], t["dtype"], "{ctx}");
            assert_eq!(g["shape"], t["shape"], "{ctx}");
            assert_eq!(g["parameters"], params, "{ctx}");
            assert_eq!(g["byte_length"], hex.len() as u64, "{ctx}");
            let off: Vec<usize> = g["data_offsets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(off.len(), 2, "{ctx}");
            assert_eq!(&data[off[0]..off[1]], &hex[..], "{file}: {name:?}");
            let e = totals
                .entry(t["dtype"].as_str().unwrap().to_string())
                .or_default();
            e.0 += 1;
            e.1 += params;
            e.2 += hex.len() as u64;
            total_params += params;
        }
        assert_eq!(j["total_parameters"], total_params, "{ctx}");
        assert_eq!(
            j["total_bytes"],
            totals.values().map(|t| t.2).sum::<u64>(),
            "{ctx}"
        );
        // Tensors are listed in data order: offsets are contiguous from 0 to the end.
        let mut end = 0;
        for g in got {
            assert_eq!(g["data_offsets"][0], end, "{ctx}");
            end = g["data_offsets"][1].as_u64().unwrap();
        }
        assert_eq!(end, data.len() as u64, "{ctx}");

        // Per-dtype totals.
        let dtypes = j["dtypes"].as_array().unwrap();
        assert_eq!(dtypes.len(), totals.len(), "{ctx}");
        for d in dtypes {
            let want = totals[d["dtype"].as_str().unwrap()];
            assert_eq!(d["tensors"], want.0, "{ctx}");
            assert_eq!(d["parameters"], want.1, "{ctx}");
            assert_eq!(d["bytes"], want.2, "{ctx}");
        }
    }
}

#[test]
fn inspect_json_orders_dtypes_and_keeps_odd_names() {
    let j = inspect_json(&vector("mixed_meta1.safetensors"), &[]);
    let order: Vec<&str> = j["dtypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["dtype"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["BOOL", "U8", "F16", "BF16", "F32", "I64"]);
    assert_eq!(j["total_parameters"], 44);
    assert_eq!(j["metadata"], serde_json::json!({"format": "pt"}));

    let j = inspect_json(&vector("odd_names.safetensors"), &[]);
    let names: Vec<&str> = j["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"ctrl\x01\x1f\n\ttab"), "{names:?}");
    assert!(names.contains(&""), "{names:?}");
    assert!(names.contains(&"quote\"back\\slash"), "{names:?}");
}

#[test]
fn pread_gives_the_same_inspect_json_as_mmap() {
    for p in valid_vectors() {
        let a = inspect_json(&p, &[]);
        let b = inspect_json(&p, &["--pread"]);
        assert_eq!(a, b, "{}", p.display());
    }
}

// ---------------------------------------------------------------------------------------------
// validate

#[test]
fn validate_accepts_every_valid_vector() {
    let files = valid_vectors();
    let mut args = vec![std::ffi::OsString::from("validate")];
    args.extend(files.iter().map(|p| p.as_os_str().to_owned()));
    let out = stdout(&run_expect(&args, 0));
    assert_eq!(out.lines().count(), files.len(), "{out}");
    assert!(out.lines().all(|l| l.starts_with("ok: ")), "{out}");
    assert!(out.contains("mixed_meta1.safetensors (8 tensors)"), "{out}");
    assert!(out.contains("empty.safetensors (0 tensors)"), "{out}");

    // --pread and --quiet.
    args.insert(1, "--pread".into());
    args.insert(1, "--quiet".into());
    let o = run_expect(&args, 0);
    assert!(o.stdout.is_empty(), "{}", stdout(&o));
}

#[test]
fn validate_reports_each_invalid_file_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = small_valid_bytes();
    let mut truncated = good.clone();
    truncated.pop();
    let mut trailing = good.clone();
    trailing.push(0);
    let ok = dir.path().join("ok.safetensors");
    let tr = dir.path().join("truncated.safetensors");
    let tb = dir.path().join("trailing.safetensors");
    std::fs::write(&ok, &good).unwrap();
    std::fs::write(&tr, &truncated).unwrap();
    std::fs::write(&tb, &trailing).unwrap();
    let bad_ref = vector("reference_invalid_empty_meta.safetensors");

    let o = run_expect(
        [
            ok.as_os_str(),
            tr.as_os_str(),
            tb.as_os_str(),
            bad_ref.as_os_str(),
        ]
        .into_iter()
        .fold(vec![std::ffi::OsStr::new("validate")], |mut v, a| {
            v.push(a);
            v
        }),
        1,
    );
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("ok: ") && lines[0].contains("ok.safetensors"));
    let invalid: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("invalid: "))
        .collect();
    assert_eq!(invalid.len(), 3, "{out}");
    let find = |f: &str| {
        *invalid
            .iter()
            .find(|l| l.contains(f))
            .unwrap_or_else(|| panic!("no line for {f} in:\n{out}"))
    };
    assert!(find("truncated.safetensors").contains("truncated"), "{out}");
    assert!(
        find("trailing.safetensors").contains("1 trailing bytes"),
        "{out}"
    );
    assert!(
        find("reference_invalid_empty_meta.safetensors").contains("not valid JSON"),
        "{out}"
    );
}

#[test]
fn validate_names_the_rule_for_crafted_files() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, usize, &str)] = &[
        (
            "hole",
            r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
            2,
            "hole",
        ),
        (
            "size",
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
            4,
            "does not match",
        ),
        (
            "dtype",
            r#"{"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}"#,
            4,
            "unknown dtype",
        ),
        (
            "dup",
            r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
            2,
            "twice",
        ),
    ];
    for (name, header, data, rule) in cases {
        let p = craft(
            dir.path(),
            &format!("{name}.safetensors"),
            header,
            &vec![0; *data],
        );
        let out = stdout(&run_expect(["validate".as_ref(), p.as_os_str()], 1));
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(out.starts_with("invalid: "), "{out}");
        assert!(out.contains(&format!("{name}.safetensors")), "{out}");
        assert!(out.contains(rule), "{name}: {out}");
    }
    // A file shorter than 8 bytes.
    let p = dir.path().join("tiny.safetensors");
    std::fs::write(&p, b"\x02\0\0").unwrap();
    let out = stdout(&run_expect(["validate".as_ref(), p.as_os_str()], 1));
    assert!(
        out.contains("tiny.safetensors") && out.contains("smaller"),
        "{out}"
    );
}

#[test]
fn validate_exits_2_for_unreadable_files_and_bad_usage() {
    let missing = "/nonexistent/missing.safetensors";
    let o = run_expect(["validate", missing], 2);
    assert!(
        stdout(&o).contains(missing) || stderr(&o).contains(missing),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    // An error wins over an invalid file, whatever the order.
    let bad = vector("reference_invalid_empty_meta.safetensors");
    let bad = bad.to_str().unwrap();
    run_expect(["validate", bad, missing], 2);
    run_expect(["validate", missing, bad], 2);
    // Still reports the valid file it could read.
    let good = vector("dtype_bool.safetensors");
    let o = run_expect(["validate", good.to_str().unwrap(), missing], 2);
    assert!(stdout(&o).contains("ok: "), "{}", stdout(&o));
    // A folder is a model of shards: here one of them is invalid, and is named.
    let o = run_expect(["validate", data_dir().to_str().unwrap()], 1);
    assert!(
        stdout(&o).contains("reference_invalid_empty_meta.safetensors"),
        "{}",
        stdout(&o)
    );

    // Usage errors.
    run_expect(Vec::<&str>::new(), 2);
    run_expect(["validate"], 2);
    let o = run_expect(["validate", "--no-such-flag", good.to_str().unwrap()], 2);
    assert!(stderr(&o).contains("--no-such-flag"), "{}", stderr(&o));
    run_expect(["frobnicate"], 2);
    run_expect(
        [
            "validate",
            "--max-header-size",
            "lots",
            good.to_str().unwrap(),
        ],
        2,
    );
}

#[test]
fn max_header_size_below_the_header_is_invalid() {
    let p = vector("dtype_bool.safetensors");
    let bytes = std::fs::read(&p).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let p = p.to_str().unwrap();
    let o = run_expect(
        ["validate", "--max-header-size", &(n - 1).to_string(), p],
        1,
    );
    let out = stdout(&o);
    assert!(
        out.starts_with("invalid: ") && out.contains("dtype_bool"),
        "{out}"
    );
    assert!(out.contains("exceeds the limit"), "{out}");
    // Exactly the header size is allowed.
    run_expect(["validate", "--max-header-size", &n.to_string(), p], 0);
    run_expect(["validate", "--pread", "--max-header-size", "8", p], 1);
}

/// A safetensors output's header is held to the same limit: a file past it would be one no
/// reader opens with its default limit (the reference refuses to write it too).
#[test]
fn a_safetensors_output_over_the_header_limit_is_refused_and_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    let mut w = Writer::new();
    for i in 0..40u8 {
        w.add(&format!("layer.{i}.weight"), DType::U8, &[1], vec![i])
            .unwrap();
    }
    w.write_file(&src).unwrap();
    let header_of =
        |p: &Path| u64::from_le_bytes(std::fs::read(p).unwrap()[..8].try_into().unwrap());
    let n = header_of(&src).to_string();
    // The input's header is within the limit; the output's, with a digest record, is not.
    let out = dir.path().join("out.safetensors");
    let (s, o) = (src.to_str().unwrap(), out.to_str().unwrap());
    let e = run_expect(
        [
            "convert",
            "--max-header-size",
            &n,
            "--digest",
            "crc32c",
            s,
            o,
        ],
        2,
    );
    assert!(stderr(&e).contains("exceeds the limit"), "{}", stderr(&e));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing written"
    );
    run_expect(["convert", "--digest", "crc32c", s, o], 0);
    let m = header_of(&out).to_string();
    std::fs::remove_file(&out).unwrap();
    run_expect(
        [
            "convert",
            "--max-header-size",
            &m,
            "--digest",
            "crc32c",
            s,
            o,
        ],
        0,
    );
    run_expect(["verify", o], 0);
}

// ---------------------------------------------------------------------------------------------
// validate --schema

#[test]
fn schema_accepts_every_valid_vector_including_dtypes_the_pattern_misses() {
    for p in valid_vectors() {
        let o = run_expect(["validate".as_ref(), "--schema".as_ref(), p.as_os_str()], 0);
        assert!(stdout(&o).starts_with("ok: "), "{}", stdout(&o));
    }
}

#[test]
fn schema_rejects_unknown_tensor_fields_that_the_reader_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let p = craft(
        dir.path(),
        "extra.safetensors",
        r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}}"#,
        &[0; 4],
    );
    // The reader ignores unknown fields...
    run_expect(["validate".as_ref(), p.as_os_str()], 0);
    // ...the schema does not.
    let o = run_expect(["validate".as_ref(), "--schema".as_ref(), p.as_os_str()], 1);
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("invalid: ") && out.contains("extra.safetensors"),
        "{out}"
    );
    assert!(out.contains("schema") && out.contains("extra"), "{out}");

    // A BOOL and a C64 tensor (names the dtype pattern misses) are fine.
    let mut data = vec![1u8];
    data.extend_from_slice(&[0; 8]);
    let p = craft(
        dir.path(),
        "misses.safetensors",
        r#"{"b":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},"c":{"dtype":"C64","shape":[],"data_offsets":[1,9]}}"#,
        &data,
    );
    run_expect(["validate".as_ref(), "--schema".as_ref(), p.as_os_str()], 0);
}

// ---------------------------------------------------------------------------------------------
// convert

#[test]
fn convert_is_byte_identical_for_reference_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for case in expected_cases() {
        if case["byte_identical"] != true {
            continue;
        }
        // The reader does not keep an empty `__metadata__` apart from none.
        if case["metadata"].as_object().is_some_and(|m| m.is_empty()) {
            continue;
        }
        let file = case["file"].as_str().unwrap();
        let input = vector(file);
        let out = dir.path().join(file);
        run_expect(["convert".as_ref(), input.as_os_str(), out.as_os_str()], 0);
        let a = std::fs::read(&input).unwrap();
        let b = std::fs::read(&out).unwrap();
        assert!(a == b, "{file}: output differs from the reference bytes");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} cases checked");
    // Nothing but the outputs in the folder.
    assert_eq!(files_in(dir.path()).len(), checked);
}

#[test]
fn convert_keeps_metadata_of_files_with_several_keys() {
    let dir = tempfile::tempdir().unwrap();
    let input = vector("mixed_meta3.safetensors");
    let out = dir.path().join("out.safetensors");
    run_expect(["convert".as_ref(), input.as_os_str(), out.as_os_str()], 0);
    let mut a = inspect_json(&input, &[]);
    let mut b = inspect_json(&out, &[]);
    for j in [&mut a, &mut b] {
        j.as_object_mut().unwrap().remove("file");
        // Metadata keys are written sorted: the header length may differ by padding only.
        j.as_object_mut().unwrap().remove("file_size");
        j.as_object_mut().unwrap().remove("header_size");
    }
    assert_eq!(a, b);
    let f = SafetensorsFile::open(&out).unwrap();
    let g = SafetensorsFile::open(&input).unwrap();
    for t in &g.index().tensors {
        assert_eq!(f.read_vec(&t.name).unwrap(), g.read_vec(&t.name).unwrap());
    }
}

/// Writes an F32 file with tensor "x" holding `values` (as bit patterns) and an I32 tensor
/// "keep", converts it with the given options and returns the output's "x" as u16 patterns.
fn convert_bits(input_dtype: DType, values: &[u64], cli: &[&str]) -> Vec<u16> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    let output = dir.path().join("out.safetensors");
    let bytes: Vec<u8> = match input_dtype {
        DType::F32 => values
            .iter()
            .flat_map(|&v| (v as u32).to_le_bytes())
            .collect(),
        DType::F64 => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        _ => unreachable!(),
    };
    let keep: Vec<u8> = (0..12u8).collect();
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    let mut w = Writer::new();
    w.metadata(meta.clone());
    w.add("x", input_dtype, &[values.len() as u64], bytes)
        .unwrap();
    w.add("keep", DType::I32, &[3], keep.clone()).unwrap();
    w.write_file(&input).unwrap();

    let mut args = vec!["convert".as_ref(), input.as_os_str(), output.as_os_str()];
    args.extend(cli.iter().map(std::ffi::OsStr::new));
    run_expect(args, 0);

    let f = SafetensorsFile::open(&output).unwrap();
    let x = f.index().get("x").unwrap();
    let want = if cli.contains(&"F16") || cli.contains(&"f16") {
        DType::F16
    } else {
        DType::BF16
    };
    assert_eq!(x.dtype, want);
    assert_eq!(x.shape[..], [values.len() as u64]);
    // Other tensors and metadata pass through unchanged.
    let k = f.index().get("keep").unwrap();
    assert_eq!(k.dtype, DType::I32);
    assert_eq!(f.read_vec("keep").unwrap(), keep);
    assert_eq!(
        f.metadata().get("format"),
        Some(&tensorsmith::index::MetaValue::Str("pt".into()))
    );
    f.read_vec("x")
        .unwrap()
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn f32b(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// Compares output bit patterns with a table, showing every mismatch.
fn check_table(got: &[u16], table: &[(u64, u16)], what: &str) {
    let bad: Vec<String> = got
        .iter()
        .zip(table)
        .filter(|(g, (_, w))| *g != w)
        .map(|(g, (i, w))| format!("input {i:#x}: got {g:#06x}, want {w:#06x}"))
        .collect();
    assert!(bad.is_empty(), "{what}:\n{}", bad.join("\n"));
    assert_eq!(got.len(), table.len());
}

#[test]
fn convert_f32_to_f16_nearest_rounds_ties_to_even() {
    let p2 = |e: i32| 2f32.powi(e);
    let table: &[(u64, u16)] = &[
        (f32b(1.0), 0x3c00),
        (f32b(-2.0), 0xc000),
        (0x3f80_1000, 0x3c00), // 1 + 2^-11: tie, to even (down)
        (0x3f80_3000, 0x3c02), // 1 + 3*2^-11: tie, to even (up)
        (0x3f80_1001, 0x3c01), // just above the tie
        (f32b(0.1), 0x2e66),
        (f32b(0.7), 0x399a),
        (f32b(65504.0), 0x7bff),
        (f32b(65519.0), 0x7bff),
        (f32b(65520.0), 0x7c00), // tie between max and 2^16: to even (inf)
        (f32b(1e10), 0x7c00),
        (f32b(p2(-14)), 0x0400),
        (f32b(p2(-15)), 0x0200),       // subnormal
        (f32b(p2(-24)), 0x0001),       // smallest subnormal
        (f32b(p2(-25)), 0x0000),       // tie with zero: to even
        (f32b(3.0 * p2(-25)), 0x0002), // tie between 1 and 2 ulps
        (f32b(-p2(-20)), 0x8010),
        (f32b(1e-8), 0x0000),
        (0x387f_ffff, 0x0400), // just below 2^-14 rounds up to it
        (f32b(-0.0), 0x8000),
        (f32b(f32::INFINITY), 0x7c00),
        (f32b(f32::NEG_INFINITY), 0xfc00),
        (0x7fc0_0000, 0x7e00), // NaN
        (0xffc0_0000, 0xfe00), // -NaN
    ];
    let input: Vec<u64> = table.iter().map(|t| t.0).collect();
    let got = convert_bits(DType::F32, &input, &["--dtype", "F16"]);
    check_table(&got, table, "F16 nearest (default)");
    let got = convert_bits(
        DType::F32,
        &input,
        &["--dtype", "f16", "--rounding", "nearest"],
    );
    check_table(&got, table, "F16 nearest");
}

#[test]
fn convert_f32_to_f16_truncate_drops_bits_and_flushes() {
    let p2 = |e: i32| 2f32.powi(e);
    let table: &[(u64, u16)] = &[
        (f32b(1.0), 0x3c00),
        (0x3f80_3000, 0x3c01), // 1 + 3*2^-11: low bits dropped
        (0x3f80_1fff, 0x3c00),
        (f32b(0.7), 0x3999),
        (f32b(-0.7), 0xb999),
        (f32b(65504.0), 0x7bff),
        (f32b(65535.0), 0x7bff),
        (f32b(65536.0), 0x7c00),
        (f32b(-70000.0), 0xfc00),
        (f32b(p2(-14)), 0x0400),
        (0x387f_ffff, 0x0000), // just below 2^-14: flushed
        (f32b(p2(-15)), 0x0000),
        (f32b(p2(-24)), 0x0000),
        (f32b(-p2(-20)), 0x8000), // signed zero
        (0x0000_0001, 0x0000),    // f32 subnormal
        (f32b(-0.0), 0x8000),
        (f32b(f32::INFINITY), 0x7c00),
        (f32b(f32::NEG_INFINITY), 0xfc00),
        (0x7fc0_0000, 0x7e00),
        (0x7f80_0001, 0x7e00), // signalling NaN
        (0xffc0_0000, 0xfe00),
    ];
    let input: Vec<u64> = table.iter().map(|t| t.0).collect();
    let got = convert_bits(
        DType::F32,
        &input,
        &["--dtype", "F16", "--rounding", "truncate"],
    );
    check_table(&got, table, "F16 truncate");
}

#[test]
fn convert_f32_to_bf16_nearest_and_truncate() {
    // (input, nearest, truncate)
    let rows: &[(u32, u16, u16)] = &[
        (0x3f80_0000, 0x3f80, 0x3f80),
        (0x3f80_8000, 0x3f80, 0x3f80), // tie, even below
        (0x3f81_8000, 0x3f82, 0x3f81), // tie, odd below
        (0x3f80_8001, 0x3f81, 0x3f80),
        (0x3f80_ffff, 0x3f81, 0x3f80),
        (0xbf80_ffff, 0xbf81, 0xbf80),
        (0x7f7f_ffff, 0x7f80, 0x7f7f), // f32::MAX overflows to inf when rounding
        (0x0001_0000, 0x0001, 0x0001), // subnormal
        (0x0000_8000, 0x0000, 0x0000), // tie with zero
        (0x0001_8000, 0x0002, 0x0001),
        (0x8000_0000, 0x8000, 0x8000),
        (0x7f80_0000, 0x7f80, 0x7f80),
        (0xff80_0000, 0xff80, 0xff80),
        (0x7fc0_0000, 0x7fc0, 0x7fc0),
        (0x3dcc_cccd, 0x3dcd, 0x3dcc), // 0.1
    ];
    let input: Vec<u64> = rows.iter().map(|r| u64::from(r.0)).collect();
    let nearest: Vec<(u64, u16)> = rows.iter().map(|r| (u64::from(r.0), r.1)).collect();
    let truncate: Vec<(u64, u16)> = rows.iter().map(|r| (u64::from(r.0), r.2)).collect();
    let got = convert_bits(
        DType::F32,
        &input,
        &["--dtype", "BF16", "--rounding", "nearest"],
    );
    check_table(&got, &nearest, "BF16 nearest");
    let got = convert_bits(DType::F32, &input, &["--dtype", "bf16"]);
    check_table(&got, &nearest, "BF16 default");
    let got = convert_bits(
        DType::F32,
        &input,
        &["--dtype", "BF16", "--rounding", "truncate"],
    );
    check_table(&got, &truncate, "BF16 truncate");
}

#[test]
fn convert_f64_to_f16_rounds_once() {
    let p2 = |e: i32| 2f64.powi(e);
    let b = |x: f64| x.to_bits();
    let table: &[(u64, u16)] = &[
        // Just above the f16 tie: f64 -> f32 -> f16 would round to the tie, then to even.
        (b(1.0 + p2(-11) + p2(-40)), 0x3c01),
        (b(1.0 + p2(-11)), 0x3c00),
        (b(65519.999), 0x7bff),
        (b(p2(-25) + p2(-60)), 0x0001),
        (b(-0.0), 0x8000),
        (b(f64::NAN), 0x7e00),
    ];
    let input: Vec<u64> = table.iter().map(|t| t.0).collect();
    let got = convert_bits(DType::F64, &input, &["--dtype", "F16"]);
    check_table(&got, table, "F64 -> F16 nearest");
}

#[test]
fn convert_rejects_unknown_dtypes_and_roundings() {
    let dir = tempfile::tempdir().unwrap();
    let input = vector("dtype_float32.safetensors");
    let out = dir.path().join("out.safetensors");
    for args in [
        vec!["--dtype", "F17"],
        vec!["--dtype", "F16", "--rounding", "up"],
        vec!["--dtype", "I32"],
        // A rounding without a cast would be ignored: refused instead.
        vec!["--rounding", "truncate"],
        vec!["--rounding", "nearest"],
    ] {
        let mut a = vec!["convert".as_ref(), input.as_os_str(), out.as_os_str()];
        a.extend(args.iter().map(std::ffi::OsStr::new));
        run_expect(a, 2);
        assert!(files_in(dir.path()).is_empty(), "{args:?}");
    }
}

#[test]
fn convert_of_a_missing_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    let o = run_expect(
        [
            "convert".as_ref(),
            dir.path().join("missing.safetensors").as_os_str(),
            out.as_os_str(),
        ],
        2,
    );
    assert!(stderr(&o).contains("missing.safetensors"), "{}", stderr(&o));
    assert!(!out.exists());
    assert!(files_in(dir.path()).is_empty());

    // An invalid input is refused the same way, and an existing output is left alone.
    std::fs::write(&out, b"keep me").unwrap();
    let bad = vector("reference_invalid_empty_meta.safetensors");
    run_expect(["convert".as_ref(), bad.as_os_str(), out.as_os_str()], 2);
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    assert_eq!(files_in(dir.path()), ["out.safetensors"]);
}

#[test]
fn convert_replaces_an_existing_output_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    std::fs::copy(vector("mixed_meta1.safetensors"), &input).unwrap();
    let out = dir.path().join("out.safetensors");
    std::fs::write(&out, vec![0xAAu8; 10_000]).unwrap();
    // Keep the old output open: it must still read the old bytes after the replace.
    let old = std::fs::File::open(&out).unwrap();
    run_expect(["convert".as_ref(), input.as_os_str(), out.as_os_str()], 0);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&input).unwrap());
    let mut old_bytes = Vec::new();
    std::io::Read::read_to_end(&mut &old, &mut old_bytes).unwrap();
    assert_eq!(old_bytes, vec![0xAAu8; 10_000]);
    assert_eq!(files_in(dir.path()), ["in.safetensors", "out.safetensors"]);

    // Converting over the input itself works too (the input is mapped while it is replaced).
    run_expect(
        [
            "convert".as_ref(),
            input.as_os_str(),
            input.as_os_str(),
            "--dtype".as_ref(),
            "F32".as_ref(),
        ],
        0,
    );
    let f = SafetensorsFile::open(&input).unwrap();
    assert_eq!(
        f.index().get("model.layers.2.weight").unwrap().dtype,
        DType::F32
    );
    assert_eq!(f.index().get("ids").unwrap().dtype, DType::I64);
    assert_eq!(files_in(dir.path()), ["in.safetensors", "out.safetensors"]);
}

#[test]
fn convert_onto_a_folder_fails_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let input = vector("mixed_meta1.safetensors");
    run_expect(["convert".as_ref(), input.as_os_str(), out.as_os_str()], 2);
    assert!(out.is_dir());
    assert_eq!(files_in(dir.path()), ["out"]);
}
