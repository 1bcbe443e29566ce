//! `tensorsmith stats`: the table, the JSON document checked against its schema
//! (`schemas/stats.schema.json`), `--tensors`, `--check` exit codes and the tensors it names,
//! `--allow-zero`, block-quantized GGUF tensors measured on their dequantized values, and a
//! closed stdout.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use tensorsmith::dtype::DType;
use tensorsmith::ggml_quant;
use tensorsmith::gguf::{GgmlType, Writer as GgufWriter};
use tensorsmith::safetensors::Writer;

const SCHEMA: &str = include_str!("../schemas/stats.schema.json");

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `stats --json` of `args`, checked against the schema; tensors by name.
fn json(args: &[&str]) -> serde_json::Map<String, Value> {
    let o = run(&[&["stats", "--json"], args].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(doc["schema"], "tensorsmith.stats/1");
    doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t.clone()))
        .collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A model with a float tensor of known values, NaN and Inf, zero tensors, ints and BF16.
fn model(path: &Path) {
    let mut w = Writer::new();
    w.add(
        "layer.0.weight",
        DType::F32,
        &[2, 3],
        f32_bytes(&[1.0, -2.0, 0.5, 70000.0, 0.0, 2e-8]),
    )
    .unwrap();
    w.add(
        "layer.0.bad",
        DType::F32,
        &[4],
        f32_bytes(&[1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY]),
    )
    .unwrap();
    w.add("layer.0.bias", DType::F32, &[3], f32_bytes(&[0.0; 3]))
        .unwrap();
    w.add("lora_B.weight", DType::F16, &[2, 2], vec![0u8; 8])
        .unwrap();
    w.add("scalar_zero", DType::F32, &[], f32_bytes(&[0.0]))
        .unwrap();
    let ids: Vec<u8> = [0i32, 5, 9, -3]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    w.add("position_ids", DType::I32, &[4], ids).unwrap();
    let bf: Vec<u8> = [0x3f80u16, 0xc000, 0x0001, 0x7f80]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    w.add("bf", DType::BF16, &[4], bf).unwrap();
    w.write_file(path).unwrap();
}

#[test]
fn json_numbers_are_exact_and_valid_against_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    model(&m);
    let t = json(&[p(&m)]);
    assert_eq!(t.len(), 7);
    let w = &t["layer.0.weight"];
    assert_eq!(w["kind"], "float");
    assert_eq!(w["count"], 6);
    assert_eq!(w["min"], -2.0);
    assert_eq!(w["max"], 70000.0);
    assert_eq!(w["zeros"], 1);
    let vals = [1.0f64, -2.0, 0.5, 70000.0, 0.0, f64::from(2e-8f32)];
    let mean = vals.iter().sum::<f64>() / 6.0;
    let std = (vals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 6.0).sqrt();
    assert!((w["mean"].as_f64().unwrap() - mean).abs() <= 1e-6 * mean.abs());
    assert!((w["std"].as_f64().unwrap() - std).abs() <= 1e-6 * std);
    // 70000 overflows F16 and both FP8 types; 2e-8 flushes in F16 (≤ 2^-25) and FP8.
    let sixth = 1.0 / 6.0;
    assert_eq!(w["overflow"]["f16"], sixth);
    assert_eq!(w["overflow"]["bf16"], 0.0);
    assert_eq!(w["overflow"]["f8_e4m3fn"], sixth);
    assert_eq!(w["overflow"]["f8_e5m2"], sixth);
    assert_eq!(w["flush"]["f16"], sixth);
    assert_eq!(w["flush"]["bf16"], 0.0);
    // floor(log2) of 2e-8 is -26; of 70000, 16.
    assert_eq!(w["exponents"]["first"], -26);
    let counts = w["exponents"]["counts"].as_array().unwrap();
    assert_eq!(counts.len(), 16 + 26 + 1);
    assert_eq!(counts[counts.len() - 1], 1);
    let bad = &t["layer.0.bad"];
    assert_eq!(
        (&bad["nan"], &bad["pos_inf"], &bad["neg_inf"], &bad["count"]),
        (
            &Value::from(1),
            &Value::from(1),
            &Value::from(1),
            &Value::from(1)
        )
    );
    let ids = &t["position_ids"];
    assert_eq!(ids["kind"], "integer");
    assert_eq!(
        (&ids["min"], &ids["max"]),
        (&Value::from(-3), &Value::from(9))
    );
    let h = ids["histogram"]["counts"].as_array().unwrap();
    assert_eq!(h.len(), 64);
    // numpy.histogram([0, 5, 9, -3], 64, range=(-3, 9)): bins 16, 42, 63, 0.
    for (i, n) in [(0, 1), (16, 1), (42, 1), (63, 1)] {
        assert_eq!(h[i], n, "bin {i}");
    }
    assert_eq!(ids["nan"], 0);
    assert_eq!(ids["overflow"], Value::Null);
    let bf = &t["bf"];
    assert_eq!(
        (&bf["subnormals"], &bf["pos_inf"]),
        (&Value::from(1), &Value::from(1))
    );
    assert_eq!(t["scalar_zero"]["mean"], 0.0);
    assert_eq!(t["layer.0.bias"]["std"], 0.0);
}

