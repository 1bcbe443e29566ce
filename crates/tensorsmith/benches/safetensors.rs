//! Side-by-side benchmark against the `safetensors` crate, in one process, reporting ratios
//! (this machine is noisy: absolute times are printed for context only).
//!
//!     cargo bench -p tensorsmith --bench safetensors
//!
//! Environment: `TS_BENCH_GIB` (size of the big file, default 2), `TS_BENCH_TENSORS`
//! (tensors in the many-tensor file, default 100000), `TS_BENCH_DIR` (scratch folder,
//! default target/bench-data), `TS_BENCH_RUNS` (repetitions, median taken, default 5).
//!
//! (a) open + validate a file with many small tensors: ours vs `SafeTensors::deserialize`.
//! (b) read every tensor of a big file into memory from page cache vs a plain copy of the
//!     same bytes (`read` of the whole file into one buffer, and a memcpy between buffers).
//! (c) write a big file: ours vs `serialize_to_file`, from memory; then from another file,
//!     with peak resident memory (VmHWM, reset between phases).

use std::collections::HashMap;
use std::fs::File;
use std::hint::black_box;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::{parse_bytes, SafetensorsFile, SourceRange, Writer};
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

fn time<T>(runs: u64, mut f: impl FnMut() -> T) -> Duration {
    let mut ts = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        black_box(f());
        ts.push(t.elapsed());
    }
    median(ts)
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

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Resets the peak-RSS counter (Linux: writing 5 to clear_refs resets VmHWM).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_mib() -> f64 {
    status_kib("VmHWM:") as f64 / 1024.0
}

fn many_tensor_file(n: u64) -> Vec<u8> {
    let data = [0u8; 64];
    let mut w = Writer::new();
    let mut meta = std::collections::BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    w.metadata(meta);
    let names: Vec<String> = (0..n)
        .map(|i| format!("model.layers.{}.block.{}.weight", i / 16, i % 16))
        .collect();
    for name in &names {
        w.add(name, DType::F32, &[4, 4], &data[..]).unwrap();
    }
    w.to_bytes().unwrap()
}

