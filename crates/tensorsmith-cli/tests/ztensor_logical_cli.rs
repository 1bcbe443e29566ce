//! zTensor v2 float tensors stored as the unsigned integer of their width with the float as
//! logical type (`dtype: u16, type: bf16`, written by ztensor 2.1.2:
//! tests/data/ztensor/generate_float_logical.py) read as the float everywhere: inspect, stats
//! (1.0, not the bit pattern 16256) and convert.

#[path = "support/cli.rs"]
mod cli;
use cli::{data, p, run};
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn tensor<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {v}"))
}

#[test]
fn inspect_and_stats_decode_the_logical_type() {
    let v = json(&["inspect", "--json", &data("ztensor/v2/float_logical.zt")]);
    assert_eq!(tensor(&v, "bf16_on_u16")["dtype"], "BF16");
    assert_eq!(tensor(&v, "f16_on_u16")["dtype"], "F16");
    assert_eq!(tensor(&v, "f32_on_u32")["dtype"], "F32");
    let s = json(&["stats", "--json", &data("ztensor/v2/float_logical.zt")]);
    let bf = tensor(&s, "bf16_on_u16");
    assert_eq!(
        (&bf["min"], &bf["max"]),
        (&Value::from(-3.5), &Value::from(2.0)),
        "{bf}"
    );
    let h = tensor(&s, "f16_on_u16");
    assert_eq!(
        (&h["min"], &h["max"]),
        (&Value::from(-2.0), &Value::from(1.0)),
        "{h}"
    );
}

#[test]
fn convert_writes_the_floats() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.safetensors");
    let o = run(&["convert", &data("ztensor/v2/float_logical.zt"), p(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = tensorsmith::open(p(&out), &tensorsmith::OpenOptions::new()).unwrap();
    let t = m
        .index
        .tensors
        .iter()
        .find(|t| t.name == "bf16_on_u16")
        .unwrap();
    assert_eq!(t.dtype, tensorsmith::dtype::DType::BF16);
    // 1.0, 2.0, -3.5 in bf16.
    let bytes = m.tensor_bytes(t).unwrap();
    assert_eq!(bytes.as_ref(), &[0x80, 0x3f, 0x00, 0x40, 0x60, 0xc0]);
    let o = run(&[
        "diff",
        "--values",
        &data("ztensor/v2/float_logical.zt"),
        p(&out),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}
