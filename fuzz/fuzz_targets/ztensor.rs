//! zTensor fuzzing, all three versions (the version comes from the input's magic): no panic,
//! no hang, no allocation beyond the input's size allows (decompression is bounded by the
//! declared size), and every part the parser accepts decodes to exactly its declared length
//! or fails with an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorsmith::ztensor::{decode_part, parse_bytes};
use tensorsmith::OpenOptions;

fuzz_target!(|file: &[u8]| {
    // Keep manifests within what the fuzzer's inputs can hold anyway.
    let opts = OpenOptions::new().with_max_manifest_len(1 << 20);
    let Ok(parsed) = parse_bytes(file, &opts) else {
        return;
    };
    let src: &[u8] = file;
    for t in &parsed.index.tensors {
        for p in &t.parts {
            assert!(p.range.start <= p.range.end && p.range.end <= file.len() as u64);
            for verify in [false, true] {
                if let Ok(bytes) = decode_part(&src, p, verify) {
                    assert_eq!(bytes.len() as u64, p.decoded_len, "{}", t.name);
                }
            }
        }
    }
});
