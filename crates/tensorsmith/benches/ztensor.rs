//! Reading raw zTensor v1.1 and v2 files into memory, side by side with plain copies of the
//! same bytes, in one process, reporting ratios (this machine is noisy: absolute times are
//! printed for context only).
//!
//!     cargo bench -p tensorsmith --bench ztensor
//!
//! Needs, in crates/tensorsmith/Cargo.toml:
//!
//!     [[bench]]
//!     name = "ztensor"
//!     harness = false
//!
//! Environment: `TS_BENCH_GIB` (file size, default 1), `TS_BENCH_ZT_TENSORS` (tensors,
//! default 64), `TS_BENCH_RUNS` (repetitions, median taken, default 5), `TS_BENCH_DIR`
//! (scratch folder, default target/bench-data). With no `--bench` argument (`cargo test
//! --all-targets`), it runs once on 64 MiB.
//!
//! For each version the file is written raw (no compression, no digest) by our writer, the
//! page cache is warmed, and every tensor is read into an owned buffer (`Vec<u8>`):
//!
//! - baseline `memcpy`: `to_vec()` of each tensor's byte range from a copy of the whole file
//!   already in RAM (no system call, no fault on the source: the bound for any reader);
//! - baseline `pread`: one `read_exact_at` per tensor, no library;
//! - ours, `tensor_bytes().into_owned()` on the default (mmap) backend: the public read path
//!   (identity decode, borrowed from the map), then copied out of the map;
//! - ours, `source().read_exact_at()` on the mmap backend: the owned read that
//!   `SafetensorsFile::read_vec` uses (pread for pieces of 1 MiB and more);
//! - ours, `read_all(false)` then `into_owned()` of every part on the rayon pool (2 threads
//!   here), against the 1-thread memcpy;
//! - ours, `part_bytes()` on the pread backend, against the bare pread.
//!
//! Twice: with every buffer kept to the end of the run (each gets fresh pages from the
//! kernel, as a loader that keeps the tensors pays: page faults dominate), and with each
//! buffer dropped after its read (the allocator hands the same memory back: the copy alone).
//! Ratios are baseline time / our time: >= 1 means at least as fast. Target (b): >= 0.9x of
//! memcpy.

#![allow(dead_code)] // compiled as a libtest harness (main unused) until registered above

use std::fs::File;
use std::hint::black_box;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tensorsmith::bytes::{Backend, ReadAt};
use tensorsmith::dtype::DType;
use tensorsmith::index::ZtVersion;
use tensorsmith::ztensor::{self, WriteOptions, Writer};
use tensorsmith::OpenOptions;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Interleaves the two contenders run by run, so drift in machine load hits both alike.
fn time_pair<A, B>(
    runs: u64,
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (Duration, Duration) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        black_box(a());
        ta.push(t.elapsed());
        let t = Instant::now();
        black_box(b());
        tb.push(t.elapsed());
    }
    (median(ta), median(tb))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn bench_dir() -> PathBuf {
    let d = std::env::var("TS_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-data")
        });
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A raw file of `n` F32 tensors totalling about `total` bytes, each with bytes of its own
/// (identical tensors would be stored once by the v2 writer, and read from one hot range).
fn write_file(path: &Path, version: ZtVersion, total: u64, n: u64) {
    let per = (total / n) & !3;
    let mut w = Writer::new(WriteOptions::new().with_version(version));
    for k in 0..n {
        // splitmix64, a stream per tensor
        let mut state = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED;
        let data: Vec<u8> = (0..per / 8)
            .flat_map(|_| {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                (z ^ (z >> 31)).to_le_bytes()
            })
            .collect();
        w.add_dense(
            &format!("layer.{k}.weight"),
            DType::F32,
            &[data.len() as u64 / 4],
            data,
        )
        .unwrap();
    }
    w.write_file(path).unwrap();
}

fn warm(path: &Path) {
    let mut sink = vec![0u8; 8 << 20];
    let mut f = File::open(path).unwrap();
    while f.read(&mut sink).unwrap() > 0 {}
}

/// Where each contender puts the buffers it reads: kept until the end of the run (every
/// buffer gets fresh pages from the kernel, as in a loader that keeps the tensors), or dropped
/// at once (the allocator hands the same memory back: the copy alone).
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    All,
    Drop,
}

struct Sink {
    keep: Keep,
    kept: Vec<Vec<u8>>,
    total: usize,
}

impl Sink {
    fn new(keep: Keep) -> Sink {
        Sink {
            keep,
            kept: Vec::new(),
            total: 0,
        }
    }
    fn put(&mut self, v: Vec<u8>) {
        self.total += v.len();
        if self.keep == Keep::All {
            self.kept.push(v);
        } else {
            black_box(v);
        }
    }
    fn done(self) -> usize {
        black_box(self.kept);
        self.total
    }
}

