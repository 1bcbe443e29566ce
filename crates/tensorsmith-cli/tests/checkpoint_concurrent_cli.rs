//! Sharded checkpoints rewritten in place (issue 26): a rewrite killed at random points, and
//! four rewrites of one folder at once, `TS_RACE_ROUNDS` rounds each (default 20). Never a
//! checkpoint that mixes two writes and still validates or verifies: either one source whole,
//! or a state `validate` refuses.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tensorsmith::dtype::DType;

const TENSORS: u32 = 12;

fn rounds() -> u32 {
    std::env::var("TS_RACE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
}

/// A safetensors file of `TENSORS` tensors of `floats` f32 each, every value `src`.
fn source(dir: &Path, src: u32, floats: usize) -> PathBuf {
    let p = dir.join(format!("src{src}.safetensors"));
    let bytes: Vec<u8> = std::iter::repeat_n((src as f32).to_le_bytes(), floats)
        .flatten()
        .collect();
    let mut w = tensorsmith::safetensors::Writer::new();
    for t in 0..TENSORS {
        w.add(
            &format!("t{t:02}"),
            DType::F32,
            &[floats as u64],
            &bytes[..],
        )
        .unwrap();
    }
    w.write_file(&p).unwrap();
    p
}

fn convert(src: &Path, ck: &Path) -> Command {
    let mut c = bin();
    c.arg("convert")
        .arg(src)
        .arg(ck.join("model.safetensors"))
        .args(["--shard-size", "1MB"]);
    c
}

/// The sources the checkpoint in `ck` holds tensors of, if it opens.
fn sources(target: &Path) -> Option<Vec<u32>> {
    let m = tensorsmith::open(target.to_str().unwrap(), &Default::default()).ok()?;
    let mut s: Vec<u32> = m
        .index
        .tensors
        .iter()
        .map(|t| {
            let b = m.tensor_bytes(t).unwrap();
            f32::from_le_bytes(b[..4].try_into().unwrap()) as u32
        })
        .collect();
    s.sort();
    s.dedup();
    Some(s)
}

fn code(args: &[&Path]) -> i32 {
    let mut c = bin();
    for a in args {
        c.arg(a);
    }
    c.output().unwrap().status.code().unwrap()
}

/// Whatever a reader would load from `ck` (the folder, the index) is one source whole, or is
/// refused by `validate` and `verify`.
fn never_a_mix_that_validates(ck: &Path, what: &str) {
    let index = ck.join("model.safetensors.index.json");
    for target in [ck.to_path_buf(), index] {
        if !target.exists() {
            continue;
        }
        let Some(s) = sources(&target) else { continue };
        let validate = code(&[Path::new("validate"), &target]);
        let verify = code(&[Path::new("verify"), &target]);
        if s.len() > 1 {
            assert_eq!(validate, 1, "{what}: {target:?} mixes {s:?} and validates");
            assert_eq!(verify, 1, "{what}: {target:?} mixes {s:?} and verifies");
        } else {
            assert_eq!(validate, 0, "{what}: {target:?} of one source refused");
            assert_eq!(verify, 0, "{what}: {target:?} of one source refused");
        }
    }
}

#[test]
fn a_killed_checkpoint_rewrite_never_leaves_a_mix_that_validates() {
    let tmp = tempfile::tempdir().unwrap();
    let srcs = [
        source(tmp.path(), 1, 100_000),
        source(tmp.path(), 2, 100_000),
    ];
    let ck = tmp.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    assert!(convert(&srcs[0], &ck).status().unwrap().success());
    let t = Instant::now();
    assert!(convert(&srcs[1], &ck).status().unwrap().success());
    let full = t.elapsed();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let (mut refused, mut whole) = (0, 0);
    for round in 0..rounds() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let src = &srcs[round as usize % 2];
        let mut child = convert(src, &ck)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(
            seed % (full.as_micros() as u64 * 6 / 5).max(1),
        ));
        let _ = child.kill();
        child.wait().unwrap();
        let what = format!("round {round}");
        never_a_mix_that_validates(&ck, &what);
        match code(&[Path::new("validate"), &ck]) {
            0 => whole += 1,
            _ => refused += 1,
        }
        // The next writer is not blocked by the killed one's lock, and leaves a whole set.
        let o = convert(src, &ck).output().unwrap();
        assert!(
            o.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(sources(&ck), Some(vec![round % 2 + 1]), "{what}");
        assert!(!ck.join(".model.safetensors.index.json.lock").exists());
    }
    eprintln!(
        "{} kills: {whole} left a whole checkpoint, {refused} one that validate refuses",
        rounds()
    );
}

#[test]
fn concurrent_checkpoint_rewrites_leave_one_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let srcs: Vec<PathBuf> = (1..=4).map(|s| source(tmp.path(), s, 60_000)).collect();
    let ck = tmp.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    for round in 0..rounds() {
        let children: Vec<_> = srcs
            .iter()
            .map(|s| {
                convert(s, &ck)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        for o in &outs {
            assert!(
                o.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let s = sources(&ck).expect("the checkpoint opens");
        assert_eq!(s.len(), 1, "round {round}: a mix of {s:?}");
        never_a_mix_that_validates(&ck, &format!("round {round}"));
    }
}

#[test]
fn validate_names_the_shards_of_another_write() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        source(tmp.path(), 1, 100_000),
        source(tmp.path(), 2, 100_000),
    );
    let (ck, other) = (tmp.path().join("ck"), tmp.path().join("other"));
    for (s, d) in [(&a, &ck), (&b, &other)] {
        std::fs::create_dir(d).unwrap();
        assert!(convert(s, d).status().unwrap().success());
    }
    // One shard of another write of the same layout, under the same name.
    let name = "model-00002-of-00006.safetensors";
    std::fs::copy(other.join(name), ck.join(name)).unwrap();
    let o = bin().arg("validate").arg(&ck).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("shards from different writes") && out.contains(name),
        "{out}"
    );
    assert!(!out.contains("00001-of"), "{out}");
}
