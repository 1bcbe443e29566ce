//! Messages name layouts and metadata values as the formats spell them, never as Rust's debug
//! text (`Other("acme.thing/1")`, `U32(48)`): the vendor layout of
//! tests/data/ztensor/v2/unknown_layout.zt (ztensor 2.1.2) through convert and diff, and a bad
//! `general.alignment` given to the GGUF writer.

#[path = "support/cli.rs"]
mod cli;
use cli::{data, p, run};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn no_debug_text(text: &str) {
    assert!(!text.contains("Other(") && !text.contains("(\""), "{text}");
}

#[test]
fn layouts_are_named_as_the_file_names_them() {
    let dir = tempfile::tempdir().unwrap();
    for out in ["o.safetensors", "o.gguf"] {
        let o = run(&[
            "convert",
            &data("ztensor/v2/unknown_layout.zt"),
            p(&dir.path().join(out)),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("tensor 'thing'") && err.contains("layout acme.thing/1"),
            "{err}"
        );
        no_debug_text(&err);
    }
    let o = run(&[
        "convert",
        "--densify",
        &data("ztensor/v2/unknown_layout.zt"),
        p(&dir.path().join("d.safetensors")),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("acme.thing/1"), "{err}");
    no_debug_text(&err);
    let o = run(&[
        "diff",
        "--values",
        &data("ztensor/v2/unknown_layout.zt"),
        &data("ztensor/v2/unknown_layout.zt"),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("values of layouts acme.thing/1 and acme.thing/1 are not compared"),
        "{out}"
    );
    no_debug_text(&out);
}

#[test]
fn a_bad_alignment_is_shown_with_its_gguf_type() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.safetensors");
    let mut w = Writer::new();
    w.add("w", DType::F32, &[2], vec![0u8; 8]).unwrap();
    w.write_file(&a).unwrap();
    let o = run(&[
        "convert",
        p(&a),
        p(&dir.path().join("o.gguf")),
        "--set",
        "general.alignment=u32:48",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("got UINT32 48"), "{err}");
}

#[test]
fn an_endpoint_of_another_scheme_is_refused_in_words() {
    let o = run(&[
        "inspect",
        "s3://bucket/key.safetensors",
        "--storage-option",
        "endpoint_url=ftp://localhost",
        "--storage-option",
        "anon=true",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("http:// or https://"), "{err}");
    assert!(!err.contains("UnsupportedScheme"), "{err}");
}
