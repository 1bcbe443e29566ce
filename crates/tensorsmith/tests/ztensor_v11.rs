//! zTensor v1.1: every vector in tests/data/ztensor/v1.1 (written by ztensor 1.1.1, or
//! synthesized as its Rust writer would), a test per reader rule, writer round trips, and
//! byte identity with the reference writer.

mod ztensor_common;

use std::borrow::Cow;
use tensorsmith::codec;
use tensorsmith::dtype::DType;
use tensorsmith::index::{Encoding, Layout, MetaValue, ZtVersion};
use tensorsmith::ztensor::{
    self, cbor, digest, Compression, DigestKind, PartData, WriteOptions, Writer,
};
use tensorsmith::ErrorKind;
use tensorsmith::OpenOptions;
use ztensor_common::*;

#[test]
fn valid_vectors_read_as_expected() {
    assert_eq!(check_all_valid("v1.1"), 34);
}

#[test]
fn invalid_vectors_fail_with_their_rule() {
    check_all_invalid(
        "v1.1",
        &[
            ("invalid_digest_mismatch.zt", Stage::Verify, |k| {
                matches!(k, ErrorKind::DigestMismatch { .. })
            }),
            ("invalid_footer_magic.zt", Stage::Open, |k| {
                matches!(k, ErrorKind::ZtFooterMagic { .. })
            }),
            ("invalid_manifest_size.zt", Stage::Open, |k| {
                matches!(k, ErrorKind::ZtManifestTooLarge { .. })
            }),
            ("invalid_misaligned.zt", Stage::Open, |k| {
                matches!(
                    k,
                    ErrorKind::ZtMisaligned {
                        offset: 68,
                        align: 64
                    }
                )
            }),
            // The reference accepts this one.
            ("invalid_overlap.zt", Stage::Open, |k| {
                matches!(k, ErrorKind::ZtOverlap { .. })
            }),
            ("invalid_raw_length.zt", Stage::Open, |k| {
                matches!(
                    k,
                    ErrorKind::SizeMismatch {
                        expected: 24,
                        actual: 20
                    }
                )
            }),
            ("invalid_truncated.zt", Stage::Open, |k| {
                matches!(k, ErrorKind::ZtFooterMagic { .. })
            }),
            // The reference zero-fills this one.
            ("invalid_zstd_short.zt", Stage::Read, |k| {
                matches!(k, ErrorKind::ZtDecodedLength { expected: 1024, .. })
            }),
        ],
    );
}

fn rewrite_file(file: &str, level: i32, digest: Option<DigestKind>) -> (Vec<u8>, Vec<u8>) {
    let f = open("v1.1", file).unwrap();
    let got = rewrite(&f, ZtVersion::V1_1, level, digest, None);
    (got, std::fs::read(dir("v1.1").join(file)).unwrap())
}

#[test]
fn writer_matches_reference_bytes() {
    // Not compared: attributes.zt (its object attributes were synthesized in insertion
    // order; the reference keeps attributes in a BTreeMap, as this writer orders them) and
    // v12_fields.zt (written the 1.2 way: version 1.2.0, `type`, `uncompressed_length`).
    let mut cases: Vec<(String, i32, Option<DigestKind>)> = Vec::new();
    for d in [
        "bf16", "bool", "f16", "f32", "f64", "i16", "i32", "i64", "i8", "u16", "u32", "u64", "u8",
    ] {
        cases.push((format!("dtype_{d}.zt"), 3, None));
    }
    for (f, l) in [
        ("zstd_level1.zt", 1),
        ("zstd_level3.zt", 3),
        ("zstd_level19.zt", 19),
    ] {
        cases.push((f.into(), l, None));
    }
    for f in [
        "zstd_dtypes.zt",
        "zero_size.zt",
        "scalar.zt",
        "empty.zt",
        "sparse_csr.zt",
        "sparse_coo.zt",
        "multi.zt",
        "quantized_group.zt",
        "spec_dtype_complex64.zt",
        "spec_dtype_complex128.zt",
        "spec_dtype_f8_e4m3.zt",
        "spec_dtype_f8_e5m2.zt",
    ] {
        cases.push((f.into(), 3, None));
    }
    cases.push(("digest_crc32c_raw.zt".into(), 3, Some(DigestKind::Crc32c)));
    cases.push(("digest_crc32c_zstd.zt".into(), 3, Some(DigestKind::Crc32c)));
    cases.push(("digest_sha256_raw.zt".into(), 3, Some(DigestKind::Sha256)));
    cases.push(("digest_sha256_zstd.zt".into(), 3, Some(DigestKind::Sha256)));
    for (file, level, digest) in cases {
        let (got, want) = rewrite_file(&file, level, digest);
        assert!(
            got == want,
            "{file}: output differs from the reference ({} vs {} bytes)",
            got.len(),
            want.len()
        );
    }
}

