//! Split GGUF models: written by `gguf::write_split`, opened whole from any part or the
//! folder, and refused by name when the parts do not make one model (one test per rule).
//! Byte identity with gguf-py's split writer is checked live in tests/python/test_gguf_split.py.

use std::path::Path;
use tensorsmith::error::ErrorKind;
use tensorsmith::gguf::{self, GgmlType, GgufValue, SplitLimits};
use tensorsmith::model::open_reader;
use tensorsmith::ops::convert::{convert, ConvertOptions};
use tensorsmith::{open, OpenOptions};

/// `n` F32 tensors `t{i}` of shape [i + 1, 4], written at `dir/stem.gguf` split by `limits`.
fn write_model(dir: &Path, stem: &str, n: usize, limits: SplitLimits) -> Vec<String> {
    let mut w = gguf::Writer::new();
    w.set("general.architecture", GgufValue::String("llama".into()));
    w.set("general.name", GgufValue::String(stem.into()));
    for i in 0..n {
        let rows = i as u64 + 1;
        let bytes: Vec<u8> = (0..rows * 4)
            .flat_map(|x| (x as f32 + i as f32).to_le_bytes())
            .collect();
        w.add(format!("t{i}"), vec![4, rows].into(), f32_type(), bytes)
            .unwrap();
    }
    gguf::write_split(w, &dir.join(format!("{stem}.gguf")), &limits)
        .unwrap()
        .into_iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn by_two() -> SplitLimits {
    SplitLimits {
        max_tensors: 2,
        ..Default::default()
    }
}

fn split_error(target: &Path) -> String {
    let e = open(&target.to_string_lossy(), &OpenOptions::new()).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::BadSplit(_)),
        "{target:?}: {e}"
    );
    assert!(e.is_invalid_input(), "{e}");
    e.to_string()
}

#[test]
fn any_part_or_the_folder_opens_the_whole_model() {
    let d = tempfile::tempdir().unwrap();
    let names = write_model(d.path(), "m", 5, by_two());
    assert_eq!(
        names,
        [
            "m-00001-of-00003.gguf",
            "m-00002-of-00003.gguf",
            "m-00003-of-00003.gguf"
        ]
    );
    for target in names
        .iter()
        .map(|n| d.path().join(n))
        .chain([d.path().to_path_buf()])
    {
        let m = open(&target.to_string_lossy(), &OpenOptions::new()).unwrap();
        assert_eq!(m.index.tensors.len(), 5, "{target:?}");
        let split = m.split().unwrap();
        assert_eq!((split.count, split.tensors), (3, 5));
        assert_eq!(m.files.len(), 3);
        assert!(m.index.metadata.keys().all(|k| !k.starts_with("split.")));
        assert_eq!(
            m.index.metadata["general.name"],
            tensorsmith::index::MetaValue::Str("m".into())
        );
        let t4 = m.index.get("t4").unwrap();
        assert_eq!(m.file_of(t4).name, names[2]);
        assert_eq!(m.tensor_bytes(t4).unwrap().len(), 5 * 4 * 4);
    }
    // One part alone, when asked for: its keys stay in its metadata.
    let part = d.path().join(&names[1]);
    let alone = open(
        &part.to_string_lossy(),
        &OpenOptions::new().with_part_only(true),
    )
    .unwrap();
    assert_eq!(alone.index.tensors.len(), 2);
    assert!(alone.split().is_none());
    assert!(alone.index.metadata.contains_key("split.count"));
    // A part through bytes the caller opened cannot find the others: refused by default.
    let bytes = std::fs::read(&part).unwrap();
    let e = open_reader("p.gguf", Box::new(bytes.clone()), &OpenOptions::new()).unwrap_err();
    assert!(e.to_string().contains("part 2 of 3"), "{e}");
    let alone = open_reader(
        "p.gguf",
        Box::new(bytes),
        &OpenOptions::new().with_part_only(true),
    )
    .unwrap();
    assert_eq!(alone.index.tensors.len(), 2);
}

#[test]
fn a_missing_part_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let names = write_model(d.path(), "m", 5, by_two());
    std::fs::remove_file(d.path().join(&names[1])).unwrap();
    for n in [&names[0], &names[2]] {
        let e = split_error(&d.path().join(n));
        assert!(e.contains("part 2 of 3 is missing"), "{e}");
        assert!(e.contains(&names[1]), "{e}");
    }
}

