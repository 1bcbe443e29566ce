//! Peak memory of `tensorsmith convert --pread` to zTensor: the writer streams parts through a
//! bounded window, so the child's peak RSS (ru_maxrss from wait4) stays far below the input
//! size, for every version, raw and zstd, with one tensor larger than the whole window; and of
//! `stats --pread`, which reads chunks of a few MiB per thread.
//! `TS_MEMORY_INPUT_MIB` sets the input size (default 256).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// A safetensors file of about `mib` MiB: F32 tensors of 24 MiB, plus one of 128 MiB;
/// values are 4-bit levels (compressible about 4:1, not trivially), written in pieces.
fn write_input(path: &Path, mib: u64) {
    let big = 128u64 << 20;
    let small = 24u64 << 20;
    let n_small = (mib << 20).saturating_sub(big) / small;
    let mut sizes = vec![big];
    sizes.extend(std::iter::repeat_n(small, n_small as usize));
    let mut header = String::from("{");
    let mut off = 0u64;
    for (i, s) in sizes.iter().enumerate() {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"t{i}\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{off},{}]}}",
            s / 4,
            off + s
        ));
        off += s;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..off >> 20 {
        for c in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Two f32 values from 16 levels each: (k - 7.5) / 64.
            let a = ((x & 15) as f32 - 7.5) / 64.0;
            let b = (((x >> 4) & 15) as f32 - 7.5) / 64.0;
            c[..4].copy_from_slice(&a.to_le_bytes());
            c[4..].copy_from_slice(&b.to_le_bytes());
        }
        f.write_all(&buf).unwrap();
    }
    f.into_inner().unwrap().sync_all().unwrap();
}

/// Runs the binary with `args`; returns (exit code, peak RSS in MiB) from wait4.
// The child is reaped by wait4 (which also gives its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn peak_rss_mib(args: &[&std::ffi::OsStr]) -> (i32, u64) {
    let child = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain FFI calls with valid pointers; the child is ours and not waited elsewhere.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4 failed");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // ru_maxrss is in KiB on Linux.
    (code, usage.ru_maxrss as u64 / 1024)
}

#[test]
fn ztensor_convert_peak_rss_stays_far_below_the_input() {
    let mib: u64 = std::env::var("TS_MEMORY_INPUT_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    write_input(&input, mib);
    let out = dir.path().join("out.zt");
    let bound = 100;
    for args in [
        &[
            "--zt-version",
            "2",
            "--compress",
            "zstd:3",
            "--digest",
            "xxh3",
        ][..],
        &["--zt-version", "2"][..],
        &[
            "--zt-version",
            "1.1",
            "--compress",
            "zstd:1",
            "--digest",
            "crc32c",
        ][..],
        &["--zt-version", "0.1", "--digest", "sha256"][..],
    ] {
        let mut all: Vec<&std::ffi::OsStr> = vec![
            "convert".as_ref(),
            "--pread".as_ref(),
            input.as_os_str(),
            out.as_os_str(),
        ];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        let (code, peak) = peak_rss_mib(&all);
        assert_eq!(code, 0, "{args:?} failed");
        eprintln!("{args:?}: peak RSS {peak} MiB for a {mib} MiB input");
        assert!(
            peak <= bound,
            "{args:?}: peak RSS {peak} MiB for a {mib} MiB input (bound {bound} MiB)"
        );
        std::fs::remove_file(&out).unwrap();
    }
}

/// `stats --pread` reads plain tensors in chunks of a few MiB per thread, one huge tensor
/// included: peak RSS (all of it anonymous with --pread) stays far below the input.
#[test]
fn stats_peak_rss_stays_far_below_the_input() {
    let mib: u64 = std::env::var("TS_MEMORY_INPUT_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    write_input(&input, mib);
    let (code, peak) = peak_rss_mib(&[
        "stats".as_ref(),
        "--pread".as_ref(),
        "--json".as_ref(),
        input.as_os_str(),
    ]);
    assert_eq!(code, 0);
    eprintln!("stats: peak RSS {peak} MiB for a {mib} MiB input");
    assert!(
        peak <= 64,
        "stats: peak RSS {peak} MiB for a {mib} MiB input"
    );
}
