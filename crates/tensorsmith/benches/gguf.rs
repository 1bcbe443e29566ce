//! GGUF: opening a file with a 150,000-entry vocabulary (tests/data/gguf/vocab_150k.gguf,
//! written by the `gguf` package), ours vs the `gguf` package's `GGUFReader`, in one run,
//! reported as a ratio (target: at least 10× faster).
//!
//!     cargo bench -p tensorsmith --bench gguf
//!
//! The reference runs in a Python subprocess (`TS_BENCH_PYTHON`, default `.venv/bin/python`,
//! which `scripts/test` creates); it times `GGUFReader(path)` plus reading every string of the
//! vocabulary, in-process, so interpreter start-up is not counted against it. Ours is timed
//! the same way: open, validate, decode every key and string. `TS_BENCH_RUNS` (default 7).

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use tensorsmith::gguf::{Array, GgufFile, GgufValue as Value};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const PY: &str = r#"
import sys, time
from gguf import GGUFReader
path, runs = sys.argv[1], int(sys.argv[2])
ts = []
for _ in range(runs):
    t = time.perf_counter()
    r = GGUFReader(path)
    f = r.fields["tokenizer.ggml.tokens"]
    n = sum(len(f.contents(i)) for i in range(len(f.data)))
    ts.append(time.perf_counter() - t)
ts.sort()
print(ts[len(ts) // 2], n)
"#;

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs: u64 = std::env::var("TS_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 7 });
    let path = root().join("tests/data/gguf/vocab_150k.gguf");

    let mut ours = Vec::new();
    let mut chars = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let f = GgufFile::open(&path).expect("vector opens");
        let Some(Value::Array(Array::String(tokens))) = f.header().get("tokenizer.ggml.tokens")
        else {
            panic!("no vocabulary")
        };
        chars = tokens.iter().map(|s| s.len()).sum::<usize>();
        black_box(&f);
        ours.push(t.elapsed());
    }
    ours.sort();
    let ours = ours[ours.len() / 2];
    println!("gguf open, 150k-entry vocabulary: ours {ours:?} ({chars} bytes of tokens)");
    if quick {
        return; // `cargo test --all-targets` runs this once as a smoke test
    }

    let python = std::env::var("TS_BENCH_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
    let out = Command::new(&python)
        .args(["-c", PY, path.to_str().unwrap(), &runs.to_string()])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let secs: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
            let theirs = Duration::from_secs_f64(secs);
            println!(
                "gguf open, 150k-entry vocabulary: GGUFReader {theirs:?}; ours is {:.1}x faster (target >= 10x)",
                theirs.as_secs_f64() / ours.as_secs_f64()
            );
        }
        Ok(o) => println!("reference failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            println!("reference not run ({python}: {e}); run scripts/test once to create .venv")
        }
    }
}
