//! Batch-mode writes of arbitrary Parquet bytes, both ways: shards copied or decoded straight
//! from pages (parquet_direct) and through the Parquet reader. No panic, no hang; where both
//! write, the shards are byte-identical; the pages never refuse a file the reader writes,
//! except a page they find corrupt (values short of its levels, a dictionary index out of
//! range, bytes that do not decompress), which arrow-rs may read anyway.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::atomic::Ordering;
use tensorsmith::dtype::DType;
use tensorsmith_dataset::{write_dataset, Input, JobOptions, Progress, WriteOptions};

#[path = "../../crates/tensorsmith-dataset/tests/support/shards.rs"]
mod shards;

static QUIET: std::sync::Once = std::sync::Once::new();

fuzz_target!(|data: &[u8]| {
    // As in the `dataset` target: the library catches the Parquet reader's panics.
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let dir = std::env::temp_dir().join(format!("tensorsmith-fuzz-write-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("in.parquet");
    std::fs::write(&src, data).unwrap();
    let Ok(input) = Input::open(&[&src]) else {
        return;
    };
    let mut o = WriteOptions::batch(3);
    o.dtype = Some(DType::F32);
    let run = |reader_only: bool| {
        let out = dir.join(format!("out-{reader_only}"));
        let job = JobOptions::new().with_threads(2).with_reader_only(reader_only);
        let p = Progress::default();
        write_dataset(&input, &out, &o, &job, &p)
            .map(|_| {
                let from_pages = p.direct_shards.load(Ordering::Relaxed)
                    + p.decoded_shards.load(Ordering::Relaxed);
                (shards::shard_contents(&out), from_pages)
            })
    };
    match (run(false), run(true)) {
        (Ok((a, _)), Ok((b, _))) => assert!(a == b, "shards differ"),
        (Err(tensorsmith_dataset::DatasetError::Corrupt { msg, .. }), Ok(_))
            if msg.contains(", page at byte ") => {}
        (Err(e), Ok(_)) => panic!("the pages failed where the reader wrote: {e}"),
        // The page copy does not read what the reader may refuse (statistics, say).
        (Ok(_), Err(_)) | (Err(_), Err(_)) => {}
    }
    let _ = std::fs::remove_dir_all(&dir);
});
