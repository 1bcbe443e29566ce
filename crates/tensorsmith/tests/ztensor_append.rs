//! Appending to a zTensor v2 file: old objects keep their bytes and offsets, new ones follow,
//! the manifest holds both, attributes are kept; a name already there, a non-v2 file, or a
//! non-v2 writer is refused and the file left as it was.

use std::collections::BTreeMap;
use tensorsmith::dtype::DType;
use tensorsmith::index::{MetaValue, ZtVersion};
use tensorsmith::ops::convert::{convert, ConvertOptions};
use tensorsmith::safetensors::Writer as StWriter;
use tensorsmith::ztensor::{self, Compression, DigestKind, WriteOptions, Writer};
use tensorsmith::{ErrorKind, OpenOptions};

fn base(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("m.zt");
    let mut w = Writer::new(
        WriteOptions::new()
            .with_compression(Compression::Zstd { level: 3 })
            .with_digest(DigestKind::Xxh3),
    );
    let mut attrs = BTreeMap::new();
    attrs.insert("kind".to_string(), MetaValue::Str("base".into()));
    w.set_attributes(attrs).unwrap();
    w.add_dense("a", DType::F32, &[1000], vec![7u8; 4000])
        .unwrap();
    w.add_dense("b", DType::U8, &[0], Vec::new()).unwrap();
    w.write_file(&path).unwrap();
    path
}

fn safetensors(dir: &std::path::Path, names: &[&str]) -> tensorsmith::Model {
    let p = dir.join("in.safetensors");
    let mut w = StWriter::new();
    for (i, n) in names.iter().enumerate() {
        w.add(n, DType::I32, &[3], vec![i as u8 + 1; 12]).unwrap();
    }
    w.write_file(&p).unwrap();
    tensorsmith::open(p.to_str().unwrap(), &OpenOptions::new()).unwrap()
}

#[test]
fn appended_objects_follow_the_old_ones_which_keep_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = base(dir.path());
    let before = ztensor::open(&path, &OpenOptions::new()).unwrap();
    let old_ranges: Vec<_> = before
        .index()
        .tensors
        .iter()
        .map(|t| t.parts[0].range.clone())
        .collect();
    let old_a = before.stored_bytes("a", "data").unwrap().into_owned();
    drop(before);
    let input = safetensors(dir.path(), &["c", "d"]);
    let opts = ConvertOptions::new()
        .with_append(true)
        .with_compression(Compression::Zstd { level: 3 })
        .with_digest(DigestKind::Xxh3);
    convert(&input, &path, &opts).unwrap();
    let f = ztensor::open(&path, &OpenOptions::new()).unwrap();
    let names: Vec<&str> = f.index().tensors.iter().map(|t| t.name.as_str()).collect();
    for n in ["a", "b", "c", "d"] {
        assert!(names.contains(&n), "{n} missing: {names:?}");
    }
    let ranges: Vec<_> = ["a", "b"]
        .iter()
        .map(|n| {
            f.index()
                .tensors
                .iter()
                .find(|t| t.name == *n)
                .unwrap()
                .parts[0]
                .range
                .clone()
        })
        .collect();
    assert_eq!(ranges, old_ranges);
    assert_eq!(f.stored_bytes("a", "data").unwrap(), old_a);
    assert_eq!(f.tensor_bytes("c").unwrap(), vec![1u8; 12]);
    assert_eq!(f.tensor_bytes("d").unwrap(), vec![2u8; 12]);
    assert_eq!(
        f.index().metadata.get("kind"),
        Some(&MetaValue::Str("base".into()))
    );
    let report = f.verify();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.checked, 4);
    // New blobs start after the old ones.
    let c = &f
        .index()
        .tensors
        .iter()
        .find(|t| t.name == "c")
        .unwrap()
        .parts[0];
    assert!(c.range.start >= old_ranges[0].end);
}

#[test]
fn a_name_already_there_or_a_file_not_v2_is_refused_and_the_file_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = base(dir.path());
    let old = std::fs::read(&path).unwrap();
    let input = safetensors(dir.path(), &["x", "a"]);
    let e = convert(&input, &path, &ConvertOptions::new().with_append(true)).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Unsupported(_)), "{e}");
    assert!(e.to_string().contains("'a' is already in the file"), "{e}");
    assert!(e.to_string().contains("m.zt"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), old);

    let e = convert(
        &input,
        &path,
        &ConvertOptions::new()
            .with_append(true)
            .with_zt_version(ZtVersion::V1_1),
    )
    .unwrap_err();
    assert!(e.to_string().contains("append"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), old);

    let v11 = dir.path().join("old.zt");
    let mut w = Writer::new(WriteOptions::new().with_version(ZtVersion::V1_1));
    w.add_dense("a", DType::U8, &[1], vec![1]).unwrap();
    w.write_file(&v11).unwrap();
    let v11_bytes = std::fs::read(&v11).unwrap();
    let input = safetensors(dir.path(), &["z"]);
    let e = convert(&input, &v11, &ConvertOptions::new().with_append(true)).unwrap_err();
    assert!(e.to_string().contains("v2"), "{e}");
    assert_eq!(std::fs::read(&v11).unwrap(), v11_bytes);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        3,
        "a temp file was left"
    );
}

#[test]
fn an_unknown_encoding_is_named_as_the_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acme.zt");
    let vector = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/ztensor/v2/invalid_encoding_unknown.zt");
    std::fs::copy(vector, &path).unwrap();
    let input = safetensors(dir.path(), &["new"]);
    let e = convert(&input, &path, &ConvertOptions::new().with_append(true)).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("encoding 'acme-zip/1'"), "{text}");
    assert!(!text.contains("Other("), "{text}");
    assert!(text.contains("acme.zt"), "{text}");
}
