//! The CLI on zTensor: `inspect`/`validate` detect the version from the bytes, `verify` checks
//! digests, `convert` goes between safetensors and every zTensor version (compression, digests,
//! casts), sparse tensors need `--densify` for safetensors, and `hash`/`diff` see the same
//! model in every format.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn data(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn safetensors_to_every_version_and_back_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    // One metadata key (so the order of keys is fixed) for the versions with attributes;
    // none for v0.1, which has no file metadata.
    for (input, versions) in [
        (
            data("safetensors/mixed_meta1.safetensors"),
            &["1.1", "2"][..],
        ),
        (
            data("safetensors/dtype_float32.safetensors"),
            &["0.1", "1.1", "2"][..],
        ),
    ] {
        let original = std::fs::read(&input).unwrap();
        for v in versions {
            let digests: &[&str] = match *v {
                "2" => &["xxh3", "sha256"],
                _ => &["crc32c", "sha256"],
            };
            for compress in [None, Some("zstd"), Some("zstd:19")] {
                for digest in [None, Some(digests[0]), Some(digests[1])] {
                    let zt = dir.path().join("m.zt");
                    let mut args = vec!["convert", &input, s(&zt), "--zt-version", v];
                    if let Some(c) = compress {
                        args.extend(["--compress", c]);
                    }
                    if let Some(d) = digest {
                        args.extend(["--digest", d]);
                    }
                    ok(&args);
                    let verified = ok(&["verify", s(&zt)]);
                    if digest.is_some() {
                        assert!(!verified.contains(" 0 digests match"), "{verified}");
                    }
                    let back = dir.path().join("back.safetensors");
                    ok(&["convert", s(&zt), s(&back)]);
                    assert!(
                        std::fs::read(&back).unwrap() == original,
                        "{input} via v{v} {compress:?} {digest:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn inspect_validate_and_verify_detect_the_version() {
    for (file, version) in [
        ("ztensor/v0.1/multi.zt", "0.1"),
        ("ztensor/v1.1/multi.zt", "1.1"),
        ("ztensor/v2/multi.zt", "2"),
    ] {
        let v: Value = serde_json::from_str(&ok(&["inspect", "--json", &data(file)])).unwrap();
        assert_eq!(v["format"], "ztensor");
        assert_eq!(v["format_version"], version);
        assert!(ok(&["validate", &data(file)]).starts_with("ok: "));
        assert!(ok(&["verify", &data(file)]).starts_with("ok: "));
    }
    // Broken structure: validate says invalid (1) with the rule.
    let o = run(&["validate", &data("ztensor/v2/invalid_manifest_hash.zt")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("manifest hash mismatch"));
    // A digest mismatch is found by verify, not by opening.
    let f = data("ztensor/v1.1/invalid_digest_mismatch.zt");
    assert_eq!(run(&["validate", &f]).status.code(), Some(0));
    let o = run(&["verify", &f]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("digest mismatch") && out.contains("tensor 't'"),
        "{out}"
    );
}

#[test]
fn sparse_tensors_need_densify_for_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d.safetensors");
    let csr = data("ztensor/v1.1/sparse_csr.zt");
    let o = run(&["convert", &csr, s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tensor 'm'") && err.contains("--densify"),
        "{err}"
    );
    assert!(!out.exists());

    ok(&["convert", &csr, s(&out), "--densify"]);
    let f = tensorsmith::safetensors::SafetensorsFile::open(&out).unwrap();
    let values: Vec<f32> = f
        .read_vec("m")
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        values,
        [1.5, 0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.25, 0.0, 4.0]
    );
    // COO: the same matrix.
    ok(&[
        "convert",
        &data("ztensor/v1.1/sparse_coo.zt"),
        s(&out),
        "--densify",
    ]);
    let g = tensorsmith::safetensors::SafetensorsFile::open(&out).unwrap();
    let name = g.index().tensors[0].name.clone();
    assert_eq!(g.read_vec(&name).unwrap(), f.read_vec("m").unwrap());

    // Sparse stays sparse from zTensor to zTensor.
    let zt = dir.path().join("s.zt");
    ok(&["convert", &csr, s(&zt), "--zt-version", "2"]);
    let v: Value = serde_json::from_str(&ok(&["inspect", "--json", s(&zt)])).unwrap();
    assert_eq!(v["tensors"][0]["name"], "m");
    let (a, b) = (
        ok(&["hash", "--content", &csr]),
        ok(&["hash", "--content", s(&zt)]),
    );
    assert_eq!(
        a.split("  ").nth(1),
        b.split("  ").nth(1),
        "same parts, same content"
    );
}

#[test]
fn the_same_model_has_one_id_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let st = data("safetensors/mixed_meta3.safetensors");
    let mut ids = Vec::new();
    ids.push(ok(&["hash", "--content", &st]));
    for (v, extra) in [("1.1", "zstd"), ("2", "zstd:7")] {
        let zt = dir.path().join(format!("m{v}.zt"));
        ok(&[
            "convert",
            &st,
            s(&zt),
            "--zt-version",
            v,
            "--compress",
            extra,
        ]);
        ids.push(ok(&["hash", "--content", s(&zt)]));
        assert_eq!(
            run(&["diff", "--values", &st, s(&zt)]).status.code(),
            Some(0)
        );
    }
    let first: Vec<&str> = ids[0].split("  ").take(2).collect();
    for id in &ids[1..] {
        assert_eq!(id.split("  ").take(2).collect::<Vec<_>>(), first);
    }
    // A cast to F16 is another model; the diff names the changed tensors.
    let zt = dir.path().join("half.zt");
    ok(&["convert", &st, s(&zt), "--dtype", "F16"]);
    assert_ne!(
        ok(&["hash", s(&zt)]).split("  ").next(),
        ids[0].split("  ").next()
    );
    let o = run(&["diff", &st, s(&zt)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout)
        .contains("~ tensor model.layers.0.weight  F32 [4, 4] (64 B) -> F16 [4, 4] (32 B)"));
}
