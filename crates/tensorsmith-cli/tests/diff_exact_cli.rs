//! `diff --values` on 64-bit integers compares integers, not their f64 roundings (2^64 - 1 and
//! 2^64 - 2 differ, as `hash --content` says); `--json` lists every compared pair, identical
//! ones with zero error; the summary line counts tensors in the singular and plural.

#[path = "support/cli.rs"]
mod cli;
use cli::{p, run};
use serde_json::Value;
use std::path::Path;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn le<T: Copy, const N: usize>(v: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// `u` U64, `i` I64 and `same` F32 (equal in both files).
fn model(path: &Path, u: &[u64], i: &[i64]) {
    let mut w = Writer::new();
    w.add("u", DType::U64, &[u.len() as u64], le(u, u64::to_le_bytes))
        .unwrap();
    w.add("i", DType::I64, &[i.len() as u64], le(i, i64::to_le_bytes))
        .unwrap();
    w.add(
        "same",
        DType::F32,
        &[2],
        le(&[1.5f32, 2.0], f32::to_le_bytes),
    )
    .unwrap();
    w.write_file(path).unwrap();
}

fn pair(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (a, b) = (dir.join("a.safetensors"), dir.join("b.safetensors"));
    let big = (1i64 << 62) + 1;
    model(&a, &[u64::MAX, 7], &[big, -big]);
    model(&b, &[u64::MAX - 1, 7], &[big + 1, -big - 1]);
    (a, b)
}

#[test]
fn sixty_four_bit_integers_are_compared_as_integers() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path());
    let o = run(&["diff", "--values", "-q", p(&a), p(&b)]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("~ values u: 1 of 2 elements differ, max |a-b| 1e0"),
        "{text}"
    );
    assert!(
        text.contains("~ values i: 2 of 2 elements differ, max |a-b| 1e0"),
        "{text}"
    );
    assert!(text.contains("2 tensors with different values"), "{text}");
}

#[test]
fn json_lists_every_compared_pair() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path());
    let o = run(&["diff", "--values", "--json", "-q", p(&a), p(&b)]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let compared = v["values"]["compared"].as_array().unwrap();
    let names: Vec<&str> = compared
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let same = compared.iter().find(|c| c["name"] == "same").unwrap();
    assert_eq!(same["identical"], true);
    assert_eq!(same["differing"], 0);
    assert_eq!(same["max_abs_diff"], 0.0);
    let u = compared.iter().find(|c| c["name"] == "u").unwrap();
    assert_eq!(
        (u["identical"].clone(), u["differing"].clone()),
        (Value::Bool(false), 1.into())
    );
}

#[test]
fn the_summary_says_one_changed_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        dir.path().join("a.safetensors"),
        dir.path().join("b.safetensors"),
    );
    model(&a, &[1], &[1]);
    model(&b, &[1, 2], &[1]);
    let o = run(&["diff", p(&a), p(&b)]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("0 added, 0 removed, 1 changed tensor;"),
        "{text}"
    );
}
