//! zstd bombs: a stream that inflates far beyond what the file declares never inflates past
//! the declared size (plus one byte to notice), and a declared size beyond zstd's maximum
//! ratio is refused before any buffer is allocated. Peak memory is measured.

use tensorsmith::codec::decompress_exact;
use tensorsmith::ErrorKind;

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn a_zstd_bomb_inflates_no_further_than_declared() {
    // 1 GiB of zeros compresses to a few tens of KiB.
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..1024 {
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
    }
    let bomb = enc.finish().unwrap();
    drop(zeros);
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());

    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = peak_kib();
    // Declared: 1 MiB. The stream holds 1 GiB: refused as too long after 1 MiB + 1 byte.
    let e = decompress_exact(&bomb, 1 << 20).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ZtDecodedLength { .. }), "{e}");
    let grown_mib = (peak_kib().saturating_sub(before)) / 1024;
    assert!(
        grown_mib < 64,
        "peak grew by {grown_mib} MiB for a 1 MiB declaration"
    );

    // Declared: 1 TB from a few KiB: beyond zstd's 32768:1 limit, refused up front.
    let e = decompress_exact(&bomb[..bomb.len().min(4096)], 1 << 40).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ZtDecodedLength { .. }), "{e}");
}
