//! GGUF files built byte by byte: versions 1 and 2 (which the `gguf` package no longer
//! writes), edge cases it refuses to write (empty arrays), and one file per rejection rule,
//! each giving its own error.

use std::path::PathBuf;
use tensorsmith::gguf::{parse_bytes, Array, GgufFile, GgufRule, GgufValue as Value};
use tensorsmith::ErrorKind;
use tensorsmith::OpenOptions;

/// Builds a GGUF file. Version 1 writes 32-bit counts, lengths and dimensions.
struct Gguf {
    version: u32,
    kv: Vec<u8>,
    kv_count: u64,
    infos: Vec<u8>,
    tensor_count: u64,
    data: Vec<u8>,
    alignment: usize,
}

impl Gguf {
    fn new(version: u32) -> Gguf {
        Gguf {
            version,
            kv: vec![],
            kv_count: 0,
            infos: vec![],
            tensor_count: 0,
            data: vec![],
            alignment: 32,
        }
    }

    fn len(&self, out: &mut Vec<u8>, n: u64) {
        if self.version == 1 {
            out.extend_from_slice(&(n as u32).to_le_bytes());
        } else {
            out.extend_from_slice(&n.to_le_bytes());
        }
    }

    fn string(&self, out: &mut Vec<u8>, s: &[u8]) {
        self.len(out, s.len() as u64);
        out.extend_from_slice(s);
    }

    /// Adds a key with a raw value type and value bytes.
    fn kv_raw(mut self, key: &[u8], ty: u32, value: &[u8]) -> Self {
        let mut kv = std::mem::take(&mut self.kv);
        self.string(&mut kv, key);
        kv.extend_from_slice(&ty.to_le_bytes());
        kv.extend_from_slice(value);
        self.kv = kv;
        self.kv_count += 1;
        self
    }

    fn kv_u32(self, key: &str, v: u32) -> Self {
        self.kv_raw(key.as_bytes(), 4, &v.to_le_bytes())
    }

    fn kv_str(self, key: &str, v: &str) -> Self {
        let mut b = vec![];
        self.string(&mut b, v.as_bytes());
        self.kv_raw(key.as_bytes(), 8, &b)
    }

    /// An array header (element type, count) followed by `body`.
    fn array_value(&self, elem: u32, count: u64, body: &[u8]) -> Vec<u8> {
        let mut b = elem.to_le_bytes().to_vec();
        self.len(&mut b, count);
        b.extend_from_slice(body);
        b
    }

    fn tensor_raw(mut self, name: &str, ne: &[u64], ggml_type: u32, offset: u64) -> Self {
        let mut infos = std::mem::take(&mut self.infos);
        self.string(&mut infos, name.as_bytes());
        infos.extend_from_slice(&(ne.len() as u32).to_le_bytes());
        for &d in ne {
            self.len(&mut infos, d);
        }
        infos.extend_from_slice(&ggml_type.to_le_bytes());
        infos.extend_from_slice(&offset.to_le_bytes());
        self.infos = infos;
        self.tensor_count += 1;
        self
    }

    /// Adds an f32 tensor with its data, aligned.
    fn tensor_f32(mut self, name: &str, values: &[f32]) -> Self {
        while self.data.len() % self.alignment != 0 {
            self.data.push(0);
        }
        let offset = self.data.len() as u64;
        self.data
            .extend(values.iter().flat_map(|v| v.to_le_bytes()));
        self.tensor_raw(name, &[values.len() as u64], 0, offset)
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&self.version.to_le_bytes());
        self.len(&mut b, self.tensor_count);
        self.len(&mut b, self.kv_count);
        b.extend_from_slice(&self.kv);
        b.extend_from_slice(&self.infos);
        if self.tensor_count > 0 {
            while b.len() % self.alignment != 0 {
                b.push(0);
            }
            b.extend_from_slice(&self.data);
        }
        b
    }
}

fn read(bytes: &[u8]) -> tensorsmith::Result<tensorsmith::gguf::GgufHeader> {
    parse_bytes(bytes, &OpenOptions::new())
}