fn bench_many(runs: u64) {
    let n = env_u64("TS_BENCH_TENSORS", 100_000);
    let bytes = many_tensor_file(n);
    println!(
        "(a) open + validate, {n} tensors, header {} bytes",
        bytes.len()
    );
    let opts = OpenOptions::new();
    let (ours, theirs) = time_pair(
        runs,
        || parse_bytes(&bytes, &opts).unwrap().tensors.len(),
        || safetensors::SafeTensors::deserialize(&bytes).unwrap().len(),
    );
    println!(
        "    tensorsmith parse_bytes {}   safetensors deserialize {}   speed-up {:.2}x (target >= 5x)",
        ms(ours),
        ms(theirs),
        theirs.as_secs_f64() / ours.as_secs_f64()
    );
    let dir = bench_dir();
    let path = dir.join("many.safetensors");
    std::fs::write(&path, &bytes).unwrap();
    let (open, theirs_file) = time_pair(
        runs,
        || SafetensorsFile::open(&path).unwrap().index().tensors.len(),
        || {
            let b = std::fs::read(&path).unwrap();
            safetensors::SafeTensors::deserialize(&b).unwrap().len()
        },
    );
    println!(
        "    from the file: tensorsmith open {}   read + deserialize {}   speed-up {:.2}x",
        ms(open),
        ms(theirs_file),
        theirs_file.as_secs_f64() / open.as_secs_f64()
    );
    // (d) what `inspect --json` and `hash` do: open (any format), then the JSON document or
    // the structural ID; each against deserialize of the same file (target: less time).
    let target = path.to_str().unwrap().to_owned();
    let oopts = tensorsmith::OpenOptions::new();
    let (inspect, theirs_d) = time_pair(
        runs,
        || {
            let m = tensorsmith::open(&target, &oopts).unwrap();
            tensorsmith::ops::inspect::inspect_json_text(&path, &m).len()
        },
        || {
            let b = std::fs::read(&path).unwrap();
            safetensors::SafeTensors::deserialize(&b).unwrap().len()
        },
    );
    let (hash, theirs_h) = time_pair(
        runs,
        || {
            let m = tensorsmith::open(&target, &oopts).unwrap();
            tensorsmith::ops::hash::structural_id(&m.index).len()
        },
        || {
            let b = std::fs::read(&path).unwrap();
            safetensors::SafeTensors::deserialize(&b).unwrap().len()
        },
    );
    println!(
        "(d) inspect --json {} ({:.2}x less time than read + deserialize {}); hash {} ({:.2}x less than {}) (target > 1x each)",
        ms(inspect),
        theirs_d.as_secs_f64() / inspect.as_secs_f64(),
        ms(theirs_d),
        ms(hash),
        theirs_h.as_secs_f64() / hash.as_secs_f64(),
        ms(theirs_h)
    );
    let _ = std::fs::remove_file(&path);
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

/// Tensors for the big file: 32 MiB each, with a few odd sizes.
fn big_tensors(total: u64) -> Vec<(String, Vec<u64>, u64)> {
    let per = 32u64 << 20;
    let mut out = Vec::new();
    let mut left = total;
    let mut i = 0;
    while left > 0 {
        let b = per.min(left);
        out.push((format!("layer.{i}.weight"), vec![b / 4], b));
        left -= b;
        i += 1;
    }
    out
}

fn write_big_source(path: &Path, total: u64) {
    let data: Vec<u8> = (0..(32u64 << 20))
        .map(|i| ((i * 2654435761) >> 13) as u8)
        .collect();
    let mut w = Writer::new();
    let tensors = big_tensors(total);
    for (name, shape, b) in &tensors {
        w.add(name, DType::F32, shape, &data[..*b as usize])
            .unwrap();
    }
    w.write_file(path).unwrap();
}

fn bench_read(path: &Path, runs: u64) {
    let len = std::fs::metadata(path).unwrap().len();
    println!(
        "(b) read every tensor into memory, {:.2} GiB, page cache warm",
        len as f64 / (1u64 << 30) as f64
    );
    // Warm the page cache.
    let mut sink = vec![0u8; 8 << 20];
    let mut f = File::open(path).unwrap();
    while f.read(&mut sink).unwrap() > 0 {}

    // Baselines copy the same tensor-sized pieces into fresh buffers, as our reader does:
    // a memcpy from the bytes already in RAM, and a bare pread per tensor with no library.
    let index = SafetensorsFile::open(path).unwrap().index().clone();
    let ranges: Vec<_> = index.tensors.iter().map(|t| t.data_range()).collect();
    let ram = std::fs::read(path).unwrap();
    let memcpy = || {
        let mut total = 0;
        for r in &ranges {
            total += black_box(ram[r.start as usize..r.end as usize].to_vec()).len();
        }
        total
    };
    let bare_pread = || {
        use std::os::unix::fs::FileExt;
        let f = File::open(path).unwrap();
        let mut total = 0;
        for r in &ranges {
            let mut v = vec![0u8; (r.end - r.start) as usize];
            f.read_exact_at(&mut v, r.start).unwrap();
            total += black_box(v).len();
        }
        total
    };
    let ours = |backend| {
        let opts = OpenOptions::new().with_backend(backend);
        let f = SafetensorsFile::open_with(path, &opts).unwrap();
        let mut total = 0;
        for t in &f.index().tensors {
            total += black_box(f.read_vec(&t.name).unwrap()).len();
        }
        total
    };
    let (memcpy_t, mine) = time_pair(runs, memcpy, || ours(tensorsmith::bytes::Backend::Mmap));
    drop(ram);
    let (base, mine_pread) = time_pair(runs, bare_pread, || {
        ours(tensorsmith::bytes::Backend::Pread)
    });
    let mmap_view_copy = time(runs, || {
        let f = SafetensorsFile::open(path).unwrap();
        let mut total = 0;
        for t in &f.index().tensors {
            total += black_box(f.tensor(&t.name).unwrap().bytes().to_vec()).len();
        }
        total
    });
    let gbs = |d: Duration| len as f64 / d.as_secs_f64() / 1e9;
    println!(
        "    baselines: memcpy from RAM {} ({:.2} GB/s), bare pread {} ({:.2} GB/s)",
        ms(memcpy_t),
        gbs(memcpy_t),
        ms(base),
        gbs(base)
    );
    println!(
        "    tensorsmith read_vec, mmap backend {} ({:.2} GB/s): {:.2}x of memcpy (target >= 0.9x)",
        ms(mine),
        gbs(mine),
        memcpy_t.as_secs_f64() / mine.as_secs_f64()
    );
    println!(
        "    tensorsmith read_vec, pread backend {}: {:.2}x of bare pread; view.to_vec() from the map {}: {:.2}x of memcpy",
        ms(mine_pread),
        base.as_secs_f64() / mine_pread.as_secs_f64(),
        ms(mmap_view_copy),
        memcpy_t.as_secs_f64() / mmap_view_copy.as_secs_f64()
    );
}

fn bench_write(dir: &Path, source: &Path, total: u64, runs: u64) {
    println!(
        "(c) write a {:.2} GiB file",
        total as f64 / (1u64 << 30) as f64
    );
    let data: Vec<u8> = (0..(32u64 << 20))
        .map(|i| ((i * 40503) >> 7) as u8)
        .collect();
    let tensors = big_tensors(total);
    let ours_path = dir.join("w_ours.safetensors");
    let theirs_path = dir.join("w_theirs.safetensors");
    let ours = || {
        let mut w = Writer::new();
        for (name, shape, b) in &tensors {
            w.add(name, DType::F32, shape, &data[..*b as usize])
                .unwrap();
        }
        let mut out = BufWriter::new(File::create(&ours_path).unwrap());
        let n = w.write_to(&mut out).unwrap();
        out.flush().unwrap();
        n
    };
    let theirs = || {
        let views: HashMap<String, safetensors::tensor::TensorView> = tensors
            .iter()
            .map(|(name, shape, b)| {
                let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
                let v = safetensors::tensor::TensorView::new(
                    safetensors::Dtype::F32,
                    shape,
                    &data[..*b as usize],
                )
                .unwrap();
                (name.clone(), v)
            })
            .collect();
        safetensors::serialize_to_file(views, None, &theirs_path).unwrap();
    };
    let (o, t) = time_pair(runs, ours, theirs);
    println!(
        "    from memory, no fsync: tensorsmith {}   safetensors serialize_to_file {}   ratio {:.2}x (target >= 1x)",
        ms(o),
        ms(t),
        t.as_secs_f64() / o.as_secs_f64()
    );
    assert_eq!(
        std::fs::read(&ours_path).unwrap(),
        std::fs::read(&theirs_path).unwrap(),
        "outputs must be byte-identical"
    );
    let _ = std::fs::remove_file(&theirs_path);

    // Atomic write (temp file + fsync + rename) from another file: bounded memory.
    let input = SafetensorsFile::open(source).unwrap();
    let rss_before = status_kib("VmRSS:") as f64 / 1024.0;
    reset_peak();
    let t0 = Instant::now();
    let mut w = Writer::new();
    for t in &input.index().tensors {
        let src = SourceRange {
            source: input.source(),
            range: t.data_range(),
        };
        w.add(&t.name, t.dtype, &t.shape, src).unwrap();
    }
    w.write_file(&ours_path).unwrap();
    let atomic = t0.elapsed();
    println!(
        "    from another file, atomic (fsync + rename): {}   peak RSS {:.0} MiB (RSS before {:.0} MiB; file {:.0} MiB)",
        ms(atomic),
        peak_mib(),
        rss_before,
        total as f64 / (1u64 << 20) as f64
    );
    let _ = std::fs::remove_file(&ours_path);
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs us with no flag: keep that
    // quick so test runs stay fast.
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs = env_u64("TS_BENCH_RUNS", if quick { 1 } else { 5 });
    if quick {
        std::env::set_var("TS_BENCH_TENSORS", "2000");
    }
    let only = std::env::var("TS_BENCH_ONLY").unwrap_or_default();
    if only == "profile-open" {
        // Ours alone, for a profiler.
        let bytes = many_tensor_file(env_u64("TS_BENCH_TENSORS", 100_000));
        let t = time(runs, || parse_bytes(&bytes, &OpenOptions::new()).unwrap());
        println!("parse_bytes median {}", ms(t));
        return;
    }
    if only.is_empty() || only.contains('a') {
        bench_many(runs);
    }
    if !(only.is_empty() || only.contains('b') || only.contains('c')) {
        return;
    }
    let gib = if quick { 0 } else { env_u64("TS_BENCH_GIB", 2) };
    let total = if quick { 64 << 20 } else { gib << 30 };
    let dir = bench_dir();
    let src = dir.join("big.safetensors");
    // The source of (b) and (c): written once with our writer.
    write_big_source(&src, total);
    if only.is_empty() || only.contains('b') {
        bench_read(&src, runs);
    }
    if only.is_empty() || only.contains('c') {
        bench_write(&dir, &src, total, runs);
    }
    let _ = std::fs::remove_file(&src);
}
