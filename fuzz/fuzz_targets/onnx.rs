//! ONNX reader fuzzing, external data included: the input's first two bytes give the length
//! of an external data file (written beside the model as `m.onnx.data`), the rest is the
//! `.onnx`. No panic, no allocation beyond what the input allows; an opened model's parts
//! decode to their declared lengths (or fail cleanly), verify and both hashes run.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;
use tensorsmith::OpenOptions;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("tensorsmith-fuzz-onnx-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let n = (u16::from_le_bytes([input[0], input[1]]) as usize).min(input.len() - 2);
    let (data, model) = input[2..].split_at(n);
    std::fs::write(dir().join("m.onnx.data"), data).unwrap();
    let location = dir().join("m.onnx");
    let opened = tensorsmith::model::open_reader(
        location.to_str().unwrap(),
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
    }
    let _ = tensorsmith::ops::verify::verify(&m);
    let _ = tensorsmith::ops::hash::wi_hash::weight_inspect(&m.index);
    let _ = tensorsmith::ops::hash::structural_id(&m.index);
});
