//! `dataset` errors that say what to do: an input that is not Parquet or Arrow names what the
//! command reads (and a model file as one, and nothing the Arrow reader made of it), a
//! missing `--dtype` names the column's Arrow type and the option; `write`'s summary names the
//! reader that read the input (and `-q` prints none); `dataset export --key` takes a name as
//! the Spark source's `keys` does, or a full tensor key.

use arrow_array::builder::{Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$(std::ffi::OsStr::new($a)),*] };
}

/// Three rows: key `r{i}`, two columns `a` and `b` of 2 f32.
fn input(path: &Path) {
    let list = DataType::List(Arc::new(Field::new("item", DataType::Float32, true)));
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", list.clone(), false),
        Field::new("b", list, false),
        Field::new("id", DataType::Utf8, false),
    ]));
    let (mut a, mut b, mut k) = (
        ListBuilder::new(Float32Builder::new()),
        ListBuilder::new(Float32Builder::new()),
        StringBuilder::new(),
    );
    for r in 0..3 {
        a.values().append_slice(&[r as f32, 1.0]);
        a.append(true);
        b.values().append_slice(&[r as f32, 2.0]);
        b.append(true);
        k.append_value(format!("r{r}"));
    }
    let cols = vec![
        Arc::new(a.finish()) as ArrayRef,
        Arc::new(b.finish()),
        Arc::new(k.finish()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let mut w =
        arrow_ipc::writer::FileWriter::try_new(std::fs::File::create(path).unwrap(), &schema)
            .unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

#[test]
fn input_that_is_not_parquet_or_arrow_is_named_for_what_it_is() {
    let d = tempfile::tempdir().unwrap();
    let txt = d.path().join("rows.csv");
    std::fs::write(&txt, "a,b\n1,2\n").unwrap();
    let st = d.path().join("m.safetensors");
    let mut w = tensorsmith::safetensors::Writer::new();
    w.add("w", tensorsmith::dtype::DType::F32, &[1], vec![0u8; 4])
        .unwrap();
    w.write_file(&st).unwrap();
    let out = d.path().join("ds");
    for (file, says) in [(&txt, "(text)"), (&st, "a safetensors model file")] {
        let (code, _, err) = run(args![
            "dataset",
            "write",
            file.as_os_str(),
            out.as_os_str(),
            "--batch-size",
            "1",
            "--dtype",
            "F32"
        ]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains("dataset write reads Parquet files and Arrow IPC files or streams"),
            "{err}"
        );
        assert!(err.contains(says), "{err}");
        assert!(err.contains("not a Parquet or Arrow file"), "{err}");
        let named = format!(
            "tensorsmith: {}: not a Parquet or Arrow file",
            file.display()
        );
        assert!(err.starts_with(&named), "{err}");
        // Only the message: not what the Arrow stream reader made of the bytes.
        assert!(
            !err.contains("metadata bytes") && !err.contains("Arrow stream"),
            "{err}"
        );
        assert!(!out.join("dataset_manifest.json").exists());
    }
}

#[test]
fn the_summary_names_the_reader_and_quiet_prints_nothing() {
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in.arrow");
    input(&inp);
    let out = d.path().join("ds");
    let (code, _, err) = run(args![
        "dataset",
        "write",
        inp.as_os_str(),
        out.as_os_str(),
        "--batch-size",
        "2",
        "--dtype",
        "F32",
        "--columns",
        "a,b"
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("(2 through the Arrow IPC reader)"), "{err}");
    assert!(!err.contains("Parquet"), "{err}");
    let (code, stdout, err) = run(args![
        "dataset",
        "write",
        inp.as_os_str(),
        out.as_os_str(),
        "--batch-size",
        "2",
        "--dtype",
        "F32",
        "--columns",
        "a,b",
        "--mode",
        "overwrite",
        "-q"
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!((stdout.as_str(), err.as_str()), ("", ""));
}

#[test]
fn a_missing_dtype_names_the_arrow_type_and_the_option() {
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in.arrow");
    input(&inp);
    let out = d.path().join("ds");
    let (code, _, err) = run(args![
        "dataset",
        "write",
        inp.as_os_str(),
        out.as_os_str(),
        "--batch-size",
        "1",
        "--columns",
        "a"
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("column 'a': Arrow type List(Float32"), "{err}");
    assert!(err.contains("--dtype F32"), "{err}");
}

#[test]
fn export_key_takes_a_name_or_a_full_key() {
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in.arrow");
    input(&inp);
    let ds = d.path().join("ds");
    let (code, _, err) = run(args![
        "dataset",
        "write",
        inp.as_os_str(),
        ds.as_os_str(),
        "--name-col",
        "id",
        "--dtype",
        "F32",
        "--generate-index"
    ]);
    assert_eq!(code, Some(0), "{err}");
    let out = d.path().join("some.parquet");
    let (code, _, err) = run(args![
        "dataset",
        "export",
        ds.as_os_str(),
        out.as_os_str(),
        "--key",
        "r2",
        "--key",
        "r0__b"
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(": 3 rows"), "{err}");
    let (code, _, err) = run(args![
        "dataset",
        "export",
        ds.as_os_str(),
        out.as_os_str(),
        "--key",
        "r0__"
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no tensor key or name 'r0__'"), "{err}");
}