#[test]
fn a_part_numbered_twice_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let names = write_model(d.path(), "m", 5, by_two());
    std::fs::copy(d.path().join(&names[0]), d.path().join(&names[2])).unwrap();
    let e = split_error(&d.path().join(&names[1]));
    assert!(e.contains("part 3 says split.no 0"), "{e}");
    // A part whose name and keys disagree, given directly.
    let e = split_error(&d.path().join(&names[2]));
    assert!(e.contains("named part 3 of 3"), "{e}");
}

#[test]
fn parts_that_disagree_on_the_counts_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let names = write_model(d.path(), "m", 5, by_two());
    // Another model of 3 parts (6 tensors) puts its last part under this one's name.
    let other = tempfile::tempdir().unwrap();
    let other_names = write_model(other.path(), "m", 6, by_two());
    std::fs::copy(other.path().join(&other_names[2]), d.path().join(&names[2])).unwrap();
    let e = split_error(&d.path().join(&names[0]));
    assert!(e.contains("split.tensors.count 6"), "{e}");
}

/// Part `no` (0-based) of `count`, holding F32 tensors `names` of one row of 4, with the keys.
fn write_part(path: &Path, no: u16, count: u16, total: i32, names: &[&str]) {
    let mut w = gguf::Writer::new();
    for name in names {
        w.add(*name, vec![4, 1].into(), f32_type(), vec![0u8; 16])
            .unwrap();
    }
    w.set("split.no", GgufValue::U16(no));
    w.set("split.count", GgufValue::U16(count));
    w.set("split.tensors.count", GgufValue::I32(total));
    w.write_file(path).unwrap();
}

#[test]
fn tensors_that_do_not_add_up_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let names = write_model(d.path(), "m", 5, by_two());
    // Part 1 holds t0 only: 4 tensors in all, where the keys say 5.
    write_part(&d.path().join(&names[0]), 0, 3, 5, &["t0"]);
    let e = split_error(&d.path().join(&names[2]));
    assert!(
        e.contains("the 3 parts hold 4 tensors, but split.tensors.count says 5"),
        "{e}"
    );
}

#[test]
fn a_tensor_in_two_parts_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let names = write_model(d.path(), "m", 4, by_two());
    assert_eq!(names.len(), 2);
    // Part 2 rewritten to hold t0 and t1 again, with part 2's keys.
    write_part(&d.path().join(&names[1]), 1, 2, 4, &["t0", "t1"]);
    let e = split_error(&d.path().join(&names[0]));
    assert!(
        e.contains("tensor 't0' is also in m-00001-of-00002.gguf"),
        "{e}"
    );
}

#[test]
fn a_part_whose_name_hides_the_others_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let names = write_model(d.path(), "m", 5, by_two());
    let renamed = d.path().join("renamed.gguf");
    std::fs::rename(d.path().join(&names[0]), &renamed).unwrap();
    let e = split_error(&renamed);
    assert!(e.contains("--part-only"), "{e}");
}

#[test]
fn a_folder_of_several_models_is_refused_naming_them() {
    let d = tempfile::tempdir().unwrap();
    write_model(d.path(), "m", 5, by_two());
    write_model(d.path(), "mmproj-f16", 1, SplitLimits::default());
    let e = split_error(d.path());
    assert!(
        e.contains("m (3 parts)") && e.contains("mmproj-f16.gguf"),
        "{e}"
    );
}

#[test]
fn split_then_merge_is_byte_identical() {
    let d = tempfile::tempdir().unwrap();
    write_model(d.path(), "whole", 5, SplitLimits::default());
    let whole = d.path().join("whole.gguf");
    let model = open(&whole.to_string_lossy(), &OpenOptions::new()).unwrap();
    let split_dir = d.path().join("split");
    std::fs::create_dir(&split_dir).unwrap();
    let parts = convert(
        &model,
        &split_dir.join("s.gguf"),
        &ConvertOptions::new().with_split_small_first(true),
    )
    .unwrap();
    assert_eq!(parts.len(), 2, "{parts:?}");
    let first = open(&parts[0].to_string_lossy(), &OpenOptions::new()).unwrap();
    assert_eq!(first.files[0].file_len, first.files[0].header_len);
    let merged = d.path().join("merged.gguf");
    convert(&first, &merged, &ConvertOptions::new()).unwrap();
    assert_eq!(
        std::fs::read(&merged).unwrap(),
        std::fs::read(&whole).unwrap()
    );
    // Nothing staged is left beside the parts.
    let left: Vec<_> = std::fs::read_dir(&split_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

fn f32_type() -> GgmlType {
    GgmlType::from_id(0).expect("ggml type 0 is F32")
}
