//! Opening a header of two million tensors takes resident memory proportional to the file:
//! peak RSS (VmHWM, reset through /proc/self/clear_refs) grows by a small multiple of the
//! header size, nothing sized by counts the file claims. Alone in its test binary, so no
//! other test's memory is counted.

use std::io::Write;
use tensorsmith::safetensors::SafetensorsFile;
use tensorsmith::OpenOptions;

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn a_two_million_tensor_header_opens_in_memory_proportional_to_the_file() {
    if std::fs::write("/proc/self/clear_refs", "5").is_err() {
        eprintln!("SKIPPED: cannot reset VmHWM here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.safetensors");
    let count = 2_000_000;
    let mut json = Vec::with_capacity(count * 56);
    json.push(b'{');
    for i in 0..count {
        if i > 0 {
            json.push(b',');
        }
        write!(
            json,
            r#""t{i:07}":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}"#
        )
        .unwrap();
    }
    json.push(b'}');
    let header = json.len() as u64;
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&header.to_le_bytes()).unwrap();
    f.write_all(&json).unwrap();
    drop((f, json));

    // Over the default limit: refused before anything is read.
    let e = SafetensorsFile::open(&path).unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");

    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_kib("VmRSS:");
    let opts = OpenOptions::new().with_max_header_len(200_000_000);
    let file = SafetensorsFile::open_with(&path, &opts).unwrap();
    assert_eq!(file.index().tensors.len(), count);
    let grown_mib = (status_kib("VmHWM:") - before) / 1024;
    let header_mib = header >> 20;
    eprintln!("header {header_mib} MiB: peak RSS grew by {grown_mib} MiB");
    // The mapped header itself, plus one index entry (~200 bytes and a name) per 56-byte
    // header entry: about 5x the header for these minimal entries, never more than 6x.
    assert!(
        grown_mib <= 6 * header_mib + 64,
        "peak RSS grew by {grown_mib} MiB for a {header_mib} MiB header"
    );
}
