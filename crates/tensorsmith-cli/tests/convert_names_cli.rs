//! How `convert` reads the output's name: extensions in any case (`out.ZT` is zTensor as
//! `out.GGUF` is GGUF), and `--zt-version` refused with a name that says safetensors; `verify
//! --help` names every format whose digests it checks.

#[path = "support/cli.rs"]
mod cli;
use cli::{p, run};
use std::path::Path;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn model(path: &Path) {
    let mut w = Writer::new();
    w.add("w", DType::F32, &[2], vec![0u8; 8]).unwrap();
    w.write_file(path).unwrap();
}

fn format_of(path: &Path) -> String {
    let o = run(&["inspect", "--json", p(path)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["format"].as_str().unwrap().to_owned()
}

#[test]
fn output_extensions_match_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.safetensors");
    model(&a);
    for (name, format) in [
        ("out.ZT", "ztensor"),
        ("out.Zt", "ztensor"),
        ("out.GGUF", "gguf"),
    ] {
        let out = dir.path().join(name);
        let o = run(&["convert", p(&a), p(&out)]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(format_of(&out), format, "{name}");
    }
}

#[test]
fn a_zt_version_with_a_safetensors_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.safetensors");
    model(&a);
    for name in ["out.safetensors", "out.SafeTensors"] {
        let out = dir.path().join(name);
        let o = run(&["convert", p(&a), p(&out), "--zt-version", "2"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(name) && err.contains("zTensor version"),
            "{err}"
        );
        assert!(!out.exists(), "{name} written");
    }
}

#[test]
fn verify_help_names_safetensors_digests() {
    let o = run(&["verify", "--help"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("safetensors"), "{text}");
    assert!(!text.contains("records (zTensor)"), "{text}");
}
