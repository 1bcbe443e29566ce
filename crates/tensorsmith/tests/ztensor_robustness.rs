//! No input makes the zTensor parsers panic: every vector of every version, with bytes
//! flipped and cut, goes through parsing, decoding and the data rules. (A stand-in until
//! the fuzz targets exist; the parsers take `&[u8]` for that.)

mod ztensor_common;

use tensorsmith::ztensor;
use tensorsmith::OpenOptions;
use ztensor_common::*;

fn exercise(bytes: &[u8]) {
    let src: &[u8] = bytes;
    if let Ok(p) = ztensor::parse_bytes(src, &OpenOptions::new()) {
        for t in &p.index.tensors {
            let decoded: Vec<_> = t
                .parts
                .iter()
                .filter_map(|part| ztensor::decode_part(&src, part, true).ok())
                .collect();
            if decoded.len() == t.parts.len() {
                let refs: Vec<&[u8]> = decoded.iter().map(|b| &b[..]).collect();
                let _ = ztensor::check_data(t, &refs);
            }
        }
    }
}

#[test]
fn flipped_and_truncated_vectors_never_panic() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for ver in ["v0.1", "v1.1", "v2"] {
        for (file, _) in files(ver) {
            let orig = std::fs::read(dir(ver).join(&file)).unwrap();
            if orig.len() > 70_000 {
                continue;
            }
            exercise(&orig);
            for cut in [0, 1, 8, 17, orig.len() / 2, orig.len().saturating_sub(1)] {
                exercise(&orig[..cut.min(orig.len())]);
            }
            for _ in 0..200 {
                let mut b = orig.clone();
                // Mostly hit the manifest and footer, where the structure is.
                let tail = b.len().min(600);
                for _ in 0..1 + next() % 3 {
                    let i = if next() % 4 == 0 {
                        (next() % b.len() as u64) as usize
                    } else {
                        b.len() - 1 - (next() % tail as u64) as usize
                    };
                    b[i] ^= 1 << (next() % 8);
                }
                exercise(&b);
            }
        }
    }
}
