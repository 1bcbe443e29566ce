//! The K-quant and IQ4 quantizers against bytes pinned from ggml's `ggml_quantize_chunk`
//! (llama-cpp-python 0.3.36's vendored llama.cpp, `scripts/ggml-reference`), written by
//! `scripts/gen-ggml-k-vectors` into tests/data/ggml_k/: random rows at several scales and
//! edge rows (zeros, constants, ±3e38, subnormals, one huge value among small), each with and
//! without an importance matrix. `tests/python/test_ggml_kquants.py` checks many more rows
//! against the live library.

use crate::ggml_quant::*;
use std::path::PathBuf;

const N: usize = 512;
const TYPES: &[&str] = &["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"];

fn data(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/ggml_k")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn floats(name: &str) -> Vec<f32> {
    data(name)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Compares row by row, naming the first differing row and byte.
fn check(name: &str, imatrix: Option<&[f32]>, rows: &[f32], want: &[u8]) {
    let ty = GgmlType::from_name(name).unwrap();
    let got = quantize_rows(ty, rows, N, imatrix).unwrap();
    assert_eq!(got.len(), want.len(), "{name}");
    let row_bytes = got.len() / (rows.len() / N);
    for (r, (g, w)) in got
        .chunks(row_bytes)
        .zip(want.chunks(row_bytes))
        .enumerate()
    {
        if let Some(i) = (0..g.len()).find(|&i| g[i] != w[i]) {
            panic!(
                "{name} imatrix={}: row {r} differs first at byte {i} (block {}): got {:02x?}, ggml {:02x?}",
                imatrix.is_some(),
                i / ty.block_bytes() as usize,
                &g[i..(i + 8).min(g.len())],
                &w[i..(i + 8).min(w.len())]
            );
        }
    }
}

#[test]
fn k_and_iq4_types_match_ggml_without_imatrix() {
    let rows = floats("rows.f32");
    for name in TYPES {
        check(name, None, &rows, &data(&format!("{name}.bin")));
    }
}

#[test]
fn k_and_iq4_types_match_ggml_with_imatrix() {
    let rows = floats("rows.f32");
    let imatrix = floats("imatrix.f32");
    for name in TYPES {
        check(
            name,
            Some(&imatrix),
            &rows,
            &data(&format!("{name}.imatrix.bin")),
        );
    }
}

/// Values from a fixed xorshift, roughly standard normal (sum of four uniforms).
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    let mut u = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    (0..n).map(|_| (u() + u() + u() + u()) * 1.7).collect()
}

#[test]
fn dequantized_blocks_come_back_within_the_types_error() {
    // Relative RMS error of a round trip on roughly normal values: each type's usual figure
    // with some margin (Q2_K ~0.3, Q6_K ~0.01).
    let x = noise(64 * 256, 7);
    let w: Vec<f32> = noise(256, 9).iter().map(|v| v.abs() + 0.1).collect();
    let rms = (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt();
    for (name, limit) in [
        ("q2_k", 0.40),
        ("q3_k", 0.22),
        ("q4_k", 0.12),
        ("q5_k", 0.06),
        ("q6_k", 0.03),
        ("iq4_nl", 0.12),
        ("iq4_xs", 0.12),
    ] {
        let ty = GgmlType::from_name(name).unwrap();
        for imatrix in [None, Some(&w[..])] {
            let q = quantize_rows(ty, &x, 256, imatrix).unwrap();
            let y = dequantize(ty, &q).unwrap();
            let err = (x
                .iter()
                .zip(&y)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f32>()
                / x.len() as f32)
                .sqrt()
                / rms;
            assert!(err < limit, "{name} imatrix={}: {err}", imatrix.is_some());
        }
    }
}

#[test]
fn many_rows_in_parallel_give_the_rows_bytes() {
    let x = noise(3000 * 256, 11);
    let w: Vec<f32> = noise(512, 13).iter().map(|v| v.abs()).collect();
    for name in TYPES {
        let ty = GgmlType::from_name(name).unwrap();
        let bytes = 512 / ty.block_elements() as usize * ty.block_bytes() as usize;
        for imatrix in [None, Some(&w[..])] {
            let all = quantize_rows(ty, &x, 512, imatrix).unwrap();
            for r in [0, 1, 1499] {
                let one = quantize_rows(ty, &x[r * 512..(r + 1) * 512], 512, imatrix).unwrap();
                assert_eq!(one, all[r * bytes..(r + 1) * bytes], "{name} row {r}");
            }
        }
    }
}

#[test]
fn rows_that_are_not_whole_blocks_are_refused() {
    for (name, n) in [("q4_k", 128), ("q6_k", 300), ("iq4_xs", 32), ("iq4_nl", 48)] {
        let ty = GgmlType::from_name(name).unwrap();
        let e = quantize_rows(ty, &vec![1.0; n * 2], n, None).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::QuantizeRows { .. }), "{e}");
        let e = e.to_string();
        assert!(e.contains(name) && e.contains(&n.to_string()), "{e}");
    }
    // A 32-value row is whole IQ4_NL blocks.
    let iq4_nl = GgmlType::from_name("iq4_nl").unwrap();
    assert_eq!(
        quantize_rows(iq4_nl, &[1.0; 64], 32, None).unwrap().len(),
        36
    );
    // No rows at all: no blocks; rows of no values among values: refused.
    assert!(quantize_rows(iq4_nl, &[], 0, None).unwrap().is_empty());
    assert!(quantize_rows(iq4_nl, &[1.0; 32], 0, None).is_err());
    // Values that are not whole rows.
    let q4_k = GgmlType::from_name("q4_k").unwrap();
    let e = quantize_rows(q4_k, &[1.0; 768], 512, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("768") && e.contains("512"), "{e}");
}

#[test]
fn an_imatrix_of_the_wrong_length_is_refused() {
    let q5_k = GgmlType::from_name("q5_k").unwrap();
    for len in [0, 255, 257, 512] {
        let e = quantize_rows(q5_k, &[1.0; 512], 256, Some(&vec![1.0; len])).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::QuantizeRows { .. }), "{e}");
        assert!(e.to_string().contains(&format!("{len} values")), "{e}");
    }
}

#[test]
fn an_imatrix_for_a_type_that_takes_none_is_refused() {
    let q8_0 = GgmlType::from_name("q8_0").unwrap();
    assert!(!takes_imatrix(q8_0));
    let e = quantize_rows(q8_0, &[1.0; 64], 32, Some(&[1.0; 32])).unwrap_err();
    assert!(e.to_string().contains("importance matrix"), "{e}");
    // Without one it is the gguf-py quantizer.
    assert_eq!(
        quantize_rows(q8_0, &[1.0; 64], 32, None).unwrap(),
        quantize(q8_0, &[1.0; 64]).unwrap()
    );
}

#[test]
fn the_named_list_is_every_quantizable_type() {
    let named: Vec<String> = QUANTIZE_TYPES
        .split(", ")
        .map(|s| s.to_lowercase())
        .collect();
    let all: Vec<String> = GgmlType::all()
        .filter(|&t| can_quantize(t))
        .map(|t| t.name().to_string())
        .collect();
    let mut a = named.clone();
    a.sort();
    let mut b = all;
    b.sort();
    assert_eq!(a, b);
}
