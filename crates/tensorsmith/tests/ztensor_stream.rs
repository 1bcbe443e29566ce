//! The streaming writer on parts larger than its pieces (raw pieces of 4 MiB, 1 MiB seekable
//! frames, one zstd stream per v0.1/v1.1 part): stored bytes equal what the one-shot codec
//! functions give, digests equal the one-shot digests, v2 writes identical blobs once, lazy
//! sources are read only in pieces, and a source that fails leaves no file.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tensorsmith::codec;
use tensorsmith::digest::{self, DigestKind};
use tensorsmith::dtype::DType;
use tensorsmith::index::{Digest, DigestScope, Layout, ZtVersion};
use tensorsmith::ztensor::{self, Compression, PartData, PartSource, WriteOptions, Writer};
use tensorsmith::{ErrorKind, OpenOptions, Result};

/// Compressible, not trivial bytes, the same for a seed.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 4 == 0 {
                (x & 0x0f) as u8
            } else {
                (i % 97) as u8
            }
        })
        .collect()
}

/// A lazy source over a buffer that records the largest read and can fail past an offset.
struct Counted {
    data: Arc<Vec<u8>>,
    largest: Arc<AtomicU64>,
    fail_at: Option<u64>,
}

impl PartSource for Counted {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        if self.fail_at.is_some_and(|f| range.end > f) {
            return Err(ErrorKind::Truncated {
                needed: range.end,
                available: self.fail_at.unwrap(),
            }
            .into());
        }
        self.largest
            .fetch_max(range.end - range.start, Ordering::Relaxed);
        Ok(Cow::Borrowed(
            &self.data[range.start as usize..range.end as usize],
        ))
    }
}

fn lazy(data: &Arc<Vec<u8>>, largest: &Arc<AtomicU64>) -> Box<Counted> {
    Box::new(Counted {
        data: data.clone(),
        largest: largest.clone(),
        fail_at: None,
    })
}

fn write_both(w: impl Fn() -> Writer<'static>, dir: &std::path::Path) -> ztensor::ZtFile {
    let path = dir.join("out.zt");
    let bytes = w().to_bytes().unwrap();
    let n = w().write_file(&path).unwrap();
    assert_eq!(n, bytes.len() as u64);
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "file and bytes differ"
    );
    ztensor::open(&path, &OpenOptions::new()).unwrap()
}

#[test]
fn v2_seekable_parts_over_many_frames_match_the_one_shot_encoder() {
    let dir = tempfile::tempdir().unwrap();
    let a = Arc::new(pattern((3 << 20) + 12345, 7));
    let d = Arc::new(pattern((9 << 20) + 3, 9));
    let largest = Arc::new(AtomicU64::new(0));
    let f = write_both(
        || {
            let mut w = Writer::new(
                WriteOptions::new()
                    .with_compression(Compression::Zstd { level: 3 })
                    .with_digest(DigestKind::Xxh3),
            );
            let part = |role: &str, data: &Arc<Vec<u8>>| {
                PartData::lazy(role, DType::U8, lazy(data, &largest))
            };
            let n = a.len() as u64;
            w.add_object(
                "a",
                &[n],
                Layout::Dense,
                Default::default(),
                vec![part("data", &a)],
            )
            .unwrap();
            // The same bytes again: one blob, two references.
            w.add_object(
                "b",
                &[n],
                Layout::Dense,
                Default::default(),
                vec![part("data", &a)],
            )
            .unwrap();
            w.add_dense("c", DType::U8, &[0], Vec::new()).unwrap();
            w.add_object(
                "d",
                &[d.len() as u64],
                Layout::Dense,
                Default::default(),
                vec![part("data", &d).compressed(Compression::None)],
            )
            .unwrap();
            w
        },
        dir.path(),
    );
    assert!(
        largest.load(Ordering::Relaxed) <= 4 << 20,
        "a lazy part was read whole"
    );
    let ix = f.index();
    let range = |name: &str| {
        ix.tensors.iter().find(|t| t.name == name).unwrap().parts[0]
            .range
            .clone()
    };
    assert_eq!(range("a"), range("b"));
    assert_eq!(
        f.stored_bytes("a", "data").unwrap(),
        codec::seekable_encode(&a, 3).unwrap()
    );
    assert_eq!(f.stored_bytes("d", "data").unwrap(), &d[..]);
    for (name, data) in [("a", &a[..]), ("b", &a[..]), ("c", &[][..]), ("d", &d[..])] {
        assert!(
            f.part_bytes_verified(name, "data").unwrap() == data,
            "{name}"
        );
        let p = &ix.tensors.iter().find(|t| t.name == name).unwrap().parts[0];
        assert_eq!(
            p.digest(),
            Some((
                digest::compute(DigestKind::Xxh3, data),
                DigestScope::Decoded
            ))
        );
    }
    assert!(f.verify().failures.is_empty());
}