const V11_DTYPES: [DType; 17] = [
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
    DType::F8_E4M3,
    DType::F8_E5M2,
    DType::C64,
    DType::C128,
];

#[test]
fn round_trips_every_dtype_raw_and_zstd_with_each_digest() {
    for digest in [None, Some(DigestKind::Crc32c), Some(DigestKind::Sha256)] {
        for compression in [Compression::None, Compression::Zstd { level: 3 }] {
            let mut w = Writer::new(
                WriteOptions::new()
                    .with_version(ZtVersion::V1_1)
                    .with_compression(compression)
                    .with_digest(digest),
            );
            for d in V11_DTYPES {
                w.add_dense(&format!("{d}"), d, &[3, 5], sample(d, 15))
                    .unwrap();
                w.add_dense(&format!("{d}_scalar"), d, &[], sample(d, 1))
                    .unwrap();
                w.add_dense(&format!("{d}_empty"), d, &[0, 4], Vec::new())
                    .unwrap();
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("rt.zt");
            w.write_file(&path).unwrap();
            let f = ztensor::open(&path, &OpenOptions::new()).unwrap();
            assert_eq!(f.version(), ZtVersion::V1_1);
            assert_eq!(f.index().tensors.len(), V11_DTYPES.len() * 3);
            for d in V11_DTYPES {
                let t = f.info(&format!("{d}")).unwrap();
                assert_eq!(t.dtype, d);
                assert_eq!(t.shape.as_slice(), &[3, 5]);
                let want_enc = if compression == Compression::None {
                    Encoding::Raw
                } else {
                    Encoding::Zstd
                };
                assert_eq!(t.parts[0].encoding, want_enc);
                assert_eq!(
                    &f.tensor_bytes(&format!("{d}")).unwrap()[..],
                    &sample(d, 15)[..]
                );
                assert_eq!(
                    &f.tensor_bytes(&format!("{d}_scalar")).unwrap()[..],
                    &sample(d, 1)[..]
                );
                assert!(f.tensor_bytes(&format!("{d}_empty")).unwrap().is_empty());
            }
            let report = f.verify();
            assert!(report.is_ok(), "{:?}", report.failures);
            let expect_checked = if digest.is_some() {
                V11_DTYPES.len() as u64 * 3
            } else {
                0
            };
            assert_eq!(report.checked, expect_checked);
        }
    }
}

type Component<'a> = (DType, Cow<'a, [u8]>);

