//! Readers keep a consistent view while a writer replaces the file under them.
//!
//! The writer never modifies a file in place: it writes a temporary file and renames it over
//! the destination. A reader that opened the old file holds the old inode, so its memory map
//! or its positioned reads keep seeing the old, complete bytes (no SIGBUS from a shrinking
//! file, no mix of versions), and a reader that opens after the rename sees the new file.
//!
//! Quick by default; `TS_CONCURRENCY_VERSIONS=N` sets how many replacements (default 200).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tensorsmith::bytes::Backend;
use tensorsmith::dtype::DType;
use tensorsmith::index::MetaValue;
use tensorsmith::safetensors::{SafetensorsFile, Writer};
use tensorsmith::OpenOptions;

/// Version `v`: 1 + v % 7 tensors whose sizes depend on `v` (so offsets move between
/// versions), every byte equal to `v as u8`, and the version in the metadata.
fn write_version(path: &Path, v: u64) {
    let mut w = Writer::new();
    w.metadata(BTreeMap::from([("version".to_string(), v.to_string())]));
    for i in 0..1 + v % 7 {
        let len = 4096 * (1 + (v * 31 + i * 17) % 64);
        w.add(
            &format!("t{i}"),
            DType::U8,
            &[len],
            vec![v as u8; len as usize],
        )
        .unwrap();
    }
    w.write_file(path).unwrap();
}

/// Reads everything from an open file and checks it is one whole version; returns it.
fn check_whole(f: &SafetensorsFile) -> u64 {
    let Some(MetaValue::Str(v)) = f.metadata().get("version") else {
        panic!("no version in metadata");
    };
    let v: u64 = v.parse().unwrap();
    assert_eq!(f.index().tensors.len() as u64, 1 + v % 7, "version {v}");
    for t in &f.index().tensors {
        let bytes = f.read_vec(&t.name).unwrap();
        assert!(
            bytes.iter().all(|&b| b == v as u8),
            "version {v}: tensor {} holds bytes of another version",
            t.name
        );
        let view = f.tensor(&t.name).unwrap();
        assert!(view.bytes().iter().all(|&b| b == v as u8));
    }
    v
}

fn versions() -> u64 {
    std::env::var("TS_CONCURRENCY_VERSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

#[test]
fn readers_see_whole_versions_while_a_writer_renames_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("m.safetensors"));
    write_version(&path, 0);

    // Held open across every replacement, one per backend.
    let held: Vec<SafetensorsFile> = [Backend::Mmap, Backend::Pread]
        .into_iter()
        .map(|backend| {
            let opts = OpenOptions::new().with_backend(backend);
            SafetensorsFile::open_with(path.as_path(), &opts).unwrap()
        })
        .collect();

    let done = Arc::new(AtomicBool::new(false));
    let latest = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = [Backend::Mmap, Backend::Pread]
        .into_iter()
        .map(|backend| {
            let (path, done, latest) = (path.clone(), done.clone(), latest.clone());
            std::thread::spawn(move || {
                let opts = OpenOptions::new().with_backend(backend);
                let mut opened = 0u64;
                while !done.load(Ordering::Acquire) {
                    let floor = latest.load(Ordering::Acquire);
                    let f = SafetensorsFile::open_with(path.as_path(), &opts)
                        .expect("the destination always holds a whole file");
                    let v = check_whole(&f);
                    assert!(v >= floor, "saw version {v} after {floor} was in place");
                    opened += 1;
                }
                opened
            })
        })
        .collect();

    let n = versions();
    for v in 1..=n {
        write_version(&path, v);
        latest.store(v, Ordering::Release);
        // Files held open from before keep their bytes.
        for f in &held {
            assert_eq!(check_whole(f), 0);
        }
    }
    done.store(true, Ordering::Release);
    let opened: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(opened > 0);
    eprintln!("{n} replacements, {opened} opens by concurrent readers, all whole");
    let f = SafetensorsFile::open(path.as_path()).unwrap();
    assert_eq!(check_whole(&f), n);
}

#[test]
fn an_open_ztensor_file_keeps_its_bytes_while_replaced() {
    use tensorsmith::index::ZtVersion;
    use tensorsmith::ztensor::{self, Compression, WriteOptions, Writer as ZtWriter};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.zt");
    let write = |v: u8, version: ZtVersion| {
        let mut w = ZtWriter::new(
            WriteOptions::new()
                .with_version(version)
                .with_compression(Compression::Zstd { level: 1 }),
        );
        w.add_dense("t", DType::U8, &[1 << 16], vec![v; 1 << 16])
            .unwrap();
        w.write_file(&path).unwrap();
    };
    for version in [ZtVersion::V0_1, ZtVersion::V1_1, ZtVersion::V2] {
        write(0, version);
        let held = ztensor::open(&path, &Default::default()).unwrap();
        for v in 1..=versions().min(50) as u8 {
            write(v, version);
            assert!(held.tensor_bytes("t").unwrap().iter().all(|&b| b == 0));
            let now = ztensor::open(&path, &Default::default()).unwrap();
            assert!(now.tensor_bytes("t").unwrap().iter().all(|&b| b == v));
        }
    }
}
