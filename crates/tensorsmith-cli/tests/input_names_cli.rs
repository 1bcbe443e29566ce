//! Inputs whose names are not UTF-8 (a byte 0xFF in the name) are opened by their bytes, in
//! every command that reads a model; a folder of such a name is refused naming the rule.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn run(args: &[&OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn model(dir: &Path) -> PathBuf {
    model_named(dir, b"m\xFFdel.safetensors")
}

fn model_named(dir: &Path, name: &[u8]) -> PathBuf {
    let p = dir.join(OsStr::from_bytes(name));
    let mut w = Writer::new();
    w.add("w", DType::F32, &[2], 1.5f32.to_le_bytes().repeat(2))
        .unwrap();
    w.write_file(&p).unwrap();
    p
}

#[test]
fn a_file_named_with_a_non_utf8_byte_is_read_by_every_command() {
    let d = tempfile::tempdir().unwrap();
    let m = model(d.path());
    let m = m.as_os_str();
    let out = d.path().join("out.safetensors");
    let page = d.path().join("page.html");
    let os = |s: &'static str| OsStr::new(s);
    for args in [
        vec![os("inspect"), m],
        vec![os("hash"), os("--content"), m],
        vec![os("stats"), m],
        vec![os("validate"), m],
        vec![os("verify"), m],
        vec![os("convert"), m, out.as_os_str()],
        vec![os("diff"), m, m],
        vec![os("report"), m, os("-o"), page.as_os_str()],
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("No such file"), "{args:?}: {err}");
    }
    let copy = tensorsmith::open(out.to_str().unwrap(), &Default::default()).unwrap();
    assert_eq!(copy.index.tensors[0].name, "w");
    let o = run(&[os("inspect"), m]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("F32"), "{text}");
}

/// Names whose last bytes are inside a multi-byte character (as UTF-8, or the lossy form of
/// a non-UTF-8 byte, U+FFFD) once panicked the ONNX name check, which sliced the name's last
/// five bytes as a `str`.
#[test]
fn names_ending_inside_a_multibyte_character_are_read_and_written() {
    let d = tempfile::tempdir().unwrap();
    let os = |s: &'static str| OsStr::new(s);
    let names: [&[u8]; 4] = [
        "模型.zt".as_bytes(),
        "权重".as_bytes(),
        b"o\xFE.zt",
        "ß.onnx".as_bytes(),
    ];
    for name in names {
        let m = model_named(d.path(), name);
        for args in [
            vec![os("inspect"), m.as_os_str()],
            vec![os("hash"), m.as_os_str()],
            vec![os("validate"), m.as_os_str()],
        ] {
            let o = run(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            if name.ends_with(b".onnx") {
                // A safetensors file named .onnx is read as ONNX (the name claims it): refused
                // with ONNX's words (validate: 1, the others: 2).
                let out = format!("{err}{}", String::from_utf8_lossy(&o.stdout));
                assert!(matches!(o.status.code(), Some(1 | 2)), "{args:?}: {out}");
                assert!(out.to_lowercase().contains("onnx"), "{args:?}: {out}");
            } else {
                assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
            }
        }
    }
    // Written under such a name, then read back.
    let out = d.path().join("输出.zt");
    let m = model(d.path());
    let o = run(&[os("convert"), m.as_os_str(), out.as_os_str()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(&[os("inspect"), out.as_os_str()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("F32"));
}

#[test]
fn a_folder_named_with_a_non_utf8_byte_is_refused_naming_the_rule() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join(OsStr::from_bytes(b"ck\xFF"));
    std::fs::create_dir(&dir).unwrap();
    model(&dir);
    let o = run(&[OsStr::new("inspect"), dir.as_os_str()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not UTF-8"), "{err}");
    assert!(!err.contains("No such file"), "{err}");
}

#[test]
fn a_sharded_output_named_with_a_non_utf8_byte_is_refused_not_renamed() {
    let d = tempfile::tempdir().unwrap();
    let m = model(d.path());
    let out = d.path().join(OsStr::from_bytes(b"s\xFF.safetensors"));
    let args = [
        OsStr::new("convert"),
        m.as_os_str(),
        out.as_os_str(),
        OsStr::new("--shard-size"),
        OsStr::new("4"),
    ];
    let o = run(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not UTF-8"), "{err}");
    let names: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![m.file_name().unwrap().to_owned()]);
}

#[test]
fn a_dataset_input_named_with_a_non_utf8_byte_is_refused_naming_the_rule() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join(OsStr::from_bytes(b"in\xFF.parquet"));
    std::fs::write(&input, b"PAR1").unwrap();
    let out = d.path().join("ds");
    let os = OsStr::new;
    let o = run(&[
        os("dataset"),
        os("write"),
        input.as_os_str(),
        out.as_os_str(),
        os("--batch-size"),
        os("1"),
        os("--dtype"),
        os("F32"),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not UTF-8"), "{err}");
    assert!(!err.contains("No such file"), "{err}");
    assert!(!out.exists());
}