#[test]
fn v11_and_v01_parts_stream_as_one_frame_each() {
    let dir = tempfile::tempdir().unwrap();
    let a = Arc::new(pattern((9 << 20) + 5, 3));
    let largest = Arc::new(AtomicU64::new(0));
    for (version, kind, c) in [
        (
            ZtVersion::V1_1,
            DigestKind::Crc32c,
            Compression::Zstd { level: 3 },
        ),
        (ZtVersion::V1_1, DigestKind::Sha256, Compression::None),
        (
            ZtVersion::V0_1,
            DigestKind::Sha256,
            Compression::Zstd { level: 1 },
        ),
        (ZtVersion::V0_1, DigestKind::Crc32c, Compression::None),
    ] {
        let f = write_both(
            || {
                let mut w = Writer::new(
                    WriteOptions::new()
                        .with_version(version)
                        .with_compression(c)
                        .with_digest(kind),
                );
                w.add_object(
                    "a",
                    &[a.len() as u64],
                    Layout::Dense,
                    Default::default(),
                    vec![PartData::lazy("data", DType::U8, lazy(&a, &largest))],
                )
                .unwrap();
                w.add_dense("small", DType::F32, &[2], vec![1u8; 8])
                    .unwrap();
                w
            },
            dir.path(),
        );
        let stored = f.stored_bytes("a", "data").unwrap();
        match c {
            Compression::Zstd { level } => {
                assert!(stored == codec::compress_frame(&a, level, false).unwrap())
            }
            Compression::None => assert!(stored == &a[..]),
        }
        let p = &f.index().tensors[0].parts[0];
        let want: Digest = digest::compute(kind, &stored);
        assert_eq!(p.digest(), Some((want, DigestScope::Stored)));
        assert!(f.part_bytes_verified("a", "data").unwrap() == &a[..]);
        assert!(f.verify().failures.is_empty(), "{version:?} {c:?}");
    }
    assert!(largest.load(Ordering::Relaxed) <= 4 << 20);
}

#[test]
fn a_source_failing_midway_names_the_tensor_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.zt");
    std::fs::write(&path, b"old").unwrap();
    for c in [Compression::None, Compression::Zstd { level: 3 }] {
        for version in [ZtVersion::V0_1, ZtVersion::V1_1, ZtVersion::V2] {
            let data = Arc::new(pattern(10 << 20, 5));
            let mut w = Writer::new(
                WriteOptions::new()
                    .with_version(version)
                    .with_compression(c),
            );
            w.add_dense("first", DType::U8, &[4], vec![1u8; 4]).unwrap();
            w.add_object(
                "broken",
                &[10 << 20],
                Layout::Dense,
                Default::default(),
                vec![PartData::lazy(
                    "data",
                    DType::U8,
                    Box::new(Counted {
                        data,
                        largest: Default::default(),
                        fail_at: Some(6 << 20),
                    }),
                )],
            )
            .unwrap();
            let e = w.write_file(&path).unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::Truncated { .. }), "{e}");
            assert!(e.to_string().contains("broken"), "{e}");
            assert_eq!(std::fs::read(&path).unwrap(), b"old");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        }
    }
}

/// A bool part holding a byte other than 0 or 1 (which safetensors allows and zTensor readers
/// refuse) is refused as it is read, in every version and encoding, far into a part larger
/// than a piece too, naming the tensor and the byte; no file is left.
#[test]
fn a_bool_byte_other_than_0_or_1_is_refused_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.zt");
    let n = 9 << 20;
    for at in [0usize, n - 1] {
        let mut data = vec![1u8; n];
        data[at] = 2;
        for version in [ZtVersion::V0_1, ZtVersion::V1_1, ZtVersion::V2] {
            for compression in [Compression::None, Compression::Zstd { level: 1 }] {
                let opts = WriteOptions::new()
                    .with_version(version)
                    .with_compression(compression);
                let mut w = Writer::new(opts);
                w.add_dense("flags", DType::BOOL, &[n as u64], data.clone())
                    .unwrap();
                let e = w.write_file(&out).expect_err("refused");
                let msg = e.to_string();
                assert!(matches!(e.kind(), ErrorKind::ZtLayoutData(_)), "{msg}");
                assert!(
                    msg.contains("'flags'") && msg.contains(&format!("byte {at} is 0x02")),
                    "{msg}"
                );
                assert_eq!(
                    std::fs::read_dir(dir.path()).unwrap().count(),
                    0,
                    "{version:?}"
                );
            }
        }
    }
    // A source read whole (decoded ONNX typed fields are such), small and large.
    struct Whole(Vec<u8>);
    impl PartSource for Whole {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
            Ok(Cow::Borrowed(
                &self.0[range.start as usize..range.end as usize],
            ))
        }
        fn whole(&self) -> bool {
            true
        }
    }
    for len in [4usize, 5 << 20] {
        let mut data = vec![0u8; len];
        data[len - 1] = 0xff;
        let mut w = Writer::new(WriteOptions::new());
        w.add_object(
            "flags",
            &[len as u64],
            Layout::Dense,
            Default::default(),
            vec![PartData::lazy("data", DType::BOOL, Box::new(Whole(data)))],
        )
        .unwrap();
        let e = w.write_file(&out).expect_err("refused");
        assert!(
            e.to_string().contains(&format!("byte {} is 0xff", len - 1)),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
    // 0 and 1 are written and read back.
    let mut w = Writer::new(WriteOptions::new());
    w.add_dense("flags", DType::BOOL, &[3], vec![0u8, 1, 1])
        .unwrap();
    w.write_file(&out).unwrap();
    let m = tensorsmith::open(out.to_str().unwrap(), &OpenOptions::new()).unwrap();
    assert_eq!(m.index.tensors[0].name, "flags");
}
