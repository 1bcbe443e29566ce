//! `tensorsmith diff`: exit codes (0 same, 1 different, 2 error), names in every output form,
//! value comparison across dtypes and across formats (GGUF against safetensors).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tensorsmith::dtype::DType;
use tensorsmith::gguf::GgufFile;
use tensorsmith::safetensors::Writer;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A model: `layer.{i}.weight` F32 [4, 8] with smooth values, plus metadata.
fn model(path: &Path, names: &[&str], meta: &[(&str, &str)], scale: f32) {
    let mut w = Writer::new();
    for (i, name) in names.iter().enumerate() {
        let data: Vec<u8> = (0..32)
            .flat_map(|j| ((i * 32 + j) as f32 * 0.01 * scale).to_le_bytes())
            .collect();
        w.add(name, DType::F32, &[4, 8], data).unwrap();
    }
    if !meta.is_empty() {
        w.metadata(
            meta.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
    }
    w.write_file(path).unwrap();
}

#[test]
fn same_files_exit_0_and_differences_exit_1_with_names() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        dir.path().join("a.safetensors"),
        dir.path().join("b.safetensors"),
        dir.path().join("c.safetensors"),
    );
    model(&a, &["enc.weight", "dec.weight"], &[("format", "pt")], 1.0);
    model(&b, &["enc.weight", "dec.weight"], &[("format", "pt")], 1.0);
    model(
        &c,
        &["enc.weight", "head|out.weight"],
        &[("format", "np"), ("x", "1")],
        1.0,
    );

    let o = run(&["diff", p(&a), p(&b)]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(out(&o).contains("same structure and metadata"));

    let o = run(&["diff", p(&a), p(&c)]);
    assert_eq!(o.status.code(), Some(1));
    let text = out(&o);
    assert!(text.contains("- tensor dec.weight  F32 [4, 8]"), "{text}");
    assert!(
        text.contains("+ tensor head|out.weight  F32 [4, 8]"),
        "{text}"
    );
    assert!(text.contains("~ metadata format: pt -> np"), "{text}");
    assert!(text.contains("+ metadata x: 1"), "{text}");

    let o = run(&["diff", "--json", p(&a), p(&c)]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "tensorsmith.diff/1");
    assert_eq!(v["same"], false);
    assert_eq!(v["tensors"]["removed"][0]["name"], "dec.weight");
    assert_eq!(v["tensors"]["added"][0]["name"], "head|out.weight");
    assert_eq!(v["metadata"]["changed"][0]["key"], "format");
    assert_eq!(v["values"], Value::Null);

    let o = run(&["diff", "--format", "md", p(&a), p(&c)]);
    let md = out(&o);
    assert!(
        md.contains("| added | head\\|out.weight | | F32 [4, 8] (128 B) |"),
        "{md}"
    );
    assert!(md.contains("| changed | format | pt | np |"), "{md}");
}