/// Asserts `bytes` are rejected by the rule `pred` matches (on the tensor `tensor`, if given).
#[track_caller]
fn rejects(bytes: &[u8], pred: impl Fn(&GgufRule) -> bool, tensor: Option<&str>) {
    match read(bytes) {
        Ok(h) => panic!("accepted: {h:?}"),
        Err(e) => {
            let ErrorKind::Gguf(rule) = e.kind() else {
                panic!("not a GGUF rule: {e}")
            };
            assert!(pred(rule), "wrong rule: {e}");
            assert_eq!(e.tensor(), tensor, "{e}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Accepted

#[test]
fn versions_1_and_2_read_like_version_3() {
    for version in [1, 2, 3] {
        let g = Gguf::new(version)
            .kv_str("general.architecture", "llama")
            .kv_u32("n", 7)
            .tensor_f32("w", &[1.0, 2.0, 3.0])
            .tensor_f32("b", &[4.0]);
        let bytes = g.bytes();
        let h = read(&bytes).unwrap_or_else(|e| panic!("v{version}: {e}"));
        assert_eq!(h.version, version);
        assert_eq!(h.get("n"), Some(&Value::U32(7)));
        assert_eq!(h.tensors.len(), 2);
        let w = &h.tensors[0];
        assert_eq!((w.ne.as_slice(), w.byte_len), (&[3u64][..], 12));
        let data = &bytes[w.range.start as usize..w.range.end as usize];
        assert_eq!(
            data,
            [1f32, 2., 3.]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn empty_arrays_zero_size_tensors_and_no_tensors_are_fine() {
    let g = Gguf::new(3);
    let empty = g.array_value(5, 0, &[]);
    let g = g.kv_raw(b"empty", 9, &empty).tensor_raw("z", &[0, 4], 0, 0);
    let h = read(&g.bytes()).unwrap();
    assert_eq!(h.get("empty"), Some(&Value::Array(Array::I32(vec![]))));
    assert_eq!(h.tensors[0].byte_len, 0);

    // No tensors: the file may end right after the header, before any padding.
    let g = Gguf::new(3).kv_str("general.name", "x");
    let h = read(&g.bytes()).unwrap();
    assert!(h.tensors.is_empty());
}

/// `depth` arrays nested inside each other around one u8.
fn nested(g: &Gguf, depth: usize) -> Vec<u8> {
    let mut v = g.array_value(0, 1, &[42]);
    for _ in 1..depth {
        v = g.array_value(9, 1, &v);
    }
    v
}

#[test]
fn arrays_nest_up_to_the_limit_and_no_deeper() {
    let g = Gguf::new(3);
    let limit = OpenOptions::new().max_array_depth();
    let ok = nested(&g, limit);
    assert!(read(&Gguf::new(3).kv_raw(b"deep", 9, &ok).bytes()).is_ok());
    let deep = nested(&g, limit + 1);
    rejects(
        &Gguf::new(3).kv_raw(b"deep", 9, &deep).bytes(),
        |r| matches!(r, GgufRule::NestingTooDeep { key, .. } if key == "deep"),
        None,
    );
    // Configurable.
    let opts = OpenOptions::new().with_max_array_depth(limit + 1);
    assert!(parse_bytes(&Gguf::new(3).kv_raw(b"deep", 9, &deep).bytes(), &opts).is_ok());
}

// ---------------------------------------------------------------------------------------------
// One file per rule

#[test]
fn bad_magic() {
    let mut b = Gguf::new(3).bytes();
    b[..4].copy_from_slice(b"GGML");
    rejects(
        &b,
        |r| matches!(r, GgufRule::BadMagic(m) if m == b"GGML"),
        None,
    );
}

#[test]
fn big_endian_is_named() {
    let mut b = Gguf::new(3).bytes();
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    rejects(&b, |r| matches!(r, GgufRule::BigEndian(3)), None);
}

#[test]
fn unknown_version() {
    let mut b = Gguf::new(3).bytes();
    b[4..8].copy_from_slice(&4u32.to_le_bytes());
    rejects(&b, |r| matches!(r, GgufRule::UnsupportedVersion(4)), None);
}

#[test]
fn truncated_anywhere() {
    let full = Gguf::new(3)
        .kv_str("general.architecture", "llama")
        .tensor_f32("w", &[1.0, 2.0])
        .bytes();
    for cut in 0..full.len() {
        let e = read(&full[..cut]).expect_err("a cut file is refused");
        assert!(
            matches!(
                e.kind(),
                ErrorKind::Gguf(
                    GgufRule::Truncated { .. }
                        | GgufRule::CountPastEnd { .. }
                        | GgufRule::DataPastEnd { .. }
                )
            ),
            "cut at {cut}: {e}"
        );
    }
    // Cut inside the tensor data: the header parses, the data is out of bounds.
    rejects(
        &full[..full.len() - 1],
        |r| matches!(r, GgufRule::DataPastEnd { .. }),
        Some("w"),
    );
}

#[test]
fn counts_beyond_what_the_file_holds() {
    // A billion tensors and a billion keys in a few bytes: refused before allocating.
    let mut g = Gguf::new(3);
    g.tensor_count = 1 << 40;
    rejects(
        &g.bytes(),
        |r| matches!(r, GgufRule::CountPastEnd { .. }),
        None,
    );
    let mut g = Gguf::new(3);
    g.kv_count = u64::MAX;
    rejects(
        &g.bytes(),
        |r| matches!(r, GgufRule::CountPastEnd { .. }),
        None,
    );
    // A string array claiming 2^60 entries.
    let g = Gguf::new(3);
    let v = g.array_value(8, 1 << 60, &[]);
    rejects(
        &g.kv_raw(b"tokens", 9, &v).bytes(),
        |r| matches!(r, GgufRule::CountPastEnd { count, .. } if *count == 1 << 60),
        None,
    );
    // A string claiming 2^50 bytes.
    let g = Gguf::new(3);
    let mut v = vec![];
    g.len(&mut v, 1 << 50);
    rejects(
        &g.kv_raw(b"s", 8, &v).bytes(),
        |r| matches!(r, GgufRule::Truncated { .. }),
        None,
    );
}

#[test]
fn unknown_value_type() {
    rejects(
        &Gguf::new(3).kv_raw(b"k", 13, &[0]).bytes(),
        |r| matches!(r, GgufRule::BadValueType { key, id: 13 } if key == "k"),
        None,
    );
    let g = Gguf::new(3);
    let v = g.array_value(99, 1, &[0]);
    rejects(
        &g.kv_raw(b"a", 9, &v).bytes(),
        |r| matches!(r, GgufRule::BadValueType { id: 99, .. }),
        None,
    );
}

#[test]
fn key_not_utf8() {
    rejects(
        &Gguf::new(3).kv_raw(b"k\xff", 0, &[1]).bytes(),
        |r| matches!(r, GgufRule::NotUtf8 { .. }),
        None,
    );
}

#[test]
fn bool_other_than_0_or_1() {
    rejects(
        &Gguf::new(3).kv_raw(b"b", 7, &[2]).bytes(),
        |r| matches!(r, GgufRule::BadBool { value: 2, .. }),
        None,
    );
}

#[test]
fn duplicate_key() {
    rejects(
        &Gguf::new(3).kv_u32("k", 1).kv_u32("k", 2).bytes(),
        |r| matches!(r, GgufRule::DuplicateKey(k) if k == "k"),
        None,
    );
}

#[test]
fn duplicate_tensor() {
    rejects(
        &Gguf::new(3)
            .tensor_f32("w", &[1.0])
            .tensor_f32("w", &[2.0])
            .bytes(),
        |r| matches!(r, GgufRule::DuplicateTensor),
        Some("w"),
    );
}

#[test]
fn too_many_dimensions() {
    rejects(
        &Gguf::new(3).tensor_raw("t", &[1, 1, 1, 1, 1], 0, 0).bytes(),
        |r| matches!(r, GgufRule::TooManyDims { dims: 5, max: 4 }),
        Some("t"),
    );
}

#[test]
fn unknown_ggml_type() {
    for id in [4, 31, 42, 1000] {
        rejects(
            &Gguf::new(3).tensor_raw("t", &[32], id, 0).bytes(),
            |r| matches!(r, GgufRule::UnknownGgmlType(i) if *i == id),
            Some("t"),
        );
    }
}

#[test]
fn rows_not_whole_blocks() {
    // q4_0 (id 2) has 32-element blocks; a first dimension of 16 cannot be stored.
    rejects(
        &Gguf::new(3).tensor_raw("q", &[16, 4], 2, 0).bytes(),
        |r| {
            matches!(
                r,
                GgufRule::PartialBlock {
                    ne0: 16,
                    block: 32,
                    ..
                }
            )
        },
        Some("q"),
    );
}

#[test]
fn shape_overflow() {
    rejects(
        &Gguf::new(3)
            .tensor_raw("t", &[1 << 32, 1 << 32, 1 << 32], 0, 0)
            .bytes(),
        |r| matches!(r, GgufRule::ShapeOverflow),
        Some("t"),
    );
    // Elements fit in u64 but bytes do not.
    rejects(
        &Gguf::new(3).tensor_raw("t", &[1 << 62], 0, 0).bytes(),
        |r| matches!(r, GgufRule::ShapeOverflow),
        Some("t"),
    );
}

#[test]
fn bad_alignment() {
    for g in [
        Gguf::new(3).kv_u32("general.alignment", 48),
        Gguf::new(3).kv_u32("general.alignment", 0),
        Gguf::new(3).kv_str("general.alignment", "32"),
    ] {
        rejects(&g.bytes(), |r| matches!(r, GgufRule::BadAlignment(_)), None);
    }
}

#[test]
fn misaligned_offset_in_a_reference_written_file() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gguf/misaligned.gguf");
    let e = GgufFile::open(&path).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::Gguf(GgufRule::Misaligned {
                offset: 32,
                alignment: 64
            })
        ),
        "{e}"
    );
    assert_eq!(e.tensor(), Some("b"));
    assert!(e.to_string().contains("misaligned.gguf"), "{e}");
}

#[test]
fn data_past_the_end() {
    rejects(
        &Gguf::new(3).tensor_raw("t", &[4], 0, 1 << 20).bytes(),
        |r| matches!(r, GgufRule::DataPastEnd { .. }),
        Some("t"),
    );
    rejects(
        &Gguf::new(3).tensor_raw("t", &[4], 0, u64::MAX - 31).bytes(),
        |r| matches!(r, GgufRule::DataPastEnd { .. }),
        Some("t"),
    );
}

#[test]
fn overlapping_tensors() {
    let mut g = Gguf::new(3).tensor_f32("a", &[1.0; 16]);
    g = g.tensor_raw("b", &[8], 0, 32); // starts inside a's 64 bytes
    rejects(
        &g.bytes(),
        |r| matches!(r, GgufRule::Overlap { other, .. } if other == "a"),
        Some("b"),
    );
}
