//! `tensorsmith inspect` on GGUF files written by the `gguf` package: format and version,
//! ggml type names, block-based byte lengths and bits per weight, typed metadata, long arrays
//! shortened in text and whole in JSON.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn vector(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/gguf")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn inspect_json_of_a_gguf_file() {
    let v = json(&["inspect", "--json", &vector("every_type.gguf")]);
    assert_eq!(v["format"], "gguf");
    assert_eq!(v["format_version"], "3");
    assert_eq!(v["tensor_count"], 10);
    assert_eq!(v["header_size"], 1440);
    let q4 = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "q4_0")
        .unwrap();
    assert_eq!(q4["dtype"], "q4_0");
    assert_eq!(q4["shape"], serde_json::json!([4, 64]));
    assert_eq!(q4["byte_length"], 144);
    assert_eq!(q4["parameters"], 256);
    let types = v["dtypes"].as_array().unwrap();
    let q4 = types.iter().find(|t| t["dtype"] == "q4_0").unwrap();
    assert_eq!(q4["bits_per_weight"], 4.5);
    let q8 = types.iter().find(|t| t["dtype"] == "q8_0").unwrap();
    assert_eq!(q8["bits_per_weight"], 8.5);
    let m = &v["metadata"];
    assert_eq!(m["t.f32"], 0.1);
    assert_eq!(m["t.u64"], u64::MAX);
    assert_eq!(m["t.i64"], i64::MIN);
    assert_eq!(m["t.arr_nested"], serde_json::json!([[1, 2], [3]]));
    assert_eq!(m["t.string"], "héllo \"wörld\"\n\t\u{1} ✓");
}

#[test]
fn inspect_text_shortens_vocabularies_and_escapes_controls() {
    let o = run(&["inspect", &vector("vocab_150k.gguf")]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("format:      gguf (version 3)"), "{text}");
    assert!(
        text.contains(r#"tokenizer.ggml.tokens: ["t0", "t1""#),
        "{text}"
    );
    assert!(text.contains("(150,000 items)]"), "{text}");
    assert!(text.len() < 4000, "a 150k vocabulary printed in full");

    let o = run(&["inspect", &vector("every_type.gguf")]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains(r#"t.string: héllo "wörld"\n\t\u{1} ✓"#),
        "{text}"
    );
    assert!(
        text.contains("q4_0                1              256        144 B   4.50"),
        "{text}"
    );

    let v = json(&["inspect", "--json", &vector("vocab_150k.gguf")]);
    assert_eq!(
        v["metadata"]["tokenizer.ggml.tokens"]
            .as_array()
            .unwrap()
            .len(),
        150_000
    );
}

#[test]
fn a_broken_gguf_file_is_an_error_naming_file_tensor_and_rule() {
    let o = run(&["inspect", &vector("misaligned.gguf")]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("misaligned.gguf")
            && err.contains("tensor 'b'")
            && err.contains("not a multiple of the alignment 64"),
        "{err}"
    );
}

#[test]
fn plain_gguf_tensors_convert_to_safetensors_and_ztensor() {
    let dir = tempfile::tempdir().unwrap();
    let src = vector("alignment64.gguf");
    for out in ["a.safetensors", "a.zt"] {
        let dst = dir.path().join(out);
        let o = run(&["convert", &src, dst.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // Exit 1: the metadata changes type on the way (below); the tensors do not.
        let o = run(&[
            "diff",
            "--values",
            "--all",
            "--json",
            &src,
            dst.to_str().unwrap(),
        ]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["tensors"]["changed"], serde_json::json!([]), "{out}");
        let compared = v["values"]["compared"].as_array().unwrap();
        assert_eq!(compared.len(), 2);
        assert!(
            compared.iter().all(|c| c["identical"] == true),
            "{out}: {v}"
        );
        // GGUF's typed metadata becomes strings in safetensors (JSON text for non-strings).
        let m = json(&["inspect", "--json", dst.to_str().unwrap()])["metadata"].clone();
        if out.ends_with(".safetensors") {
            assert_eq!(m["general.alignment"], "64");
            assert_eq!(m["general.architecture"], "llama");
        } else {
            assert_eq!(m["general.alignment"], 64);
        }
    }
}

#[test]
fn block_quantized_gguf_tensors_convert_dequantized() {
    // q8_0 and q4_0 become F32 values (or the --dtype asked for); diff --values then finds
    // them equal to the GGUF's dequantized values. (Bit-identity with gguf-py is checked in
    // tests/python/test_gguf_dequant.py.)
    let dir = tempfile::tempdir().unwrap();
    let src = vector("every_type.gguf");
    for (out, dtype, want) in [
        ("q.safetensors", None, "F32"),
        ("q.zt", None, "F32"),
        ("q16.safetensors", Some("F16"), "F16"),
    ] {
        let dst = dir.path().join(out);
        let mut args = vec!["convert", &src, dst.to_str().unwrap()];
        if let Some(d) = dtype {
            args.extend(["--dtype", d]);
        }
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v = json(&["inspect", "--json", dst.to_str().unwrap()]);
        for name in ["q8_0", "q4_0"] {
            let t = v["tensors"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .unwrap();
            assert_eq!(t["dtype"], want, "{out} {name}: {t}");
        }
        if dtype.is_none() {
            let o = run(&[
                "diff",
                "--values",
                "--all",
                "--json",
                &src,
                dst.to_str().unwrap(),
            ]);
            let d: Value = serde_json::from_slice(&o.stdout).unwrap();
            let compared = d["values"]["compared"].as_array().unwrap();
            for name in ["q8_0", "q4_0"] {
                let c = compared.iter().find(|c| c["name"] == name).unwrap();
                assert_eq!(c["identical"], true, "{out}: {c}");
            }
        }
    }
}
