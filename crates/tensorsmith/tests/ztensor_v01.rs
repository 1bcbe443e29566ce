//! zTensor v0.1: every vector in tests/data/ztensor/v0.1 (written by ztensor 0.1.4, or
//! synthesized as its Rust writer would), a test per reader rule, writer round trips, and
//! byte identity with the reference writer.

mod ztensor_common;

use tensorsmith::dtype::DType;
use tensorsmith::index::{Encoding, Layout, MetaValue, ZtVersion};
use tensorsmith::ztensor::{self, cbor, Compression, DigestKind, WriteOptions, Writer};
use tensorsmith::ErrorKind;
use tensorsmith::OpenOptions;
use ztensor_common::*;

#[test]
fn valid_vectors_read_as_expected() {
    assert_eq!(check_all_valid("v0.1"), 26);
}

#[test]
fn invalid_vectors_fail_with_their_rule() {
    check_all_invalid(
        "v0.1",
        &[
            ("invalid_checksum_mismatch.zt", Stage::Verify, |k| {
                matches!(k, ErrorKind::DigestMismatch { .. })
            }),
            ("invalid_misaligned.zt", Stage::Open, |k| {
                matches!(
                    k,
                    ErrorKind::ZtMisaligned {
                        offset: 72,
                        align: 64
                    }
                )
            }),
            ("invalid_size_mismatch.zt", Stage::Open, |k| {
                matches!(
                    k,
                    ErrorKind::SizeMismatch {
                        expected: 24,
                        actual: 20
                    }
                )
            }),
            (
                "layout_sparsecoo.zt",
                Stage::Open,
                |k| matches!(k, ErrorKind::ZtUnsupportedLayout(l) if l == "sparsecoo"),
            ),
            (
                "layout_sparsecsr.zt",
                Stage::Open,
                |k| matches!(k, ErrorKind::ZtUnsupportedLayout(l) if l == "sparsecsr"),
            ),
        ],
    );
}

#[test]
fn writer_matches_reference_bytes() {
    // Not compared, because they are not what a v0.1 writer produces: definite_maps.zt and
    // custom_fields.zt (hand-made variants), no_layout_field.zt and no_endianness_field.zt
    // (keys removed), big_endian.zt (this writer writes little-endian).
    let same = [
        "dtype_bfloat16.zt",
        "dtype_bool.zt",
        "dtype_float16.zt",
        "dtype_float32.zt",
        "dtype_float64.zt",
        "dtype_int16.zt",
        "dtype_int32.zt",
        "dtype_int64.zt",
        "dtype_int8.zt",
        "dtype_uint16.zt",
        "dtype_uint32.zt",
        "dtype_uint64.zt",
        "dtype_uint8.zt",
        "empty.zt",
        "multi.zt",
        "scalar.zt",
        "scalar_via_python.zt",
        "zero_size.zt",
        "zstd_float32.zt",
        "checksum_crc32c_raw.zt",
        "checksum_crc32c_zstd.zt",
    ];
    for file in same {
        let f = open("v0.1", file).unwrap();
        let digest = file.starts_with("checksum").then_some(DigestKind::Crc32c);
        let got = rewrite(&f, ZtVersion::V0_1, 3, digest, None);
        let want = std::fs::read(dir("v0.1").join(file)).unwrap();
        assert!(
            got == want,
            "{file}: output differs ({} vs {} bytes)",
            got.len(),
            want.len()
        );
    }
}

#[test]
fn the_empty_file_is_17_bytes() {
    let bytes = Writer::new(WriteOptions::new().with_version(ZtVersion::V0_1))
        .to_bytes()
        .unwrap();
    assert_eq!(bytes, b"ZTEN0001\x80\x01\0\0\0\0\0\0\0");
    assert!(ztensor::parse_bytes(&bytes, &OpenOptions::new())
        .unwrap()
        .index
        .tensors
        .is_empty());
}

