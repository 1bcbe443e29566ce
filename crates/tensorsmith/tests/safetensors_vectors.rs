//! Files written by the reference `safetensors` package (tests/data/safetensors, regenerated
//! by its generate.py): we read the same names, dtypes, shapes, bytes and metadata, with both
//! backends, and our writer reproduces the reference's bytes exactly.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tensorsmith::bytes::Backend;
use tensorsmith::dtype::DType;
use tensorsmith::index::MetaValue;
use tensorsmith::open;
use tensorsmith::ops::convert::{convert_safetensors, ConvertOptions};
use tensorsmith::safetensors::{SafetensorsFile, Writer};
use tensorsmith::ErrorKind;
use tensorsmith::OpenOptions;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/safetensors")
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

struct Case {
    file: String,
    metadata: Option<BTreeMap<String, String>>,
    tensors: Vec<(String, DType, Vec<u64>, Vec<u8>)>,
    byte_identical: bool,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(data_dir().join("expected.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let cases: Vec<Case> = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            file: c["file"].as_str().unwrap().to_string(),
            metadata: c["metadata"].as_object().map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect()
            }),
            tensors: c["tensors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["name"].as_str().unwrap().to_string(),
                        DType::from_safetensors_name(t["dtype"].as_str().unwrap(), false).unwrap(),
                        t["shape"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|d| d.as_u64().unwrap())
                            .collect(),
                        unhex(t["hex"].as_str().unwrap()),
                    )
                })
                .collect(),
            byte_identical: c["byte_identical"].as_bool().unwrap(),
        })
        .collect();
    assert!(cases.len() >= 25, "expected.json lost its cases");
    cases
}

#[test]
fn reads_every_reference_file_identically_with_both_backends() {
    for case in cases() {
        for backend in [Backend::Mmap, Backend::Pread] {
            let opts = OpenOptions::new().with_backend(backend);
            let f = SafetensorsFile::open_with(data_dir().join(&case.file), &opts)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(f.index().tensors.len(), case.tensors.len(), "{}", case.file);
            for (name, dtype, shape, bytes) in &case.tensors {
                let info = f.info(name).unwrap();
                assert_eq!(info.dtype, *dtype, "{} {name}", case.file);
                assert_eq!(info.shape.as_slice(), &shape[..], "{} {name}", case.file);
                let view = f.tensor(name).unwrap();
                assert_eq!(view.bytes(), &bytes[..], "{} {name}", case.file);
                assert_eq!(view.is_borrowed(), backend == Backend::Mmap);
                assert_eq!(&f.read_vec(name).unwrap(), bytes);
            }
            let want: BTreeMap<String, MetaValue> = case
                .metadata
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, MetaValue::Str(v)))
                .collect();
            assert_eq!(f.metadata(), &want, "{}", case.file);
        }
    }
}

#[test]
fn writer_reproduces_reference_bytes_from_memory() {
    let mut checked = 0;
    for case in cases().into_iter().filter(|c| c.byte_identical) {
        let mut w = Writer::new();
        if let Some(m) = case.metadata.clone() {
            w.metadata(m);
        }
        for (name, dtype, shape, bytes) in &case.tensors {
            w.add(name, *dtype, shape, bytes.clone()).unwrap();
        }
        let ours = w.to_bytes().unwrap();
        let theirs = std::fs::read(data_dir().join(&case.file)).unwrap();
        assert!(ours == theirs, "{}: bytes differ", case.file);
        checked += 1;
    }
    assert!(checked >= 24);
}

#[test]
fn streaming_copy_from_a_file_reproduces_reference_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for case in cases().into_iter().filter(|c| c.byte_identical) {
        // A file read back has lost the difference between "no metadata" and "{}" only when
        // the map is empty; the reference writes `"__metadata__":{}` for the latter.
        if case.metadata.as_ref().is_some_and(|m| m.is_empty()) {
            continue;
        }
        let path = data_dir().join(&case.file);
        let input = open(path.to_str().unwrap(), &OpenOptions::new()).unwrap();
        let out = dir.path().join(&case.file);
        convert_safetensors(&input, &out, &ConvertOptions::default()).unwrap();
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(data_dir().join(&case.file)).unwrap(),
            "{}",
            case.file
        );
    }
}

#[test]
fn rejects_the_reference_writers_invalid_empty_metadata_file() {
    let e = SafetensorsFile::open(data_dir().join("reference_invalid_empty_meta.safetensors"))
        .err()
        .unwrap();
    assert!(matches!(e.kind(), ErrorKind::HeaderJson { .. }), "{e}");
    assert!(e
        .to_string()
        .contains("reference_invalid_empty_meta.safetensors"));
}