#[test]
fn values_are_compared_across_dtypes() {
    let dir = tempfile::tempdir().unwrap();
    let (a, half, scaled) = (
        dir.path().join("a.safetensors"),
        dir.path().join("h.safetensors"),
        dir.path().join("s.safetensors"),
    );
    model(&a, &["w"], &[], 1.0);
    model(&scaled, &["w"], &[], 1.5);
    let o = run(&["convert", p(&a), p(&half), "--dtype", "F16"]);
    assert!(o.status.success());

    // F32 against its F16 cast: a structural change, and small value differences.
    let o = run(&["diff", "--values", "--json", p(&a), p(&half)]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["tensors"]["changed"][0]["fields"],
        serde_json::json!(["dtype", "byte_length"])
    );
    let w = &v["values"]["compared"][0];
    assert_eq!(w["name"], "w");
    assert_eq!(w["elements"], 32);
    let max = w["max_abs_diff"].as_f64().unwrap();
    assert!(
        max > 0.0 && max < 2e-4,
        "F16 rounding of values below 0.32: {max}"
    );

    // Values scaled by 1.5: every element but the zero differs, max |a-b| = 0.5 * 0.31.
    let o = run(&["diff", "--values", "--json", p(&a), p(&scaled)]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = &v["values"]["compared"][0];
    assert_eq!(w["differing"], 31);
    let max = w["max_abs_diff"].as_f64().unwrap();
    assert!((max - 0.155).abs() < 1e-6, "{max}");

    // Identical values: --all lists them, and the files compare the same.
    let o = run(&["diff", "--values", "--all", p(&a), p(&a)]);
    assert_eq!(o.status.code(), Some(0));
    assert!(out(&o).contains("= values w: identical"), "{}", out(&o));
}

#[test]
fn gguf_against_safetensors_with_the_same_plain_tensors() {
    // Copy the plain tensors of a gguf-written file into safetensors (shapes outermost
    // first); the block-quantized ones stay behind.
    let gguf =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gguf/every_type.gguf");
    let f = GgufFile::open(&gguf).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("plain.safetensors");
    let mut w = Writer::new();
    for t in &f.header().tensors {
        if let Some(d) = t.ggml_type.dtype() {
            w.add(
                &t.name,
                d,
                &t.shape(),
                f.tensor_bytes(t).unwrap().into_owned(),
            )
            .unwrap();
        }
    }
    w.write_file(&st).unwrap();

    let o = run(&["diff", "--values", "--json", p(&gguf), p(&st)]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let removed: Vec<&str> = v["tensors"]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(removed, ["q4_0", "q8_0"]);
    assert_eq!(v["tensors"]["changed"], serde_json::json!([]));
    assert!(v["metadata"]["removed"].as_array().unwrap().len() > 20);
    // Same bytes in the same layout: every pair listed as identical with zero error, nothing
    // not compared.
    let compared = v["values"]["compared"].as_array().unwrap();
    assert_eq!(compared.len(), 8, "{compared:?}");
    for c in compared {
        assert_eq!(
            (&c["identical"], &c["max_abs_diff"]),
            (&true.into(), &0.0.into()),
            "{c}"
        );
    }
    assert_eq!(v["values"]["not_compared"], serde_json::json!([]));
}

#[test]
fn errors_exit_2_and_name_the_file() {
    let o = run(&[
        "diff",
        "/nonexistent/a.safetensors",
        "/nonexistent/b.safetensors",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/a.safetensors"));
}

/// A renamed tensor is found across formats: safetensors against zTensor v1.1 and v2, with
/// the structural ID and content digest changing with it.
#[test]
fn renamed_tensor_across_formats() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.safetensors");
    let b = dir.path().join("b.safetensors");
    model(&a, &["enc.weight", "dec.weight"], &[("format", "pt")], 1.0);
    model(
        &b,
        &["enc.weight", "decoder.weight"],
        &[("format", "pt")],
        1.0,
    );
    let hash = |f: &Path| out(&run(&["hash", "--content", p(f)]));
    for v in ["1.1", "2"] {
        let za = dir.path().join(format!("a{v}.zt"));
        let zb = dir.path().join(format!("b{v}.zt"));
        for (src, dst) in [(&a, &za), (&b, &zb)] {
            let o = run(&["convert", p(src), p(dst), "--zt-version", v]);
            assert_eq!(
                o.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        assert_eq!(
            run(&["diff", "--values", p(&a), p(&za)]).status.code(),
            Some(0)
        );
        let o = run(&["diff", "--values", p(&a), p(&zb)]);
        assert_eq!(o.status.code(), Some(1));
        let text = out(&o);
        assert!(text.contains("- tensor dec.weight  F32 [4, 8]"), "{text}");
        assert!(
            text.contains("+ tensor decoder.weight  F32 [4, 8]"),
            "{text}"
        );
        let (ha, hza, hzb) = (hash(&a), hash(&za), hash(&zb));
        let fields = |h: &str| {
            h.split("  ")
                .take(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(&ha), fields(&hza), "same model, same ID and digest");
        let (fa, fb) = (fields(&ha), fields(&hzb));
        assert_ne!(fa[0], fb[0], "a renamed tensor changes the structural ID");
    }
}
