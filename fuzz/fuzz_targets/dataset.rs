//! Dataset metadata fuzzing: `dataset_manifest.json` bytes and `_tensor_index.parquet` bytes
//! (first byte chooses) are accepted or refused with an error: no panic, no hang, no
//! allocation beyond what the input allows. Accepted manifests keep their invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use tensorsmith_dataset::{tensor_index_file, Manifest};

static QUIET: std::sync::Once = std::sync::Once::new();

fuzz_target!(|data: &[u8]| {
    // The Parquet reader panics on some malformed files; the library catches those panics
    // (error::guard_parquet). libFuzzer's hook would abort on them even when caught, so the
    // hook is made silent: a panic that escapes still aborts through libfuzzer-sys's own
    // catch_unwind and is reported.
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let path = Path::new("fuzz");
    if which % 2 == 0 {
        if let Ok(m) = Manifest::parse(rest, path) {
            assert!(!m.shards.is_empty());
            assert_eq!(m.total_samples, m.shards.iter().map(|s| s.samples_count).sum::<u64>());
            assert!(m.shards.iter().all(|s| s.shard_path.ends_with(".safetensors")
                && !s.shard_path.contains('/')));
            // What we accept, we write back to the same manifest.
            let again = Manifest::parse(m.to_json().as_bytes(), path).expect("own output parses");
            assert_eq!(again.total_bytes, m.total_bytes);
        }
    } else if let Ok(entries) =
        tensor_index_file::read_bytes(bytes::Bytes::copy_from_slice(rest), path)
    {
        for e in entries {
            let _ = (e.tensor_key.len(), e.file_name.len(), e.shape.len());
        }
    }
});
