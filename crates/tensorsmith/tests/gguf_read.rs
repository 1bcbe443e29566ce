//! GGUF files written by the reference `gguf` package (tests/data/gguf, see generate.py there)
//! read as the reference reads them, with either backend: metadata values of every type,
//! nested arrays, a 150,000-entry vocabulary, tensor types, dimensions, block-based byte
//! lengths, data offsets and tensor bytes.

use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use tensorsmith::bytes::Backend;
use tensorsmith::gguf::{Array, GgufFile, GgufValue as Value};
use tensorsmith::OpenOptions;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gguf")
}

fn expected() -> serde_json::Map<String, Json> {
    let text = std::fs::read_to_string(data_dir().join("expected.json")).unwrap();
    serde_json::from_str::<Json>(&text)
        .unwrap()
        .as_object()
        .unwrap()
        .clone()
}

fn open(name: &str, backend: Backend) -> GgufFile {
    let opts = OpenOptions::new().with_backend(backend);
    GgufFile::open_with(data_dir().join(name), &opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Compares a value with the JSON the generator recorded (`[TYPE_NAME, value]`).
fn assert_value(key: &str, v: &Value, want: &Json) {
    let ty = want[0].as_str().unwrap();
    assert_eq!(v.value_type().name(), ty, "{key}: type");
    let w = &want[1];
    match v {
        Value::Array(a) if w.is_object() => {
            // A summary: {len, first, last}.
            let Array::String(s) = a else {
                panic!("{key}: not a string array")
            };
            assert_eq!(s.len() as u64, w["len"].as_u64().unwrap(), "{key}");
            assert_eq!(s[0], w["first"].as_str().unwrap(), "{key}");
            assert_eq!(s[s.len() - 1], w["last"].as_str().unwrap(), "{key}");
        }
        Value::Array(a) => assert_array(key, a, w),
        _ => assert_scalar(key, v, w),
    }
}

fn assert_scalar(key: &str, v: &Value, w: &Json) {
    match v {
        Value::U8(x) => assert_eq!(u64::from(*x), w.as_u64().unwrap(), "{key}"),
        Value::U16(x) => assert_eq!(u64::from(*x), w.as_u64().unwrap(), "{key}"),
        Value::U32(x) => assert_eq!(u64::from(*x), w.as_u64().unwrap(), "{key}"),
        Value::U64(x) => assert_eq!(*x, w.as_u64().unwrap(), "{key}"),
        Value::I8(x) => assert_eq!(i64::from(*x), w.as_i64().unwrap(), "{key}"),
        Value::I16(x) => assert_eq!(i64::from(*x), w.as_i64().unwrap(), "{key}"),
        Value::I32(x) => assert_eq!(i64::from(*x), w.as_i64().unwrap(), "{key}"),
        Value::I64(x) => assert_eq!(*x, w.as_i64().unwrap(), "{key}"),
        Value::F32(x) => assert_eq!(x.to_bits(), (w.as_f64().unwrap() as f32).to_bits(), "{key}"),
        Value::F64(x) => assert_eq!(x.to_bits(), w.as_f64().unwrap().to_bits(), "{key}"),
        Value::Bool(x) => assert_eq!(*x, w.as_bool().unwrap(), "{key}"),
        Value::String(s) => assert_eq!(s, w.as_str().unwrap(), "{key}"),
        Value::Array(_) => unreachable!(),
    }
}

fn assert_array(key: &str, a: &Array, w: &Json) {
    let items = w.as_array().unwrap();
    assert_eq!(a.len(), items.len(), "{key}: length");
    let scalars: Vec<Value> = match a {
        Array::U8(v) => v.iter().map(|&x| Value::U8(x)).collect(),
        Array::I8(v) => v.iter().map(|&x| Value::I8(x)).collect(),
        Array::U16(v) => v.iter().map(|&x| Value::U16(x)).collect(),
        Array::I16(v) => v.iter().map(|&x| Value::I16(x)).collect(),
        Array::U32(v) => v.iter().map(|&x| Value::U32(x)).collect(),
        Array::I32(v) => v.iter().map(|&x| Value::I32(x)).collect(),
        Array::F32(v) => v.iter().map(|&x| Value::F32(x)).collect(),
        Array::U64(v) => v.iter().map(|&x| Value::U64(x)).collect(),
        Array::I64(v) => v.iter().map(|&x| Value::I64(x)).collect(),
        Array::F64(v) => v.iter().map(|&x| Value::F64(x)).collect(),
        Array::Bool(v) => v.iter().map(|&x| Value::Bool(x)).collect(),
        Array::String(v) => v.iter().cloned().map(Value::String).collect(),
        Array::Array(v) => {
            for (inner, w) in v.iter().zip(items) {
                assert_array(key, inner, w);
            }
            return;
        }
    };
    for (v, w) in scalars.iter().zip(items) {
        assert_scalar(key, v, w);
    }
}

#[test]
fn reference_files_read_as_the_reference_reads_them() {
    let exp = expected();
    let mut checked = 0;
    for (name, want) in exp.iter().filter(|(k, _)| k.ends_with(".gguf")) {
        for backend in [Backend::Mmap, Backend::Pread] {
            let f = open(name, backend);
            let h = f.header();
            assert_eq!(h.version, 3, "{name}");
            assert_eq!(h.alignment, want["alignment"].as_u64().unwrap(), "{name}");
            let tensors = want["tensors"].as_array().unwrap();
            if !tensors.is_empty() {
                assert_eq!(h.data_start, want["data_start"].as_u64().unwrap(), "{name}");
            }
            assert_eq!(h.tensors.len(), tensors.len(), "{name}");
            for (t, w) in h.tensors.iter().zip(tensors) {
                let ctx = format!("{name}: {}", t.name);
                assert_eq!(t.name, w["name"].as_str().unwrap(), "{ctx}");
                assert_eq!(
                    t.ggml_type.name(),
                    w["ggml_type"].as_str().unwrap(),
                    "{ctx}"
                );
                let ne: Vec<u64> = w["ne"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap())
                    .collect();
                assert_eq!(t.ne.as_slice(), ne.as_slice(), "{ctx}");
                let rev: Vec<u64> = ne.iter().rev().copied().collect();
                assert_eq!(t.shape().as_slice(), rev.as_slice(), "{ctx}");
                assert_eq!(t.byte_len, w["n_bytes"].as_u64().unwrap(), "{ctx}");
                assert!(t.byte_len > 0, "{ctx}: byte length 0");
                assert_eq!(t.range.start, w["offset"].as_u64().unwrap(), "{ctx}");
                let bytes = f.tensor_bytes(t).unwrap();
                assert_eq!(
                    format!("{:x}", Sha256::digest(&bytes)),
                    w["sha256"].as_str().unwrap(),
                    "{ctx}"
                );
            }
            let meta = want["metadata"].as_object().unwrap();
            for (key, w) in meta {
                let v = h.get(key).unwrap_or_else(|| panic!("{name}: no key {key}"));
                assert_value(key, v, w);
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 10, "five vectors, two backends");
}

#[test]
fn keys_come_in_file_order_with_the_architecture_first() {
    let f = open("every_type.gguf", Backend::Mmap);
    let keys: Vec<&str> = f
        .header()
        .metadata
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(keys[0], "general.architecture");
    assert_eq!(keys[1], "t.u8");
    assert_eq!(*keys.last().unwrap(), "t.arr_nested");
}

#[test]
fn quantized_byte_lengths_come_from_the_block_table() {
    let f = open("every_type.gguf", Backend::Mmap);
    let h = f.header();
    let q8 = h.tensors.iter().find(|t| t.name == "q8_0").unwrap();
    assert_eq!(q8.byte_len, 4 * 64 / 32 * 34);
    let q4 = h.tensors.iter().find(|t| t.name == "q4_0").unwrap();
    assert_eq!(q4.byte_len, 4 * 64 / 32 * 18);
    assert!(q4.ggml_type.is_quantized() && q4.ggml_type.dtype().is_none());
    assert_eq!(q4.ggml_type.bits_per_weight(), 4.5);
}
