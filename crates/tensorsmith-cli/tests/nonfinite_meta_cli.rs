//! GGUF float metadata JSON cannot hold (NaN, +inf, -inf; tests/data/gguf/nonfinite_meta.gguf,
//! written by gguf 0.19.0): `inspect` spells it in text as Python's `repr` does and in JSON as
//! the strings "NaN", "Infinity", "-Infinity"; every conversion keeps it (zTensor v2 as CBOR
//! floats, safetensors and zTensor v1.1 as `repr` text); `diff` compares values.

#[path = "support/cli.rs"]
mod cli;
use cli::{data, p, run};
use serde_json::{json, Value};
use std::path::Path;
use tensorsmith::index::MetaValue;

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn text_meta(path: &Path, key: &str) -> String {
    let m = tensorsmith::open(p(path), &tensorsmith::OpenOptions::new()).unwrap();
    match m.index.metadata.get(key) {
        Some(MetaValue::Str(s)) => s.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

#[test]
fn inspect_json_spells_nan_and_infinities_as_strings() {
    let v: Value = serde_json::from_str(&ok(&[
        "inspect",
        "--json",
        &data("gguf/nonfinite_meta.gguf"),
    ]))
    .unwrap();
    let m = &v["metadata"];
    assert_eq!(m["t.nan32"], "NaN");
    assert_eq!(m["t.inf32"], "Infinity");
    assert_eq!(m["t.ninf64"], "-Infinity");
    assert_eq!(m["t.nan64"], "NaN");
    assert_eq!(m["t.half32"], 0.5);
    assert_eq!(m["t.arr_f32"], json!([0.0, "-Infinity", -1.0]));
    assert_eq!(m["t.arr_f64"], json!(["NaN", "Infinity", 1.5]));
}

#[test]
fn inspect_text_spells_them_as_python_does() {
    let text = ok(&["inspect", &data("gguf/nonfinite_meta.gguf")]);
    for line in [
        "t.nan32: nan",
        "t.inf32: inf",
        "t.ninf64: -inf",
        "t.arr_f32: [0.0,-inf,-1.0]",
        "t.arr_f64: [nan,inf,1.5]",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    assert!(!text.contains("null"), "{text}");
}

#[test]
fn conversions_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("m.safetensors");
    ok(&["convert", &data("gguf/nonfinite_meta.gguf"), p(&st)]);
    assert_eq!(text_meta(&st, "t.nan32"), "nan");
    assert_eq!(text_meta(&st, "t.inf32"), "inf");
    assert_eq!(text_meta(&st, "t.ninf64"), "-inf");
    assert_eq!(text_meta(&st, "t.arr_f32"), "[0.0,-inf,-1.0]");

    let v11 = dir.path().join("m11.zt");
    ok(&[
        "convert",
        &data("gguf/nonfinite_meta.gguf"),
        p(&v11),
        "--zt-version",
        "1.1",
    ]);
    assert_eq!(text_meta(&v11, "t.nan64"), "nan");
    assert_eq!(text_meta(&v11, "t.arr_f64"), "[nan,inf,1.5]");

    // zTensor v2 keeps them as CBOR floats: the same values, so diff finds no change.
    let v2 = dir.path().join("m2.zt");
    ok(&["convert", &data("gguf/nonfinite_meta.gguf"), p(&v2)]);
    let m = tensorsmith::open(p(&v2), &tensorsmith::OpenOptions::new()).unwrap();
    let md = &m.index.metadata;
    assert!(
        matches!(md["t.nan32"], MetaValue::F64(f) if f.is_nan()),
        "{md:?}"
    );
    assert!(matches!(md["t.ninf64"], MetaValue::F64(f) if f == f64::NEG_INFINITY));
    let text = ok(&["diff", &data("gguf/nonfinite_meta.gguf"), p(&v2)]);
    assert!(text.contains("same structure and metadata"), "{text}");

    // GGUF to GGUF keeps the types and the values.
    let g = dir.path().join("m.gguf");
    ok(&["convert", &data("gguf/nonfinite_meta.gguf"), p(&g)]);
    let text = ok(&["diff", &data("gguf/nonfinite_meta.gguf"), p(&g)]);
    assert!(text.contains("same structure and metadata"), "{text}");
}

#[test]
fn diff_compares_values_not_renderings() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.gguf"), dir.path().join("b.gguf"));
    ok(&[
        "convert",
        &data("gguf/nonfinite_meta.gguf"),
        p(&a),
        "--set",
        "t.x=f32:inf",
    ]);
    ok(&[
        "convert",
        &data("gguf/nonfinite_meta.gguf"),
        p(&b),
        "--set",
        "t.x=f32:-inf",
    ]);
    let o = run(&["diff", p(&a), p(&b)]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("~ metadata t.x: inf -> -inf"), "{text}");
    assert!(!text.contains("null"), "{text}");
    let o = run(&["diff", "--json", p(&a), p(&b)]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let changed = v["metadata"]["changed"].as_array().unwrap();
    assert_eq!(changed.len(), 1, "{v}");
    assert_eq!(changed[0]["a"], "Infinity");
    assert_eq!(changed[0]["b"], "-Infinity");
}
