//! `tensorsmith hash`: the structural ID survives rewriting and reordering, changes with names,
//! types, shapes and metadata; `--content` follows the bytes; several files, JSON, errors.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn ids(file: &Path) -> (String, String) {
    let o = run(&["hash", "--content", "--json", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    (
        v["structural_id"].as_str().unwrap().to_owned(),
        v["content_digest"].as_str().unwrap().to_owned(),
    )
}

/// Tensors written in the given order, with values `fill`, and metadata.
fn model(path: &Path, order: &[(&str, DType, &[u64])], fill: u8, meta: &[(&str, &str)]) {
    let mut w = Writer::new();
    for (name, dtype, shape) in order {
        let n: u64 = shape.iter().product::<u64>() * dtype.byte_size().unwrap() as u64;
        w.add(name, *dtype, shape, vec![fill; n as usize]).unwrap();
    }
    w.metadata(
        meta.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    w.write_file(path).unwrap();
}

#[test]
fn structural_id_and_content_digest() {
    let dir = tempfile::tempdir().unwrap();
    let f = |n: &str| dir.path().join(n);
    let base: &[(&str, DType, &[u64])] = &[("a.w", DType::F32, &[2, 3]), ("b.w", DType::F16, &[4])];
    model(&f("base"), base, 1, &[("k", "v")]);
    // The safetensors writer orders by dtype, so reorder via different dtypes' order: same set.
    model(&f("same"), &[base[1], base[0]], 1, &[("k", "v")]);
    model(&f("values"), base, 2, &[("k", "v")]);
    model(
        &f("renamed"),
        &[("a.w", DType::F32, &[2, 3]), ("c.w", DType::F16, &[4])],
        1,
        &[("k", "v")],
    );
    model(
        &f("dtype"),
        &[("a.w", DType::I32, &[2, 3]), ("b.w", DType::F16, &[4])],
        1,
        &[("k", "v")],
    );
    model(
        &f("shape"),
        &[("a.w", DType::F32, &[3, 2]), ("b.w", DType::F16, &[4])],
        1,
        &[("k", "v")],
    );
    model(&f("meta"), base, 1, &[("k", "w")]);

    let (sid, cid) = ids(&f("base"));
    assert!(sid.starts_with("ts1-") && sid.len() == 68, "{sid}");
    assert!(cid.starts_with("tc1-") && cid.len() == 68, "{cid}");
    assert_eq!(ids(&f("same")), (sid.clone(), cid.clone()));
    let (s, c) = ids(&f("values"));
    assert_eq!(s, sid, "values are not structure");
    assert_ne!(c, cid, "values are content");
    for changed in ["renamed", "dtype", "shape", "meta"] {
        let (s, _) = ids(&f(changed));
        assert_ne!(s, sid, "{changed}");
    }
    let (_, c) = ids(&f("meta"));
    assert_eq!(c, cid, "metadata is not content");

    // A copy through convert keeps both; an F16 cast changes both.
    let out = f("copy");
    assert!(run(&[
        "convert",
        f("base").to_str().unwrap(),
        out.to_str().unwrap()
    ])
    .status
    .success());
    assert_eq!(ids(&out), (sid.clone(), cid.clone()));
    assert!(run(&[
        "convert",
        f("base").to_str().unwrap(),
        out.to_str().unwrap(),
        "--dtype",
        "F16"
    ])
    .status
    .success());
    let (s, c) = ids(&out);
    assert!(s != sid && c != cid);
}

#[test]
fn content_of_tensors_larger_than_a_chunk() {
    // 40 MiB in one tensor: three 16 MiB chunks hashed in parallel; a change in the last byte
    // changes the digest.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let mut data = vec![7u8; 40 << 20];
    for (p, last) in [(&a, 7u8), (&b, 8u8)] {
        *data.last_mut().unwrap() = last;
        let mut w = Writer::new();
        w.add("big", DType::U8, &[40 << 20], data.clone()).unwrap();
        w.write_file(p).unwrap();
    }
    let (sa, ca) = ids(&a);
    let (sb, cb) = ids(&b);
    assert_eq!(sa, sb);
    assert_ne!(ca, cb);
}

#[test]
fn several_files_one_line_each_and_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.safetensors");
    model(&a, &[("x", DType::U8, &[1])], 0, &[]);
    let o = run(&[
        "hash",
        a.to_str().unwrap(),
        "/nonexistent.safetensors",
        a.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0], lines[1]);
    assert!(
        lines[0].ends_with(&format!("  {}", a.display())),
        "{}",
        lines[0]
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent.safetensors"));
}

/// A digest record follows the values: the structural ID leaves it out (two files differing
/// in one value have one ID, with records or without), and a conversion never carries the
/// input's record (it describes other bytes) into zTensor or GGUF metadata.
#[test]
fn a_digest_record_neither_changes_the_structural_id_nor_is_carried() {
    let d = tempfile::tempdir().unwrap();
    let shape: &[(&str, DType, &[u64])] = &[("w", DType::F32, &[4]), ("b", DType::F32, &[2])];
    let (a, b) = (
        d.path().join("a.safetensors"),
        d.path().join("b.safetensors"),
    );
    model(&a, shape, 1, &[("k", "v")]);
    model(&b, shape, 2, &[("k", "v")]);
    let (ad, bd) = (
        d.path().join("ad.safetensors"),
        d.path().join("bd.safetensors"),
    );
    for (src, dst) in [(&a, &ad), (&b, &bd)] {
        let o = run(&[
            "convert",
            "--digest",
            "crc32c",
            src.to_str().unwrap(),
            dst.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let id = ids(&a).0;
    for p in [&b, &ad, &bd] {
        assert_eq!(ids(p).0, id, "{}", p.display());
    }
    assert_ne!(ids(&ad).1, ids(&bd).1);
    for out in ["ad.zt", "ad.gguf"] {
        let out = d.path().join(out);
        let o = run(&["convert", "-q", ad.to_str().unwrap(), out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = run(&["inspect", "--json", out.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("k\": \"v\"") && !text.contains("tensorsmith.digest"),
            "{text}"
        );
    }
    assert_eq!(ids(&d.path().join("ad.zt")).0, id);
}