fn csr_parts<'a>() -> (Component<'a>, Component<'a>, Component<'a>) {
    let values: Vec<u8> = [1.5f32, -2.0, 3.25, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let indices: Vec<u8> = [0u64, 2, 1, 3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let indptr: Vec<u8> = [0u64, 2, 2, 4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    (
        (DType::F32, values.into()),
        (DType::U64, indices.into()),
        (DType::U64, indptr.into()),
    )
}

#[test]
fn round_trips_sparse_and_quantized_raw_and_zstd() {
    for compression in [Compression::None, Compression::Zstd { level: 3 }] {
        let mut w = Writer::new(
            WriteOptions::new()
                .with_version(ZtVersion::V1_1)
                .with_compression(compression),
        );
        let (v, i, p) = csr_parts();
        w.add_sparse_csr("csr", [3, 4], v.clone(), i, p).unwrap();
        let coords: Vec<u8> = [0u64, 0, 2, 2, 0, 2, 1, 3]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        w.add_sparse_coo("coo", &[3, 4], v, (DType::U64, coords.into()))
            .unwrap();
        let attrs = meta_map(&[
            ("bits", MetaValue::UInt(4)),
            ("group_size", MetaValue::UInt(8)),
            ("packing", MetaValue::Str("8_per_i32".into())),
        ]);
        w.add_object(
            "q",
            &[2, 16],
            Layout::QuantizedGroup,
            attrs.clone(),
            vec![
                PartData::new("packed_weight", DType::I32, sample(DType::I32, 4)),
                PartData::new("scales", DType::F16, sample(DType::F16, 4)),
                PartData::new("zeros", DType::F16, sample(DType::F16, 4)),
            ],
        )
        .unwrap();
        let bytes = w.to_bytes().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.zt");
        std::fs::write(&path, &bytes).unwrap();
        let f = ztensor::open(&path, &OpenOptions::new()).unwrap();
        assert_eq!(f.info("csr").unwrap().layout, Layout::SparseCsr);
        assert_eq!(f.info("coo").unwrap().layout, Layout::SparseCoo);
        let q = f.info("q").unwrap();
        assert_eq!(q.layout, Layout::QuantizedGroup);
        assert_eq!(*q.attributes, attrs);
        let (v, i, p) = csr_parts();
        assert_eq!(f.part_bytes("csr", "values").unwrap(), v.1);
        assert_eq!(f.part_bytes("csr", "indices").unwrap(), i.1);
        assert_eq!(f.part_bytes("csr", "indptr").unwrap(), p.1);
        assert_eq!(
            &f.part_bytes("q", "zeros").unwrap()[..],
            &sample(DType::F16, 4)[..]
        );
        assert!(f.verify().is_ok());
    }
}

#[test]
fn writer_rejects_what_readers_would() {
    let mut w = Writer::new(WriteOptions::new().with_version(ZtVersion::V1_1));
    let e = w
        .add_dense("t", DType::F32, &[2, 3], vec![0u8; 20])
        .err()
        .unwrap();
    assert!(matches!(
        e.kind(),
        ErrorKind::WrongDataLength {
            expected: 24,
            actual: 20
        }
    ));
    w.add_dense("t", DType::F32, &[1], vec![0u8; 4]).unwrap();
    assert!(matches!(
        w.add_dense("t", DType::F32, &[1], vec![0u8; 4])
            .err()
            .unwrap()
            .kind(),
        ErrorKind::DuplicateKey
    ));
    assert!(matches!(
        w.add_dense("fnuz", DType::F8_E4M3FNUZ, &[1], vec![0u8; 1])
            .err()
            .unwrap()
            .kind(),
        ErrorKind::UnsupportedDtype(_)
    ));
    let (v, i, _) = csr_parts();
    let bad_indptr = (DType::U64, Cow::Owned(vec![0u8; 8]));
    assert!(matches!(
        w.add_sparse_csr("m", [3, 4], v, i, bad_indptr)
            .err()
            .unwrap()
            .kind(),
        ErrorKind::SizeMismatch { .. }
    ));
    let w = Writer::new(
        WriteOptions::new()
            .with_version(ZtVersion::V1_1)
            .with_digest(Some(DigestKind::Xxh3)),
    );
    assert!(matches!(
        w.to_bytes().err().unwrap().kind(),
        ErrorKind::ZtUnsupportedOption { .. }
    ));
    let mut w = Writer::new(
        WriteOptions::new()
            .with_version(ZtVersion::V1_1)
            .with_compression(Compression::Zstd { level: 0 }),
    );
    assert!(w.add_dense("t", DType::U8, &[1], vec![1u8]).is_err());
}

// --- one crafted file per reader rule -------------------------------------------------------

/// A v1.1 file: blobs at the given offsets (zero-padded), then `manifest`.
fn build(blobs: &[(u64, &[u8])], manifest: &[u8]) -> Vec<u8> {
    let mut out = b"ZTEN1000".to_vec();
    for (off, b) in blobs {
        out.resize(*off as usize, 0);
        out.extend_from_slice(b);
    }
    out.extend_from_slice(manifest);
    out.extend_from_slice(&(manifest.len() as u64).to_le_bytes());
    out.extend_from_slice(b"ZTEN1000");
    out
}

/// A manifest with one object `t` of one component `data`, given as (key, encoder) pairs.
type Field<'a> = (&'a str, &'a dyn Fn(&mut Vec<u8>));

fn manifest(shape: &[u64], format: &str, comp: &[Field<'_>]) -> Vec<u8> {
    let mut m = Vec::new();
    cbor::head(&mut m, 5, 2);
    cbor::text(&mut m, "version");
    cbor::text(&mut m, "1.1.0");
    cbor::text(&mut m, "objects");
    cbor::head(&mut m, 5, 1);
    cbor::text(&mut m, "t");
    cbor::head(&mut m, 5, 3);
    cbor::text(&mut m, "shape");
    cbor::u64_array(&mut m, shape);
    cbor::text(&mut m, "format");
    cbor::text(&mut m, format);
    cbor::text(&mut m, "components");
    cbor::head(&mut m, 5, 1);
    cbor::text(&mut m, "data");
    cbor::head(&mut m, 5, comp.len() as u64);
    for (k, v) in comp {
        cbor::text(&mut m, k);
        v(&mut m);
    }
    m
}

fn parse(bytes: &[u8]) -> tensorsmith::Result<ztensor::Parsed> {
    ztensor::parse_bytes(bytes, &OpenOptions::new())
}

fn kind(bytes: &[u8]) -> ErrorKind {
    match parse(bytes) {
        Ok(_) => panic!("accepted"),
        Err(e) => {
            let s = e.to_string();
            assert!(!s.is_empty());
            clone_kind(e.kind())
        }
    }
}

/// ErrorKind is not Clone (it holds io::Error); tests only need to match, so rebuild the
/// variants they look at.
fn clone_kind(k: &ErrorKind) -> ErrorKind {
    match k {
        ErrorKind::ZtBlobOutOfBounds { offset, len, limit } => ErrorKind::ZtBlobOutOfBounds {
            offset: *offset,
            len: *len,
            limit: *limit,
        },
        ErrorKind::ZtUnknownEncoding(s) => ErrorKind::ZtUnknownEncoding(s.clone()),
        ErrorKind::UnknownDtype(s) => ErrorKind::UnknownDtype(s.clone()),
        ErrorKind::ZtSchema(s) => ErrorKind::ZtSchema(s.clone()),
        ErrorKind::ZtManifestOutOfBounds {
            offset,
            len,
            file_len,
        } => ErrorKind::ZtManifestOutOfBounds {
            offset: *offset,
            len: *len,
            file_len: *file_len,
        },
        ErrorKind::ZtBlobInHeader { offset, min } => ErrorKind::ZtBlobInHeader {
            offset: *offset,
            min: *min,
        },
        ErrorKind::Cbor { msg, offset } => ErrorKind::Cbor {
            msg: msg.clone(),
            offset: *offset,
        },
        ErrorKind::SizeMismatch { expected, actual } => ErrorKind::SizeMismatch {
            expected: *expected,
            actual: *actual,
        },
        ErrorKind::ZtTooSmall { version, len, min } => ErrorKind::ZtTooSmall {
            version,
            len: *len,
            min: *min,
        },
        ErrorKind::ZtLayoutRule { layout, rule } => ErrorKind::ZtLayoutRule {
            layout: layout.clone(),
            rule: rule.clone(),
        },
        ErrorKind::ZtBadDigest(s) => ErrorKind::ZtBadDigest(s.clone()),
        other => ErrorKind::ZtSchema(format!("unexpected: {other}")),
    }
}

fn u(v: u64) -> impl Fn(&mut Vec<u8>) {
    move |m: &mut Vec<u8>| cbor::uint(m, v)
}

fn s(v: &'static str) -> impl Fn(&mut Vec<u8>) {
    move |m: &mut Vec<u8>| cbor::text(m, v)
}

#[test]
fn accepts_a_crafted_minimal_file() {
    let m = manifest(
        &[4],
        "dense",
        &[("dtype", &s("u8")), ("offset", &u(64)), ("length", &u(4))],
    );
    let p = parse(&build(&[(64, b"abcd")], &m)).unwrap();
    assert_eq!(p.index.tensors[0].parts[0].range, 64..68);
}

#[test]
fn rejects_blob_running_into_the_manifest() {
    let m = manifest(
        &[8],
        "dense",
        &[("dtype", &s("u8")), ("offset", &u(64)), ("length", &u(8))],
    );
    assert!(matches!(
        kind(&build(&[(64, b"abcd")], &m)),
        ErrorKind::ZtBlobOutOfBounds { .. }
    ));
}

#[test]
fn rejects_blob_inside_the_magic() {
    let m = manifest(
        &[4],
        "dense",
        &[("dtype", &s("u8")), ("offset", &u(0)), ("length", &u(4))],
    );
    assert!(matches!(
        kind(&build(&[(64, b"abcd")], &m)),
        ErrorKind::ZtBlobInHeader { .. }
    ));
}

#[test]
fn rejects_unknown_encoding_and_dtype() {
    let m = manifest(
        &[4],
        "dense",
        &[
            ("dtype", &s("u8")),
            ("offset", &u(64)),
            ("length", &u(4)),
            ("encoding", &s("lz4")),
        ],
    );
    assert!(matches!(
        kind(&build(&[(64, b"abcd")], &m)),
        ErrorKind::ZtUnknownEncoding(_)
    ));
    let m = manifest(
        &[4],
        "dense",
        &[
            ("dtype", &s("float32")),
            ("offset", &u(64)),
            ("length", &u(4)),
        ],
    );
    assert!(matches!(
        kind(&build(&[(64, b"abcd")], &m)),
        ErrorKind::UnknownDtype(_)
    ));
}

#[test]
fn rejects_missing_fields_and_malformed_digests() {
    let m = manifest(&[4], "dense", &[("dtype", &s("u8")), ("offset", &u(64))]);
    assert!(matches!(
        kind(&build(&[(64, b"abcd")], &m)),
        ErrorKind::ZtSchema(_)
    ));
    let m = manifest(
        &[4],
        "dense",
        &[
            ("dtype", &s("u8")),
            ("offset", &u(64)),
            ("length", &u(4)),
            ("digest", &s("crc32c:0xNOPE")),
        ],
    );
    assert!(matches!(
        kind(&build(&[(64, b"abcd")], &m)),
        ErrorKind::ZtBadDigest(_)
    ));
    // An unknown algorithm is ignored, as the reference does.
    let m = manifest(
        &[4],
        "dense",
        &[
            ("dtype", &s("u8")),
            ("offset", &u(64)),
            ("length", &u(4)),
            ("digest", &s("md5:00")),
        ],
    );
    assert!(
        parse(&build(&[(64, b"abcd")], &m)).unwrap().index.tensors[0].parts[0]
            .digest()
            .is_none()
    );
}

#[test]
fn rejects_zstd_data_longer_than_the_shape() {
    let z = codec::compress_frame(&[7u8; 100], 3, false).unwrap();
    let m = manifest(
        &[99],
        "dense",
        &[
            ("dtype", &s("u8")),
            ("offset", &u(64)),
            ("length", &u(z.len() as u64)),
            ("encoding", &s("zstd")),
        ],
    );
    let bytes = build(&[(64, &z)], &m);
    let p = parse(&bytes).unwrap();
    let e = ztensor::decode_part(&&bytes[..], &p.index.tensors[0].parts[0], false).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::ZtDecodedLength { expected: 99, .. }),
        "{e}"
    );
}

#[test]
fn rejects_uncompressed_length_that_contradicts_raw_length() {
    let m = manifest(
        &[4],
        "dense",
        &[
            ("dtype", &s("u8")),
            ("offset", &u(64)),
            ("length", &u(4)),
            ("uncompressed_length", &u(5)),
        ],
    );
    assert!(matches!(
        kind(&build(&[(64, b"abcd")], &m)),
        ErrorKind::SizeMismatch { .. }
    ));
}

#[test]
fn rejects_logical_type_on_the_wrong_dtype() {
    let m = manifest(
        &[1],
        "dense",
        &[
            ("dtype", &s("u16")),
            ("type", &s("f8_e4m3fn")),
            ("offset", &u(64)),
            ("length", &u(2)),
        ],
    );
    assert!(matches!(
        kind(&build(&[(64, b"ab")], &m)),
        ErrorKind::ZtSchema(_)
    ));
}

#[test]
fn rejects_manifest_over_the_configured_limit() {
    let bytes = std::fs::read(dir("v1.1").join("dtype_f32.zt")).unwrap();
    let opts = OpenOptions::new().with_max_manifest_len(16);
    let e = ztensor::parse_bytes(&bytes, &opts).unwrap_err();
    assert!(matches!(
        e.kind(),
        ErrorKind::ZtManifestTooLarge { limit: 16, .. }
    ));
}

#[test]
fn rejects_manifest_size_past_the_start() {
    let mut bytes = std::fs::read(dir("v1.1").join("empty.zt")).unwrap();
    let n = bytes.len();
    bytes[n - 16..n - 8].copy_from_slice(&(n as u64).to_le_bytes());
    assert!(matches!(
        kind(&bytes),
        ErrorKind::ZtManifestOutOfBounds { .. }
    ));
    assert!(matches!(
        kind(b"ZTEN1000ZTEN1000"),
        ErrorKind::ZtTooSmall { .. }
    ));
}

#[test]
fn rejects_duplicate_object_names() {
    let mut m = Vec::new();
    cbor::head(&mut m, 5, 2);
    cbor::text(&mut m, "version");
    cbor::text(&mut m, "1.1.0");
    cbor::text(&mut m, "objects");
    cbor::head(&mut m, 5, 2);
    for _ in 0..2 {
        cbor::text(&mut m, "t");
        cbor::head(&mut m, 5, 0);
    }
    assert!(matches!(kind(&build(&[], &m)), ErrorKind::Cbor { .. }));
}

#[test]
fn rejects_sparse_sizes_that_do_not_fit_the_shape() {
    let mut w = Writer::new(WriteOptions::new().with_version(ZtVersion::V1_1));
    let (v, i, p) = csr_parts();
    w.add_sparse_csr("m", [3, 4], v, i, p).unwrap();
    let good = w.to_bytes().unwrap();
    assert!(parse(&good).is_ok());
    // Change the shape to 2 rows: indptr (4 entries) no longer fits.
    let mut bad = good.clone();
    let at = bad.windows(8).position(|w| w == b"eshape\x82\x03").unwrap() + 7;
    bad[at] = 0x02;
    assert!(matches!(
        kind(&bad),
        ErrorKind::SizeMismatch { .. } | ErrorKind::ZtLayoutRule { .. }
    ));
}

/// A CSR object whose components are (role, dtype, offset, length, zstd).
fn csr_manifest(comps: &[(&str, &str, u64, u64, bool)]) -> Vec<u8> {
    let mut m = Vec::new();
    cbor::head(&mut m, 5, 2);
    cbor::text(&mut m, "version");
    cbor::text(&mut m, "1.1.0");
    cbor::text(&mut m, "objects");
    cbor::head(&mut m, 5, 1);
    cbor::text(&mut m, "m");
    cbor::head(&mut m, 5, 3);
    cbor::text(&mut m, "shape");
    cbor::u64_array(&mut m, &[3, 4]);
    cbor::text(&mut m, "format");
    cbor::text(&mut m, "sparse_csr");
    cbor::text(&mut m, "components");
    cbor::head(&mut m, 5, comps.len() as u64);
    for (role, dtype, off, len, zstd) in comps {
        cbor::text(&mut m, role);
        cbor::head(&mut m, 5, 3 + u64::from(*zstd));
        cbor::text(&mut m, "dtype");
        cbor::text(&mut m, dtype);
        cbor::text(&mut m, "offset");
        cbor::uint(&mut m, *off);
        cbor::text(&mut m, "length");
        cbor::uint(&mut m, *len);
        if *zstd {
            cbor::text(&mut m, "encoding");
            cbor::text(&mut m, "zstd");
        }
    }
    m
}

#[test]
fn sizes_zstd_sparse_parts_from_their_layout_or_refuses() {
    let (v, i, p) = csr_parts();
    let zv = codec::compress_frame(&v.1, 3, false).unwrap();
    let zp = codec::compress_frame(&p.1, 3, false).unwrap();
    // values and indptr compressed without a size: nnz comes from the raw indices, indptr
    // from the rows.
    let m = csr_manifest(&[
        ("indices", "u64", 128, 32, false),
        ("indptr", "u64", 192, zp.len() as u64, true),
        ("values", "f32", 64, zv.len() as u64, true),
    ]);
    let bytes = build(&[(64, &zv), (128, &i.1), (192, &zp)], &m);
    let parsed = parse(&bytes).unwrap();
    let t = &parsed.index.tensors[0];
    assert_eq!(t.part("values").unwrap().decoded_len, 16);
    assert_eq!(t.part("indptr").unwrap().decoded_len, 32);
    assert_eq!(
        ztensor::decode_part(&&bytes[..], t.part("values").unwrap(), true).unwrap(),
        v.1
    );
    // indices compressed too: nnz cannot be derived, and the file is refused, not guessed.
    let zi = codec::compress_frame(&i.1, 3, false).unwrap();
    let m = csr_manifest(&[
        ("indices", "u64", 128, zi.len() as u64, true),
        ("indptr", "u64", 192, zp.len() as u64, true),
        ("values", "f32", 64, zv.len() as u64, true),
    ]);
    let bytes = build(&[(64, &zv), (128, &zi), (192, &zp)], &m);
    assert!(matches!(kind(&bytes), ErrorKind::ZtSchema(_)));
}

#[test]
fn zstd_levels_1_to_22_are_accepted_and_others_refused() {
    for level in [1, 22] {
        let mut w = Writer::new(
            WriteOptions::new()
                .with_version(ZtVersion::V1_1)
                .with_compression(Compression::Zstd { level }),
        );
        w.add_dense("t", DType::U8, &[3], vec![1u8, 2, 3]).unwrap();
        assert!(parse(&w.to_bytes().unwrap()).is_ok());
    }
    let w = Writer::new(
        WriteOptions::new()
            .with_version(ZtVersion::V1_1)
            .with_compression(Compression::Zstd { level: 23 }),
    );
    assert!(w.to_bytes().is_err());
}

#[test]
fn reads_v12_type_and_uncompressed_length() {
    let f = open("v1.1", "v12_fields.zt").unwrap();
    assert_eq!(f.manifest_version(), Some("1.2.0"));
    assert_eq!(f.info("f8").unwrap().dtype, DType::F8_E4M3);
    assert_eq!(f.info("t").unwrap().parts[0].decoded_len, 256);
}

#[test]
fn raw_dense_reads_are_zero_copy_on_a_map() {
    let f = open("v1.1", "dtype_f32.zt").unwrap();
    assert!(matches!(f.tensor_bytes("t").unwrap(), Cow::Borrowed(_)));
    let f = open("v1.1", "zstd_level3.zt").unwrap();
    assert!(matches!(f.tensor_bytes("t").unwrap(), Cow::Owned(_)));
    assert_eq!(
        digest::format(&tensorsmith::digest::compute(DigestKind::Crc32c, b"")),
        "crc32c:0x00000000"
    );
}

/// 1.1.1 reads every sparse index part as u64 whatever its declared dtype: narrower index
/// parts are widened when writing v1.1 (and left as they are for v2).
#[test]
fn v11_sparse_index_parts_are_widened_to_u64() {
    let values: Vec<u8> = [1.0f32, 2.0, 3.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let le = |xs: &[u32]| -> Vec<u8> { xs.iter().flat_map(|v| v.to_le_bytes()).collect() };
    let u64s = |xs: &[u64]| -> Vec<u8> { xs.iter().flat_map(|v| v.to_le_bytes()).collect() };
    for version in [ZtVersion::V1_1, ZtVersion::V2] {
        // v2 allows only u32 and u64 indices; v1.1 any integer type.
        let v11 = version == ZtVersion::V1_1;
        let (indptr_dtype, indptr) = if v11 {
            (DType::U16, vec![0, 0, 2, 0, 3, 0])
        } else {
            (DType::U32, le(&[0, 2, 3]))
        };
        let coords_dtype = if v11 { DType::I32 } else { DType::U32 };
        let mut w = Writer::new(WriteOptions::new().with_version(version));
        w.add_sparse_csr(
            "csr",
            [2, 3],
            (DType::F32, values.clone().into()),
            (DType::U32, le(&[0, 2, 1]).into()),
            (indptr_dtype, indptr.into()),
        )
        .unwrap();
        w.add_sparse_coo(
            "coo",
            &[2, 3],
            (DType::F32, values.clone().into()),
            (coords_dtype, le(&[0, 0, 1, 0, 2, 1]).into()),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.zt");
        std::fs::write(&path, w.to_bytes().unwrap()).unwrap();
        let f = ztensor::open(&path, &OpenOptions::new()).unwrap();
        let dtype = |name: &str, role: &str| {
            let t = f.info(name).unwrap();
            t.parts.iter().find(|p| p.role == role).unwrap().dtype
        };
        if v11 {
            for (name, role) in [("csr", "indices"), ("csr", "indptr"), ("coo", "coords")] {
                assert_eq!(dtype(name, role), DType::U64, "{name}/{role}");
            }
            assert_eq!(dtype("csr", "values"), DType::F32);
            assert_eq!(&*f.part_bytes("csr", "indices").unwrap(), u64s(&[0, 2, 1]));
            assert_eq!(&*f.part_bytes("csr", "indptr").unwrap(), u64s(&[0, 2, 3]));
            assert_eq!(
                &*f.part_bytes("coo", "coords").unwrap(),
                u64s(&[0, 0, 1, 0, 2, 1])
            );
        } else {
            assert_eq!(dtype("csr", "indices"), DType::U32);
            assert_eq!(dtype("csr", "indptr"), DType::U32);
            assert_eq!(dtype("coo", "coords"), DType::U32);
        }
        assert!(f.verify().is_ok());
    }
}

/// 1.1.1 refuses a file whose root attributes hold anything but text.
#[test]
fn v11_writer_refuses_typed_file_attributes() {
    let mut w = Writer::new(WriteOptions::new().with_version(ZtVersion::V1_1));
    let err = match w.set_attributes(meta_map(&[("n", MetaValue::UInt(3))])) {
        Err(e) => e,
        Ok(_) => panic!("typed attribute accepted"),
    };
    assert!(err.to_string().contains("'n'"), "{err}");
    w.set_attributes(meta_map(&[("s", MetaValue::Str("x".into()))]))
        .unwrap();
}
