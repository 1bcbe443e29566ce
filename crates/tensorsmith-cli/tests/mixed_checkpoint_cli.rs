//! A checkpoint folder is read as one model only when it is one write: shards of different
//! writes (a rewrite killed among its renames), a `-of-N` set with a shard missing and no
//! index, or both layouts of one name (`NAME.safetensors` beside its index) are refused by
//! every reader, naming the files. A sharded rewrite interrupted by SIGINT or SIGTERM exits
//! 130 and leaves the old checkpoint as it was, with no temporary file; a single-file rewrite
//! removes the sharded layout of the same name, and a sharded one the single file.

#[path = "support/cli.rs"]
mod cli;
use cli::{p as s, text};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn ok(args: &[&str]) {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
}

/// `n` F32 tensors of `elems` elements each, values offset by `seed`.
fn model(path: &Path, n: u32, elems: u32, seed: u32) {
    let mut w = Writer::new();
    for i in 0..n {
        let data: Vec<u8> = (0..elems)
            .flat_map(|j| ((seed + i * elems + j) as f32).to_le_bytes())
            .collect();
        w.add(
            &format!("layers.{i}.weight"),
            DType::F32,
            &[elems as u64],
            data,
        )
        .unwrap();
    }
    w.metadata(BTreeMap::from([("format".to_string(), "pt".to_string())]));
    w.write_file(path).unwrap();
}

fn listing(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn shards_of_two_writes_are_refused_by_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (
        tmp.path().join("v1.safetensors"),
        tmp.path().join("v2.safetensors"),
    );
    model(&v1, 6, 250_000, 0);
    model(&v2, 6, 250_000, 7);
    let ckpt = tmp.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let out = ckpt.join("model.safetensors");
    ok(&["convert", s(&v1), s(&out), "--shard-size", "2MB"]);
    let old = listing(&ckpt);
    ok(&["convert", s(&v2), s(&out), "--shard-size", "2MB"]);
    // What a rewrite killed among its renames leaves: new shards 1-2, old 3, no index.
    let third = "model-00003-of-00003.safetensors";
    std::fs::write(ckpt.join(third), &old[third]).unwrap();
    std::fs::remove_file(ckpt.join("model.safetensors.index.json")).unwrap();
    let merged = tmp.path().join("merged.safetensors");
    for args in [
        vec!["inspect", s(&ckpt)],
        vec!["hash", "--content", s(&ckpt)],
        vec!["convert", s(&ckpt), s(&merged)],
        vec!["validate", s(&ckpt)],
    ] {
        let o = run(&args);
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(
            t.contains("shards from different writes") && t.contains(third),
            "{args:?}: {t}"
        );
    }
    assert!(!merged.exists());
}

#[test]
fn a_set_with_a_missing_shard_and_no_index_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let v1 = tmp.path().join("v1.safetensors");
    model(&v1, 6, 250_000, 0);
    let ckpt = tmp.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    ok(&[
        "convert",
        s(&v1),
        s(&ckpt.join("model.safetensors")),
        "--shard-size",
        "2MB",
    ]);
    std::fs::remove_file(ckpt.join("model.safetensors.index.json")).unwrap();
    std::fs::remove_file(ckpt.join("model-00002-of-00003.safetensors")).unwrap();
    let o = run(&["inspect", s(&ckpt)]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("model-00002-of-00003.safetensors is missing"),
        "{}",
        text(&o)
    );
}

#[test]
fn both_layouts_of_one_name_are_refused_and_convert_leaves_only_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let v1 = tmp.path().join("v1.safetensors");
    model(&v1, 6, 250_000, 0);
    let ckpt = tmp.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let out = ckpt.join("model.safetensors");
    ok(&["convert", s(&v1), s(&out), "--shard-size", "2MB"]);
    std::fs::copy(&v1, &out).unwrap();
    let o = run(&["inspect", s(&ckpt)]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("model.safetensors and model.safetensors.index.json"),
        "{}",
        text(&o)
    );
    // Either one by its path is read.
    ok(&["inspect", s(&out)]);
    ok(&["inspect", s(&ckpt.join("model.safetensors.index.json"))]);
    // A single-file rewrite removes the sharded layout; a sharded one the single file.
    ok(&["convert", s(&v1), s(&out)]);
    let names: Vec<String> = listing(&ckpt).into_keys().collect();
    assert_eq!(names, ["model.safetensors"]);
    ok(&["convert", s(&v1), s(&out), "--shard-size", "2MB"]);
    let names: Vec<String> = listing(&ckpt).into_keys().collect();
    assert!(
        !names.contains(&"model.safetensors".to_string()),
        "{names:?}"
    );
    ok(&["inspect", s(&ckpt)]);
}

/// Sends `sig` to a sharded rewrite once its first temporary shard appears; the old
/// checkpoint must come through whole.
fn interrupted_rewrite_keeps_the_old_checkpoint(sig: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (
        tmp.path().join("v1.safetensors"),
        tmp.path().join("v2.safetensors"),
    );
    model(&v1, 8, 250_000, 0);
    // Large enough that the cast takes a while: 64 tensors of 4 MB.
    model(&v2, 64, 1_000_000, 3);
    let ckpt = tmp.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let out = ckpt.join("model.safetensors");
    ok(&["convert", s(&v1), s(&out), "--shard-size", "2MB"]);
    let before = listing(&ckpt);
    let mut child = bin()
        .args([
            "convert",
            s(&v2),
            s(&out),
            "--shard-size",
            "20MB",
            "--dtype",
            "BF16",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let temp = std::fs::read_dir(&ckpt)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".model-"));
        if temp {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no temporary shard appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before the signal"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    unsafe { libc::kill(child.id() as i32, sig) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + sig), "{}", text(&o));
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    let after = listing(&ckpt);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    assert!(after == before, "the old checkpoint changed");
    ok(&["validate", s(&ckpt)]);
}

#[test]
fn a_rewrite_interrupted_by_sigint_keeps_the_old_checkpoint() {
    interrupted_rewrite_keeps_the_old_checkpoint(libc::SIGINT);
}

#[test]
fn a_rewrite_interrupted_by_sigterm_keeps_the_old_checkpoint() {
    interrupted_rewrite_keeps_the_old_checkpoint(libc::SIGTERM);
}
