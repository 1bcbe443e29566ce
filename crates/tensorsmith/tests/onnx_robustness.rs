//! No input makes the ONNX reader panic: every vector of tests/data/onnx (and its external
//! data file) with each byte flipped in turn, random bytes overwritten, and cut at every
//! length goes through open, decoding every part, verify and both hashes. A stable-toolchain
//! companion to the `onnx` fuzz target.

use std::path::{Path, PathBuf};
use tensorsmith::OpenOptions;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/onnx")
}

/// Opens `model` as `dir/m.onnx` beside `dir/m.onnx.data` and uses every part of it.
fn exercise(dir: &Path, model: &[u8]) {
    let loc = dir.join("m.onnx");
    let opened = tensorsmith::model::open_reader(
        loc.to_str().unwrap(),
        Box::new(model.to_vec()),
        &OpenOptions::new(),
    );
    let Ok(m) = opened else { return };
    for t in &m.index.tensors {
        for (i, p) in t.parts.iter().enumerate() {
            if let Ok(b) = m.part_bytes(t, i) {
                assert_eq!(b.len() as u64, p.decoded_len, "{}", t.name);
            }
        }
        if tensorsmith::ops::convert::densify::is_sparse(t) {
            let _ = tensorsmith::ops::convert::densify::densify(&m, t);
        }
    }
    let _ = tensorsmith::ops::verify::verify(&m);
    let _ = tensorsmith::ops::hash::wi_hash::weight_inspect(&m.index);
    let _ = tensorsmith::ops::hash::structural_id(&m.index);
}

#[test]
fn flipped_and_truncated_models_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        data().join("external/m.onnx.data"),
        dir.path().join("m.onnx.data"),
    )
    .unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for name in ["raw.onnx", "typed.onnx", "external/m.onnx"] {
        let orig = std::fs::read(data().join(name)).unwrap();
        for i in 0..orig.len() {
            let mut b = orig.clone();
            b[i] ^= 0xff;
            exercise(dir.path(), &b);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut r = orig.clone();
            r[(state as usize) % orig.len()] = (state >> 32) as u8;
            r[i] = (state >> 40) as u8;
            exercise(dir.path(), &r);
            exercise(dir.path(), &orig[..i]);
        }
    }
}

#[test]
fn a_cut_or_grown_data_file_is_refused_not_read_past() {
    let dir = tempfile::tempdir().unwrap();
    let model = std::fs::read(data().join("external/m.onnx")).unwrap();
    let full = std::fs::read(data().join("external/m.onnx.data")).unwrap();
    for n in [0, 1, full.len() / 2, full.len() - 1] {
        std::fs::write(dir.path().join("m.onnx.data"), &full[..n]).unwrap();
        let loc = dir.path().join("m.onnx");
        let r = tensorsmith::model::open_reader(
            loc.to_str().unwrap(),
            Box::new(model.clone()),
            &OpenOptions::new(),
        );
        let e = r.unwrap_err();
        assert!(e.to_string().contains("m.onnx.data"), "{e}");
    }
}
