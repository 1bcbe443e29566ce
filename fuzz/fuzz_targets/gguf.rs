//! GGUF header fuzzing: no panic, no allocation beyond what the input allows, and the
//! prefix parser (used for pread and HTTP range reads) agrees with the whole-file parser:
//! from any prefix it either asks for more bytes or gives the whole-file answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorsmith::gguf::{parse_bytes, parse_prefix};
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
