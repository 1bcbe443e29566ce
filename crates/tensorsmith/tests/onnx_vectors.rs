//! The models `onnx` 1.23.2 wrote (tests/data/onnx, by generate.py there) read as onnx reads
//! them: every tensor's dtype code, dims and the SHA-256 of its packed little-endian bytes;
//! values in raw_data, typed fields and an external data file alike.

use sha2::{Digest, Sha256};
use std::path::PathBuf;
use tensorsmith::onnx::data_type::code_of;
use tensorsmith::OpenOptions;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/onnx")
}

#[test]
fn every_vector_reads_as_onnx_reads_it() {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data().join("expected.json")).unwrap()).unwrap();
    for name in ["raw.onnx", "typed.onnx", "external/m.onnx"] {
        let path = data().join(name);
        let m = tensorsmith::open(path.to_str().unwrap(), &OpenOptions::new()).unwrap();
        let want = expected[name].as_object().unwrap();
        assert_eq!(m.index.tensors.len(), want.len(), "{name}");
        for t in &m.index.tensors {
            let w = &want[&t.name];
            assert_eq!(
                i64::from(code_of(t.dtype).unwrap()),
                w["data_type"],
                "{name} {}",
                t.name
            );
            let dims: Vec<u64> = w["dims"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(t.shape.as_slice(), &dims[..]);
            let bytes = m.tensor_bytes(t).unwrap();
            let hex: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(hex, w["sha256"], "{name} {}", t.name);
        }
    }
}

#[test]
fn the_three_vectors_hash_the_same_for_weight_inspect() {
    let hash = |n: &str| {
        let m = tensorsmith::open(data().join(n).to_str().unwrap(), &OpenOptions::new()).unwrap();
        tensorsmith::ops::hash::wi_hash::weight_inspect(&m.index)
            .unwrap()
            .hash
    };
    assert_eq!(hash("raw.onnx"), hash("typed.onnx"));
    assert_eq!(hash("raw.onnx"), hash("external/m.onnx"));
}
