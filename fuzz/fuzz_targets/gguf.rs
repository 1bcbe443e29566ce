//! GGUF header fuzzing: no panic, no allocation beyond what the input allows, and the
//! prefix parser (used for pread and HTTP range reads) agrees with the whole-file parser:
//! from any prefix it either asks for more bytes or gives the whole-file answer. A file that
//! parses, written again by `gguf::Writer` (v3), parses to the same metadata, tensor infos
//! and tensor bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorsmith::gguf::{parse_bytes, parse_prefix, Writer};
use tensorsmith::OpenOptions;

fuzz_target!(|file: &[u8]| {
    let opts = OpenOptions::new();
    let whole = parse_bytes(file, &opts);
    if let Ok(h) = &whole {
        for t in &h.tensors {
            assert!(t.range.end <= file.len() as u64 && t.range.start <= t.range.end);
            assert_eq!(t.range.end - t.range.start, t.byte_len);
            assert!(t.byte_len > 0 || t.elements() == 0);
        }
        let mut w = Writer::new();
        for (k, v) in &h.metadata {
            w.set(k.clone(), v.clone());
        }
        for t in &h.tensors {
            let bytes = &file[t.range.start as usize..t.range.end as usize];
            w.add(t.name.clone(), t.ne.clone(), t.ggml_type, bytes)
                .expect("a parsed tensor is writable");
        }
        let again = w.to_bytes().expect("a parsed header is writable");
        let h2 = parse_bytes(&again, &opts).expect("the written file parses");
        assert_eq!(format!("{:?}", h.metadata), format!("{:?}", h2.metadata));
        assert_eq!(h.tensors.len(), h2.tensors.len());
        for (a, b) in h.tensors.iter().zip(&h2.tensors) {
            assert_eq!((&a.name, &a.ne, a.ggml_type), (&b.name, &b.ne, b.ggml_type));
            assert_eq!(
                file[a.range.start as usize..a.range.end as usize],
                again[b.range.start as usize..b.range.end as usize]
            );
        }
    }
    // Grow a prefix the way GgufFile does over pread.
    let len = file.len() as u64;
    let mut want = (file.first().copied().unwrap_or(0) as u64).min(len);
    loop {
        match parse_prefix(&file[..want as usize], len, &opts) {
            Ok(Ok(h)) => {
                // Compared through Debug: metadata may hold NaNs, which are never `==`.
                let w = whole.as_ref().expect("prefix parsed where the whole file fails");
                assert_eq!(format!("{h:?}"), format!("{w:?}"), "prefix of {want} disagrees");
                break;
            }
            Ok(Err(more)) => {
                assert!(more > want, "asked for {more} bytes with {want} given");
                want = more.min(len);
            }
            Err(e) => {
                let w = whole.as_ref().expect_err("prefix failed where the whole file parses");
                assert_eq!(e.to_string(), w.to_string());
                break;
            }
        }
    }
});