#[test]
fn empty_and_unmeasured_tensors_are_null() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("e.safetensors");
    let mut w = Writer::new();
    w.add("empty", DType::F32, &[0, 3], Vec::new()).unwrap();
    w.add("complex", DType::C64, &[1], vec![0u8; 8]).unwrap();
    w.write_file(&m).unwrap();
    let t = json(&[p(&m)]);
    let e = &t["empty"];
    for k in ["mean", "std", "min", "max", "overflow", "exponents"] {
        assert_eq!(e[k], Value::Null, "{k}");
    }
    assert_eq!(e["count"], 0);
    let c = &t["complex"];
    assert!(c["not_measured"].as_str().unwrap().contains("complex"));
    assert_eq!(c["count"], Value::Null);
}

#[test]
fn text_table_and_tensor_selection() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    model(&m);
    let o = run(&["stats", p(&m)]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.starts_with("tensor "), "{out}");
    assert!(out.contains("layer.0.weight") && out.contains("position_ids"));
    assert!(out.contains("7 tensors measured, 0 not"), "{out}");
    // One meaning per mark: the zero and subnormal columns are always percentages ("0%" for
    // none), and "-" only says a column does not apply (subnormals of an integer type).
    for line in out.lines().skip(1).filter(|l| l.contains(['I', 'F'])) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 16 {
            continue;
        }
        assert!(cols[9].ends_with('%'), "zero column of: {line}");
        if cols[1].starts_with('I') || cols[1].starts_with('U') {
            assert_eq!(cols[10], "-", "subn column of: {line}");
        } else {
            assert!(cols[10].ends_with('%'), "subn column of: {line}");
        }
    }
    let t = json(&["--tensors", "layer.*.w*", "--tensors", "bf", p(&m)]);
    assert_eq!(t.keys().collect::<Vec<_>>(), vec!["bf", "layer.0.weight"]);
    let o = run(&["stats", "--tensors", "nothing*", p(&m)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no tensor") && stderr(&o).contains("nothing*"));
    let o = run(&["stats", "--tensors", "bad[", p(&m)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad["), "{}", stderr(&o));
}

#[test]
fn check_names_each_failing_tensor_and_allow_zero_exempts() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    model(&m);
    let o = run(&["stats", "--check", p(&m)]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    for (t, rule) in [
        ("layer.0.bad", "nan"),
        ("layer.0.bad", "inf"),
        ("layer.0.bias", "all_zero"),
        ("lora_B.weight", "all_zero"),
        ("bf", "inf"),
    ] {
        assert!(
            out.lines().any(|l| l.starts_with("FAILED: ")
                && l.contains(&format!("tensor '{t}'"))
                && l.contains(&format!("(rule {rule})"))),
            "{t} {rule}\n{out}"
        );
    }
    // One element, or integers: never all-zero failures.
    assert!(!out.contains("'scalar_zero'") && !out.contains("'position_ids'"));
    assert!(
        out.contains("failed: ") && out.contains("5 problems"),
        "{out}"
    );
    // Exempt the zero tensors; select away the bad ones: exit 0.
    let o = run(&[
        "stats",
        "--check",
        "--allow-zero",
        "*.bias",
        "--allow-zero",
        "lora_B.*",
        "--tensors",
        "l*",
        p(&m),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(!stdout(&o).contains("all_zero") && stdout(&o).contains("layer.0.bad"));
    let o = run(&[
        "stats",
        "--check",
        "--allow-zero",
        "*.bias",
        "--allow-zero",
        "lora_B.*",
        "--tensors",
        "l*[!d]",
        p(&m),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("ok: "));
    // With --json, stdout stays JSON and the names go to stderr.
    let o = run(&["stats", "--check", "--json", p(&m)]);
    assert_eq!(o.status.code(), Some(1));
    serde_json::from_slice::<Value>(&o.stdout).unwrap();
    assert!(stderr(&o).contains("tensor 'layer.0.bias'"));
    // --allow-zero needs --check.
    assert_eq!(
        run(&["stats", "--allow-zero", "x", p(&m)]).status.code(),
        Some(2)
    );
}

/// Deterministic bytes (xorshift).
fn noise(n: usize, mut s: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

fn q8_0() -> GgmlType {
    GgmlType::from_name("q8_0").unwrap()
}

fn q4_k() -> GgmlType {
    GgmlType::from_name("q4_k").unwrap()
}

#[test]
fn gguf_blocks_are_measured_dequantized() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("q.gguf");
    // Q8_0: 64 blocks quantized from smooth values. Q4_K: 8 blocks of noise with finite,
    // small f16 scales (d = 0.01, dmin = 0.02).
    let vals: Vec<f32> = (0..64 * 32).map(|i| (i as f32 * 0.1).sin() * 3.0).collect();
    let q8 = ggml_quant::quantize(q8_0(), &vals).unwrap();
    let mut q4 = noise(8 * 144, 7);
    for b in q4.chunks_mut(144) {
        b[..2].copy_from_slice(&0x211fu16.to_le_bytes());
        b[2..4].copy_from_slice(&0x251fu16.to_le_bytes());
    }
    let mut w = GgufWriter::new();
    w.add("q8", [32u64 * 64].into_iter().collect(), q8_0(), q8.clone())
        .unwrap();
    w.add("q4k", [256u64, 8].into_iter().collect(), q4_k(), q4.clone())
        .unwrap();
    w.write_file(&g).unwrap();
    let t = json(&[p(&g)]);
    for (name, ty, bytes) in [("q8", q8_0(), &q8), ("q4k", q4_k(), &q4)] {
        let v: Vec<f64> = ggml_quant::dequantize(ty, bytes)
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect();
        let s = &t[name];
        assert_eq!(s["type"], ty.name());
        assert_eq!(s["dtype"], "F32");
        assert_eq!(s["count"], v.len());
        let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(
            (s["min"].as_f64(), s["max"].as_f64()),
            (Some(min), Some(max))
        );
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        let tol = 1e-6 * mean.abs().max(std) + 1e-12;
        assert!((s["mean"].as_f64().unwrap() - mean).abs() <= tol, "{name}");
        assert!((s["std"].as_f64().unwrap() - std).abs() <= tol, "{name}");
        let zeros = v.iter().filter(|&&x| x == 0.0).count();
        assert_eq!(s["zeros"], zeros, "{name}");
    }
}

#[test]
fn closed_stdout_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("many.safetensors");
    let mut w = Writer::new();
    for i in 0..3000 {
        w.add(&format!("t.{i}"), DType::F32, &[2], f32_bytes(&[1.0, 2.0]))
            .unwrap();
    }
    w.write_file(&m).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["stats", "--json", p(&m)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}
