//! Block bytes pinned from `gguf.quants.quantize` (gguf 0.19.0, NumPy 2.4) for one block per
//! type of fixed values (`values` below); `tests/python/test_gguf_quantize.py` checks random
//! and edge-case values against the live reference.

use crate::ggml_quant::*;

/// Value `i` of a block: `((i * 37 + 11) % 61 - 30) * 0.173`, with value 5 set to -7.25.
fn values(n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n)
        .map(|i| ((i * 37 + 11) % 61) as f32 - 30.0)
        .map(|x| x * 0.173f32)
        .collect();
    v[5] = -7.25;
    v
}

#[rustfmt::skip]
const PINS: &[(&str, &str)] = &[
    ("q4_0", "403bd48b37a269d08c47b36ad59c48b37ae6"),
    ("q4_1", "a23a40c7e59c47b26ae09d48c37bf6ad58c37bf6"),
    ("q5_0", "4037524a6bad99077e55c3a0188e65d3ba288f66d4bb"),
    ("q5_1", "6c3640c7d25a6badca2a8f85d5d03b9096e6ec4c9197f7fc"),
    ("q8_0", "4f2bc637eea515813df4ab1bd343fab121d94900b727df4f06bd2de5550cc334eb5b"),
    ("tq1_0", "767d7f2b67227d9b346778d29b346778d29b346778d29c346781d59c897d7fd59bd86d2c769bd8892c7662d2892c7a627c7fd4664047"),
    ("tq2_0", "451555549144155964914516596491451659649145165964915556596515555615596491451659649145165964914516596491555659651555565145155564914047"),
    ("mxfp4", "7f6d05ea4fc26f15e95eb36d16d95ea47c"),
];

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn every_quantizable_type_matches_bytes_pinned_from_gguf_py() {
    for &(name, want) in PINS {
        let ty = GgmlType::from_name(name).unwrap();
        let got = quantize(ty, &values(ty.block_elements() as usize)).unwrap();
        assert_eq!(hex(&got), want, "{name}");
    }
}

#[test]
fn parallel_tasks_give_the_same_bytes_as_one_pass() {
    for &(name, _) in PINS {
        let ty = GgmlType::from_name(name).unwrap();
        let n = ty.block_elements() as usize * 5000;
        let v: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 - 500.0).collect();
        let whole = quantize(ty, &v).unwrap();
        let mut one = vec![0u8; whole.len()];
        quantizer(ty).unwrap()(&v, &mut one);
        assert_eq!(whole, one, "{name}");
    }
}

#[test]
fn zero_blocks_have_zero_scales() {
    // Q4_0's scale is 0 / -8: a negative zero, as in NumPy.
    for (name, zero_code, scale) in [
        ("q4_0", 0x88, [0, 0x80]),
        ("q8_0", 0, [0, 0]),
        ("tq2_0", 0x55, [0, 0]),
    ] {
        let ty = GgmlType::from_name(name).unwrap();
        let b = quantize(ty, &vec![0.0; ty.block_elements() as usize]).unwrap();
        let scale_at = if name == "tq2_0" { 64 } else { 0 };
        assert_eq!(b[scale_at..scale_at + 2], scale, "{name}");
        let codes = if name == "tq2_0" { &b[..64] } else { &b[2..] };
        assert!(codes.iter().all(|&c| c == zero_code), "{name}: {codes:?}");
    }
}

#[test]
fn types_without_a_quantizer_are_refused_by_name() {
    for name in ["q8_k", "iq2_xxs", "nvfp4", "q8_1", "f16", "bf16"] {
        let ty = GgmlType::from_name(name).unwrap();
        let e = quantize(ty, &[0.0; 256]).unwrap_err().to_string();
        assert!(e.contains(name), "{e}");
        assert!(!can_quantize(ty));
    }
}

#[test]
fn partial_blocks_are_refused() {
    let ty = GgmlType::from_name("q8_0").unwrap();
    let e = quantize(ty, &[0.0; 33]).unwrap_err().to_string();
    assert!(e.contains("q8_0") && e.contains("33"), "{e}");
}
