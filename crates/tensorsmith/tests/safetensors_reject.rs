//! One crafted file per rejection rule (FORMAT-NOTES §1.2 plus our stricter rules): each is
//! refused with its own error kind, and the message names the file and, where there is one,
//! the tensor. Also the edge cases the reference accepts, which we must accept too.

use std::path::PathBuf;
use tensorsmith::safetensors::SafetensorsFile;
use tensorsmith::ErrorKind;
use tensorsmith::OpenOptions;

/// A file: the 8-byte length of `header`, `header`, then `data` zero bytes.
fn craft(dir: &tempfile::TempDir, header: &[u8], data: usize) -> PathBuf {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.resize(bytes.len() + data, 0);
    raw(dir, &bytes)
}

fn raw(dir: &tempfile::TempDir, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join("crafted.safetensors");
    std::fs::write(&p, bytes).unwrap();
    p
}

fn reject(path: &PathBuf, opts: &OpenOptions) -> tensorsmith::Error {
    let e = SafetensorsFile::open_with(path, opts).expect_err("the crafted file must be rejected");
    assert!(
        e.to_string().contains("crafted.safetensors"),
        "no file in: {e}"
    );
    assert!(e.is_invalid_input(), "{e}");
    e
}

macro_rules! rule {
    ($test:ident, $header:expr, $data:expr, $kind:pat, $tensor:expr) => {
        #[test]
        fn $test() {
            let dir = tempfile::tempdir().unwrap();
            let p = craft(&dir, $header.as_bytes(), $data);
            let e = reject(&p, &OpenOptions::new());
            assert!(matches!(e.kind(), $kind), "{e}");
            assert_eq!(e.tensor(), $tensor, "{e}");
        }
    };
}

const T: &str = r#""dtype":"F32","shape":[2]"#;

