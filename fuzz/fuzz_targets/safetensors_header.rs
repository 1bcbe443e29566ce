//! Differential fuzzing of the safetensors header against the reference crate.
//!
//! Input: two bytes giving the length of the data area, then the JSON header. The target
//! frames them as a whole file (length prefix, header, zeroed data) and asks both readers.
//! They must agree on accept/reject, and on every tensor when both accept. Neither may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorsmith::safetensors::parse_bytes;
use tensorsmith::OpenOptions;

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let data_len = u16::from_le_bytes([input[0], input[1]]) as usize;
    let json = &input[2..];
    let mut file = Vec::with_capacity(8 + json.len() + data_len);
    file.extend_from_slice(&(json.len() as u64).to_le_bytes());
    file.extend_from_slice(json);
    file.resize(8 + json.len() + data_len, 0);

    // The reference does not know the packed I4/I2 dtypes.
    let opts = OpenOptions::new().with_packed_ints(false);
    let ours = parse_bytes(&file, &opts);
    let theirs = safetensors::SafeTensors::read_metadata(&file);
    // Documented divergence: we reject a key that appears twice (a tensor name, or a key of
    // `__metadata__`); the reference's HashMaps silently keep the last one.
    if let Err(e) = &ours {
        match e.kind() {
            tensorsmith::ErrorKind::DuplicateKey => return,
            tensorsmith::ErrorKind::BadMetadata { msg } if msg.contains("appears twice") => return,
            _ => {}
        }
    }
    match (&ours, &theirs) {
        (Ok(index), Ok((_, meta))) => {
            let tensors = meta.tensors();
            assert_eq!(index.tensors.len(), tensors.len());
            for t in &index.tensors {
                let r = tensors.get(&t.name).expect("tensor known to both");
                assert_eq!(t.dtype.safetensors_name(), r.dtype.to_string());
                let shape: Vec<u64> = r.shape.iter().map(|&d| d as u64).collect();
                assert_eq!(t.shape.as_slice(), shape.as_slice());
                let range = t.data_range();
                let base = 8 + json.len() as u64;
                assert_eq!(
                    (range.start - base, range.end - base),
                    (r.data_offsets.0 as u64, r.data_offsets.1 as u64)
                );
            }
            let ours_meta: Vec<(String, String)> = index
                .metadata
                .iter()
                .map(|(k, v)| match v {
                    tensorsmith::index::MetaValue::Str(s) => (k.clone(), s.clone()),
                    other => panic!("safetensors metadata value not a string: {other:?}"),
                })
                .collect();
            let mut theirs_meta: Vec<(String, String)> = meta
                .metadata()
                .as_ref()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
            theirs_meta.sort();
            assert_eq!(ours_meta, theirs_meta);
        }
        (Err(_), Err(_)) => {}
        _ => panic!(
            "readers disagree on {:?}: ours {:?}, reference {:?}",
            String::from_utf8_lossy(json),
            ours.as_ref().map(|i| i.tensors.len()),
            theirs.as_ref().map(|(n, _)| *n)
        ),
    }
});