#[test]
fn big_endian_data_is_swapped_on_read() {
    let f = open("v0.1", "big_endian.zt").unwrap();
    let p = &f.info("be_i16").unwrap().parts[0];
    assert!(p.big_endian && !p.is_zero_copy());
    assert_eq!(
        &f.stored_bytes("be_i16", "data").unwrap()[..],
        &[0, 0, 0, 1, 0xff, 0xff, 0x80, 0]
    );
    assert_eq!(
        &f.tensor_bytes("be_i16").unwrap()[..],
        &[0, 0, 1, 0, 0xff, 0xff, 0, 0x80]
    );
}

#[test]
fn missing_layout_means_dense() {
    let f = open("v0.1", "no_layout_field.zt").unwrap();
    assert_eq!(f.index().tensors[0].layout, Layout::Dense);
}

const V01_DTYPES: [DType; 13] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::I16,
    DType::I8,
    DType::U64,
    DType::U32,
    DType::U16,
    DType::U8,
    DType::BOOL,
];

#[test]
fn round_trips_every_dtype_raw_and_zstd_with_each_checksum() {
    for digest in [None, Some(DigestKind::Crc32c), Some(DigestKind::Sha256)] {
        for compression in [Compression::None, Compression::Zstd { level: 3 }] {
            let mut w = Writer::new(
                WriteOptions::new()
                    .with_version(ZtVersion::V0_1)
                    .with_compression(compression)
                    .with_digest(digest),
            );
            for d in V01_DTYPES {
                w.add_dense(&format!("{d}"), d, &[3, 5], sample(d, 15))
                    .unwrap();
                w.add_dense(&format!("{d}_scalar"), d, &[], sample(d, 1))
                    .unwrap();
                w.add_dense(&format!("{d}_empty"), d, &[0, 2], Vec::new())
                    .unwrap();
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("rt.zt");
            w.write_file(&path).unwrap();
            let f = ztensor::open(&path, &OpenOptions::new()).unwrap();
            assert_eq!(f.version(), ZtVersion::V0_1);
            for d in V01_DTYPES {
                let t = f.info(&format!("{d}")).unwrap();
                assert_eq!(t.dtype, d);
                let want = if compression == Compression::None {
                    Encoding::Raw
                } else {
                    Encoding::Zstd
                };
                assert_eq!(t.parts[0].encoding, want);
                assert_eq!(
                    &f.tensor_bytes(&format!("{d}")).unwrap()[..],
                    &sample(d, 15)[..]
                );
                assert_eq!(
                    &f.tensor_bytes(&format!("{d}_scalar")).unwrap()[..],
                    &sample(d, 1)[..]
                );
            }
            let r = f.verify();
            assert!(r.is_ok(), "{:?}", r.failures);
        }
    }
}

#[test]
fn writer_refuses_what_v01_cannot_hold() {
    let mut w = Writer::new(WriteOptions::new().with_version(ZtVersion::V0_1));
    assert!(matches!(
        w.add_dense("c", DType::C64, &[1], vec![0u8; 8])
            .err()
            .unwrap()
            .kind(),
        ErrorKind::UnsupportedDtype(_)
    ));
    let e = w
        .add_sparse_coo(
            "s",
            &[2],
            (DType::F32, vec![0u8; 4].into()),
            (DType::U64, vec![0u8; 8].into()),
        )
        .err()
        .unwrap();
    assert!(matches!(e.kind(), ErrorKind::ZtUnsupportedOption { .. }));
    let attrs = meta_map(&[("a", MetaValue::UInt(1))]);
    assert!(w.set_attributes(attrs).is_err());
}

// --- one crafted file per reader rule -------------------------------------------------------

/// Appends one encoded CBOR value.
type Enc = Box<dyn Fn(&mut Vec<u8>)>;

fn build(blob: &[u8], entries: &[Vec<(&str, Enc)>]) -> Vec<u8> {
    let mut out = b"ZTEN0001".to_vec();
    out.resize(64, 0);
    out.extend_from_slice(blob);
    let mut m = Vec::new();
    cbor::head(&mut m, 4, entries.len() as u64);
    for e in entries {
        cbor::head(&mut m, 5, e.len() as u64);
        for (k, v) in e {
            cbor::text(&mut m, k);
            v(&mut m);
        }
    }
    out.extend_from_slice(&m);
    out.extend_from_slice(&(m.len() as u64).to_le_bytes());
    out
}

fn s(v: &'static str) -> Enc {
    Box::new(move |o: &mut Vec<u8>| cbor::text(o, v))
}

fn u(v: u64) -> Enc {
    Box::new(move |o: &mut Vec<u8>| cbor::uint(o, v))
}

fn shape(v: &'static [u64]) -> Enc {
    Box::new(move |o: &mut Vec<u8>| cbor::u64_array(o, v))
}

fn entry(name: &'static str, offset: u64, size: u64) -> Vec<(&'static str, Enc)> {
    vec![
        ("name", s(name)),
        ("offset", u(offset)),
        ("size", u(size)),
        ("dtype", s("uint8")),
        ("shape", shape(&[4])),
        ("encoding", s("raw")),
    ]
}

fn err(bytes: &[u8]) -> tensorsmith::Error {
    ztensor::parse_bytes(bytes, &OpenOptions::new()).expect_err("accepted")
}

#[test]
fn accepts_a_crafted_minimal_file() {
    assert!(
        ztensor::parse_bytes(&build(b"abcd", &[entry("t", 64, 4)]), &OpenOptions::new()).is_ok()
    );
}

#[test]
fn rejects_duplicate_names() {
    assert!(matches!(
        err(&build(b"abcd", &[entry("t", 64, 4), entry("t", 64, 4)])).kind(),
        ErrorKind::DuplicateKey
    ));
}

#[test]
fn rejects_overlapping_tensors() {
    let mut a = entry("a", 64, 4);
    a[4] = ("shape", shape(&[2]));
    a[2] = ("size", u(2));
    let mut b = entry("b", 64, 4);
    b[1] = ("offset", u(64));
    assert!(matches!(
        err(&build(b"abcd", &[a, b])).kind(),
        ErrorKind::ZtOverlap { .. }
    ));
}

#[test]
fn rejects_data_past_the_metadata() {
    assert!(matches!(
        err(&build(b"ab", &[entry("t", 64, 4)])).kind(),
        ErrorKind::ZtBlobOutOfBounds { .. }
    ));
}

#[test]
fn rejects_unknown_dtype_encoding_endianness() {
    let mut e = entry("t", 64, 4);
    e[3] = ("dtype", s("f32"));
    assert!(matches!(
        err(&build(b"abcd", &[e])).kind(),
        ErrorKind::UnknownDtype(_)
    ));
    let mut e = entry("t", 64, 4);
    e[5] = ("encoding", s("lz4"));
    assert!(matches!(
        err(&build(b"abcd", &[e])).kind(),
        ErrorKind::ZtUnknownEncoding(_)
    ));
    let mut e = entry("t", 64, 4);
    e.push(("data_endianness", s("middle")));
    assert!(matches!(
        err(&build(b"abcd", &[e])).kind(),
        ErrorKind::ZtSchema(_)
    ));
}

#[test]
fn rejects_missing_required_keys() {
    let mut e = entry("t", 64, 4);
    let _ = e.remove(5);
    assert!(matches!(
        err(&build(b"abcd", &[e])).kind(),
        ErrorKind::ZtSchema(_)
    ));
}

#[test]
fn rejects_short_files_and_oversized_metadata() {
    assert!(matches!(
        err(b"ZTEN0001\x80\x01\0\0\0\0\0\0").kind(),
        ErrorKind::ZtTooSmall { .. }
    ));
    let mut b = b"ZTEN0001\x80".to_vec();
    b.extend_from_slice(&100u64.to_le_bytes());
    assert!(matches!(
        err(&b).kind(),
        ErrorKind::ZtManifestOutOfBounds { .. }
    ));
    let bytes = build(b"abcd", &[entry("t", 64, 4)]);
    let e = ztensor::parse_bytes(&bytes, &OpenOptions::new().with_max_manifest_len(8)).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ZtManifestTooLarge { .. }));
    assert!(matches!(err(b"ZTEN0002").kind(), ErrorKind::ZtUnknownMagic));
}