rule!(
    rejects_non_object_json,
    "[1,2]",
    0,
    ErrorKind::HeaderNotObject,
    None
);
rule!(
    rejects_invalid_json,
    r#"{"a":{"dtype":"F32",}}"#,
    0,
    ErrorKind::HeaderJson { .. },
    Some("a")
);
rule!(
    rejects_invalid_json_at_top_level,
    r#"{"a" 1}"#,
    0,
    ErrorKind::HeaderJson { .. },
    None
);
rule!(
    rejects_duplicate_keys,
    &format!(r#"{{"a":{{{T},"data_offsets":[0,8]}},"a":{{{T},"data_offsets":[8,16]}}}}"#),
    16,
    ErrorKind::DuplicateKey,
    Some("a")
);
rule!(
    rejects_metadata_that_is_not_strings,
    r#"{"__metadata__":{"n":1}}"#,
    0,
    ErrorKind::BadMetadata { .. },
    None
);
rule!(
    rejects_metadata_that_is_not_an_object,
    r#"{"__metadata__":["x"]}"#,
    0,
    ErrorKind::BadMetadata { .. },
    None
);
rule!(
    rejects_unknown_dtype,
    r#"{"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}"#,
    4,
    ErrorKind::UnknownDtype(_),
    Some("a")
);
rule!(
    rejects_lowercase_dtype,
    r#"{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}"#,
    4,
    ErrorKind::UnknownDtype(_),
    Some("a")
);
rule!(
    rejects_three_data_offsets,
    &format!(r#"{{"a":{{{T},"data_offsets":[0,8,8]}}}}"#),
    8,
    ErrorKind::BadField {
        field: "data_offsets",
        ..
    },
    Some("a")
);
rule!(
    rejects_negative_offsets,
    &format!(r#"{{"a":{{{T},"data_offsets":[-1,7]}}}}"#),
    8,
    ErrorKind::BadField {
        field: "data_offsets",
        ..
    },
    Some("a")
);
rule!(
    rejects_missing_field,
    r#"{"a":{"dtype":"F32","data_offsets":[0,0]}}"#,
    0,
    ErrorKind::MissingField { field: "shape" },
    Some("a")
);
rule!(
    rejects_duplicate_field,
    r#"{"a":{"dtype":"F32","dtype":"F32","shape":[],"data_offsets":[0,4]}}"#,
    4,
    ErrorKind::DuplicateField { field: "dtype" },
    Some("a")
);
rule!(
    rejects_tensor_that_is_not_an_object,
    r#"{"a":[1]}"#,
    0,
    ErrorKind::TensorNotObject,
    Some("a")
);
rule!(
    rejects_hole_between_tensors,
    &format!(r#"{{"a":{{{T},"data_offsets":[0,8]}},"b":{{{T},"data_offsets":[12,20]}}}}"#),
    20,
    ErrorKind::Hole {
        begin: 12,
        expected: 8
    },
    Some("b")
);
rule!(
    rejects_hole_at_start,
    &format!(r#"{{"a":{{{T},"data_offsets":[4,12]}}}}"#),
    12,
    ErrorKind::Hole { .. },
    Some("a")
);
rule!(
    rejects_overlapping_offsets,
    &format!(r#"{{"a":{{{T},"data_offsets":[0,8]}},"b":{{{T},"data_offsets":[4,12]}}}}"#),
    12,
    ErrorKind::Overlap {
        begin: 4,
        expected: 8
    },
    Some("b")
);
rule!(
    rejects_end_before_begin,
    r#"{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"c":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"d":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}"#,
    4,
    ErrorKind::OffsetsReversed { .. },
    Some("d")
);
rule!(
    rejects_size_mismatch,
    r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
    8,
    ErrorKind::SizeMismatch {
        expected: 12,
        actual: 8
    },
    Some("a")
);
rule!(
    rejects_overflowing_shape,
    r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#,
    8,
    ErrorKind::ShapeOverflow,
    Some("a")
);
rule!(
    rejects_overflowing_bits,
    r#"{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}}"#,
    8,
    ErrorKind::ShapeOverflow,
    Some("a")
);
rule!(
    rejects_sub_byte_tensor_not_filling_bytes,
    r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
    2,
    ErrorKind::PartialByte { .. },
    Some("a")
);
rule!(
    rejects_trailing_bytes,
    &format!(r#"{{"a":{{{T},"data_offsets":[0,8]}}}}"#),
    9,
    ErrorKind::TrailingBytes { extra: 1 },
    None
);
rule!(
    rejects_truncated_data,
    &format!(r#"{{"a":{{{T},"data_offsets":[0,8]}}}}"#),
    7,
    ErrorKind::Truncated {
        needed: 8,
        available: 7
    },
    None
);
rule!(
    rejects_nul_padding,
    "{}\0\0\0\0\0\0",
    0,
    ErrorKind::HeaderNulPadding { offset: 2 },
    None
);
rule!(
    rejects_huge_offsets_without_overflow,
    r#"{"a":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}}"#,
    0,
    ErrorKind::Hole { .. },
    Some("a")
);

#[test]
fn rejects_file_smaller_than_length_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let e = reject(&raw(&dir, b"\x02\0\0\0\0"), &OpenOptions::new());
    assert!(
        matches!(e.kind(), ErrorKind::FileTooSmall { len: 5 }),
        "{e}"
    );
    let e = reject(&raw(&dir, b""), &OpenOptions::new());
    assert!(
        matches!(e.kind(), ErrorKind::FileTooSmall { len: 0 }),
        "{e}"
    );
}

#[test]
fn rejects_header_over_the_limit_and_the_limit_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = 100_000_001u64.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    let e = reject(&raw(&dir, &b), &OpenOptions::new());
    assert!(matches!(e.kind(), ErrorKind::HeaderTooLarge { .. }), "{e}");

    let p = craft(&dir, b"{}      ", 0);
    let small = OpenOptions::new().with_max_header_len(4);
    let e = reject(&p, &small);
    assert!(
        matches!(e.kind(), ErrorKind::HeaderTooLarge { len: 8, limit: 4 }),
        "{e}"
    );
    assert!(SafetensorsFile::open(&p).is_ok());
}

#[test]
fn rejects_header_running_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = 64u64.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    let e = reject(&raw(&dir, &b), &OpenOptions::new());
    assert!(matches!(e.kind(), ErrorKind::HeaderPastEnd { .. }), "{e}");
    // A length whose addition to 8 overflows is also "past the end", not a panic.
    let mut b = u64::MAX.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    let opts = OpenOptions::new().with_max_header_len(u64::MAX);
    let e = reject(&raw(&dir, &b), &opts);
    assert!(matches!(e.kind(), ErrorKind::HeaderPastEnd { .. }), "{e}");
}

#[test]
fn rejects_invalid_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let p = craft(&dir, b"{\"\xff\":{}}", 0);
    let e = reject(&p, &OpenOptions::new());
    assert!(
        matches!(e.kind(), ErrorKind::HeaderNotUtf8 { offset: 2 }),
        "{e}"
    );
}

#[test]
fn rejects_packed_ints_when_asked_to_be_reference_strict() {
    let dir = tempfile::tempdir().unwrap();
    let p = craft(
        &dir,
        br#"{"a":{"dtype":"I4","shape":[4],"data_offsets":[0,2]}}"#,
        2,
    );
    assert!(SafetensorsFile::open(&p).is_ok());
    let strict = OpenOptions::new().with_packed_ints(false);
    let e = reject(&p, &strict);
    assert!(matches!(e.kind(), ErrorKind::UnknownDtype(_)), "{e}");
}

#[test]
fn accepts_what_the_reference_accepts() {
    let dir = tempfile::tempdir().unwrap();
    // Smallest valid file: 10 bytes.
    let p = craft(&dir, b"{}", 0);
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 10);
    assert!(SafetensorsFile::open(&p)
        .unwrap()
        .index()
        .tensors
        .is_empty());
    // Whitespace around the object, unknown fields, scalars, zero-size tensors sharing an
    // offset, null metadata, and tensors listed out of offset order.
    let h = r#"  {"z":{"dtype":"F32","shape":[],"data_offsets":[4,8],"extra":{"a":[1,2.5e3,null]}},
        "a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},
        "e1":{"dtype":"U8","shape":[0,3],"data_offsets":[8,8]},
        "e2":{"dtype":"U8","shape":[0],"data_offsets":[8,8]},
        "__metadata__":null}  "#;
    let p = craft(&dir, h.as_bytes(), 8);
    let f = SafetensorsFile::open(&p).unwrap();
    let names: Vec<&str> = f.names().collect();
    assert_eq!(names, ["a", "z", "e1", "e2"]);
    assert_eq!(
        f.info("z").unwrap().data_range(),
        (8 + h.len() as u64 + 4)..(8 + h.len() as u64 + 8)
    );
}

/// Regression from the `safetensors_header` fuzz target (its first disagreement with the
/// reference): a header naming a tensor twice. The reference's HashMap keeps the last entry
/// and accepts the file, silently dropping a tensor; we refuse it (a documented divergence,
/// which the fuzz target now allows).
#[test]
fn duplicate_tensor_names_accepted_by_the_reference_are_refused_here() {
    let header = br#"{"m":{"dtype":"I32","shape":[3,4],"data_offsets":[0,48]},"s":{"dtype":"I32","shape":[],"data_offsets":[48,52]},"m":{"dtype":"I32","shape":[3,4],"data_offsets":[0,48]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.resize(bytes.len() + 52, 0);
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).expect("reference accepts");
    assert_eq!(meta.tensors().len(), 2, "the reference keeps one 'm'");
    let e = tensorsmith::safetensors::parse_bytes(&bytes, &OpenOptions::new()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::DuplicateKey), "{e}");
    assert_eq!(e.tensor(), Some("m"));
}

/// Regression from the `safetensors_header` fuzz target (its second disagreement): a key of
/// `__metadata__` given twice. The reference keeps the last value; we refuse the file.
#[test]
fn duplicate_metadata_keys_accepted_by_the_reference_are_refused_here() {
    let header = br#"{"__metadata__":{"format":"np","format":"pt"},"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.push(0);
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).expect("reference accepts");
    assert_eq!(meta.metadata().as_ref().unwrap()["format"], "pt");
    let e = tensorsmith::safetensors::parse_bytes(&bytes, &OpenOptions::new()).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::BadMetadata { msg } if msg.contains("'format' appears twice")),
        "{e}"
    );
}