fn bench_read(path: &Path, label: &str, runs: u64) {
    let len = std::fs::metadata(path).unwrap().len();
    warm(path);
    let zt = ztensor::open(path, &OpenOptions::new()).unwrap();
    let names: Vec<String> = zt.index().tensors.iter().map(|t| t.name.clone()).collect();
    let ranges: Vec<_> = zt
        .index()
        .tensors
        .iter()
        .map(|t| t.part("data").unwrap().range.clone())
        .collect();
    let data_bytes: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    drop(zt);
    println!(
        "(b) {label}: read {} tensors ({:.2} GiB of data, file {:.2} GiB) into owned buffers, page cache warm",
        names.len(),
        data_bytes as f64 / (1u64 << 30) as f64,
        len as f64 / (1u64 << 30) as f64
    );

    let ram = std::fs::read(path).unwrap();
    let memcpy = |keep| {
        let mut s = Sink::new(keep);
        for r in &ranges {
            s.put(ram[r.start as usize..r.end as usize].to_vec());
        }
        s.done()
    };
    let bare_pread = |keep| {
        use std::os::unix::fs::FileExt;
        let f = File::open(path).unwrap();
        let mut s = Sink::new(keep);
        for r in &ranges {
            let mut v = vec![0u8; (r.end - r.start) as usize];
            f.read_exact_at(&mut v, r.start).unwrap();
            s.put(v);
        }
        s.done()
    };
    let mmap_opts = OpenOptions::new();
    let pread_opts = OpenOptions::new().with_backend(Backend::Pread);
    let ours_tensor_bytes = |keep| {
        let f = ztensor::open(path, &mmap_opts).unwrap();
        let mut s = Sink::new(keep);
        for n in &names {
            s.put(f.tensor_bytes(n).unwrap().into_owned());
        }
        s.done()
    };
    let ours_pread_backend = |keep| {
        let f = ztensor::open(path, &pread_opts).unwrap();
        let mut s = Sink::new(keep);
        for n in &names {
            s.put(f.part_bytes(n, "data").unwrap().into_owned());
        }
        s.done()
    };
    let ours_read_exact = |keep| {
        let f = ztensor::open(path, &mmap_opts).unwrap();
        let mut s = Sink::new(keep);
        for t in &f.index().tensors {
            let r = &t.part("data").unwrap().range;
            let mut v = vec![0u8; (r.end - r.start) as usize];
            f.source().read_exact_at(r.start, &mut v).unwrap();
            s.put(v);
        }
        s.done()
    };
    let ours_read_all_par = |keep| {
        use rayon::prelude::*;
        let f = ztensor::open(path, &mmap_opts).unwrap();
        let parts: Vec<_> = f.read_all(false).unwrap().into_iter().flatten().collect();
        if keep == Keep::All {
            let owned: Vec<Vec<u8>> = parts.into_par_iter().map(|c| c.into_owned()).collect();
            let n: usize = owned.iter().map(|v| v.len()).sum();
            black_box(owned);
            n
        } else {
            parts
                .into_par_iter()
                .map(|c| black_box(c.into_owned()).len())
                .sum()
        }
    };

    let gbs = |d: Duration| data_bytes as f64 / d.as_secs_f64() / 1e9;
    let line = |what: &str, ours: Duration, base: Duration, base_name: &str| {
        println!(
            "      {what:<46} {:>10} ({:5.2} GB/s): {:.2}x of {base_name}",
            ms(ours),
            gbs(ours),
            base.as_secs_f64() / ours.as_secs_f64()
        );
    };
    for keep in [Keep::All, Keep::Drop] {
        println!(
            "    {}",
            if keep == Keep::All {
                "buffers kept to the end of the run (fresh pages for every buffer, as a loader pays):"
            } else {
                "each buffer dropped after the read (the allocator reuses memory: the copy alone):"
            }
        );
        let (m1, t1) = time_pair(runs, || memcpy(keep), || ours_tensor_bytes(keep));
        let (m2, t2) = time_pair(runs, || memcpy(keep), || ours_read_exact(keep));
        let (m3, t3) = time_pair(runs, || memcpy(keep), || ours_read_all_par(keep));
        let (p1, t4) = time_pair(runs, || bare_pread(keep), || ours_pread_backend(keep));
        let memcpy_t = median(vec![m1, m2, m3]);
        println!(
            "      baselines: memcpy from RAM {} ({:.2} GB/s), bare pread {} ({:.2} GB/s, {:.2}x of memcpy)",
            ms(memcpy_t),
            gbs(memcpy_t),
            ms(p1),
            gbs(p1),
            memcpy_t.as_secs_f64() / p1.as_secs_f64()
        );
        line(
            "tensor_bytes().into_owned(), mmap backend",
            t1,
            m1,
            "memcpy (target >= 0.9x)",
        );
        line(
            "source().read_exact_at(), mmap backend",
            t2,
            m2,
            "memcpy (target >= 0.9x)",
        );
        line(
            "read_all(false) + into_owned on 2 threads",
            t3,
            m3,
            "memcpy (1 thread)",
        );
        line("part_bytes(), pread backend", t4, p1, "bare pread");
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs us with no flag: keep
    // that quick so test runs stay fast.
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs = env_u64("TS_BENCH_RUNS", if quick { 1 } else { 5 });
    let total = if quick {
        64 << 20
    } else {
        env_u64("TS_BENCH_GIB", 1) << 30
    };
    let n = env_u64("TS_BENCH_ZT_TENSORS", 64).max(1);
    let dir = bench_dir();
    for (version, label, file) in [
        (ZtVersion::V1_1, "raw v1.1", "zt_read_v11.zt"),
        (ZtVersion::V2, "raw v2", "zt_read_v2.zt"),
    ] {
        let path = dir.join(file);
        write_file(&path, version, total, n);
        bench_read(&path, label, runs);
        let _ = std::fs::remove_file(&path);
    }
}
