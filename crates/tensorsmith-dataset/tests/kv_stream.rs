//! KV writes stream their input and resolve duplicate keys afterwards, from the tasks' key
//! lists. What they commit must be byte for byte what the former implementation (a pass over
//! the key column first, superseded tensors never written) committed: the summaries pinned
//! below (each shard's bytes by task and number, the manifest with shard uuids cut out, the
//! index) were taken from that implementation's `tensorsmith dataset write` (main at
//! 077c50b) on the same Parquet inputs. With `TS_OLD_BIN=<that binary>` the test runs it
//! and compares live as well.
//!
//! Rows hold 256 KiB (65,536 f32), so a 50 MiB shard is 200 rows: 500 rows make three
//! shards, and a repeated key can sit in the shard being filled or in an earlier one.

#[path = "support/shards.rs"]
mod shards;

use arrow_array::builder::{Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use shards::shard_contents;
use std::path::Path;
use std::sync::Arc;
use tensorsmith::digest::{compute, spell, DigestKind};
use tensorsmith::dtype::DType;
use tensorsmith_dataset::{
    tensor_index_file, write_dataset, Duplicates, Input, JobOptions, Progress, WriteMode,
    WriteOptions,
};

const VALUES: usize = 65536;
const ROWS: usize = 500;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
            true,
        ),
        Field::new("id", DataType::Utf8, false),
    ]))
}

/// Row `i` is keyed `k{i}` unless `renamed` gives it another key; its values are
/// `i * 1e5 + j`.
fn write_input(path: &Path, renamed: &[(usize, usize)]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, schema(), None).unwrap();
    for start in (0..ROWS).step_by(50) {
        let mut v = ListBuilder::new(Float32Builder::new());
        let mut k = StringBuilder::new();
        for i in start..start + 50 {
            for j in 0..VALUES {
                v.values().append_value((i * 100_000 + j) as f32);
            }
            v.append(true);
            let key = renamed.iter().find(|r| r.0 == i).map_or(i, |r| r.1);
            k.append_value(format!("k{key}"));
        }
        let cols: Vec<ArrayRef> = vec![Arc::new(v.finish()), Arc::new(k.finish())];
        w.write(&RecordBatch::try_new(schema(), cols).unwrap())
            .unwrap();
    }
    w.close().unwrap();
}

fn opts(dup: Duplicates) -> WriteOptions {
    let mut o = WriteOptions::kv("id");
    o.duplicates = dup;
    o.target_shard_size_mb = 50;
    o.generate_index = true;
    o.dtype = Some(DType::F32);
    o
}

/// Each shard's bytes (XXH3-64) by task and number, then the manifest and the index with
/// shard uuids cut out: what two writes of the same input must agree on.
fn summary(dir: &Path) -> String {
    let mut s = String::new();
    for (name, bytes) in shard_contents(dir) {
        s += &format!("{name} {}\n", spell(&compute(DigestKind::Xxh3, &bytes)));
    }
    let uuid_free = |text: &str| {
        // `part-TTTTT-NNNN-<36-char uuid>.safetensors` -> `part-TTTTT-NNNN`
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("part-") {
            out += &rest[..at + 15];
            rest = &rest[at + 15 + 37..];
        }
        out + rest
    };
    let manifest = std::fs::read_to_string(dir.join("dataset_manifest.json")).unwrap();
    s += &format!(
        "manifest {}\n",
        spell(&compute(DigestKind::Xxh3, uuid_free(&manifest).as_bytes()))
    );
    let mut keys: Vec<String> = tensor_index_file::read(&dir.join("_tensor_index.parquet"))
        .unwrap()
        .into_iter()
        .map(|e| {
            let f = &e.file_name[..15];
            format!("{} {f} {:?} {}\n", e.tensor_key, e.shape, e.dtype)
        })
        .collect();
    keys.sort();
    let listed: String = keys.concat();
    s += &format!(
        "index {}\n",
        spell(&compute(DigestKind::Xxh3, listed.as_bytes()))
    );
    s
}

/// Writes `input` with `threads` tasks; the error text if it fails.
fn write(input: &Path, out: &Path, o: &WriteOptions, threads: usize) -> Result<String, String> {
    let job = JobOptions::new()
        .with_mode(WriteMode::ErrorIfExists)
        .with_threads(threads);
    let input = Input::open(&[input.to_path_buf()]).unwrap();
    write_dataset(&input, out, o, &job, &Progress::default())
        .map(|_| summary(out))
        .map_err(|e| e.to_string())
}

/// The former implementation, when `TS_OLD_BIN` names its binary.
fn old(input: &Path, out: &Path, dup: &str, threads: usize) -> Option<Result<String, String>> {
    let bin = std::env::var_os("TS_OLD_BIN")?;
    let o = std::process::Command::new(bin)
        .args(["dataset", "write"])
        .arg(input)
        .arg(out)
        .args([
            "--name-col",
            "id",
            "--dtype",
            "F32",
            "--target-shard-size-mb",
            "50",
        ])
        .args(["--generate-index", "--duplicates-strategy", dup])
        .args(["--threads", &threads.to_string()])
        .output()
        .unwrap();
    Some(match o.status.success() {
        true => Ok(summary(out)),
        false => Err(String::from_utf8_lossy(&o.stderr).into_owned()),
    })
}

/// Writes the input with rows `renamed` both ways (when the old binary is at hand) and
/// checks the new write against `want` (a pinned summary or error).
fn case(renamed: &[(usize, usize)], dup: Duplicates, threads: usize, want: Result<&str, &str>) {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.parquet");
    write_input(&input, renamed);
    let got = write(&input, &tmp.path().join("new"), &opts(dup), threads);
    let name = match dup {
        Duplicates::Fail => "fail",
        Duplicates::LastWin => "lastWin",
    };
    if let Some(old) = old(&input, &tmp.path().join("old"), name, threads) {
        match (&old, &got) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "the former implementation wrote\n{a}"),
            (Err(a), Err(b)) => assert!(a.contains(b.as_str()), "{a}\n{b}"),
            _ => panic!("former: {old:?}\nnow: {got:?}"),
        }
    }
    match (want, got) {
        (Ok(w), Ok(g)) => assert_eq!(w, g, "now:\n{g}"),
        (Err(w), Err(g)) => assert!(g.contains(w), "{g}"),
        (w, g) => panic!("want {w:?}\ngot {g:?}"),
    }
}

#[test]
fn no_duplicates_three_shards() {
    case(&[], Duplicates::Fail, 1, Ok(PINNED_PLAIN));
}

/// Row 150 repeats row 10's key in the shard being filled; row 300 repeats row 20's (an
/// earlier shard); row 450 repeats row 250's (the previous shard).
const LAST_WIN: &[(usize, usize)] = &[(150, 10), (300, 20), (450, 250)];

#[test]
fn last_win_within_and_across_shards() {
    case(LAST_WIN, Duplicates::LastWin, 1, Ok(PINNED_LAST_WIN_1));
}

#[test]
fn last_win_across_the_tasks_of_one_write() {
    // Tasks 0..250 and 250..500: row 300 supersedes row 20 of the other task.
    case(LAST_WIN, Duplicates::LastWin, 2, Ok(PINNED_LAST_WIN_2));
}

#[test]
fn fail_names_the_first_repeat_within_a_shard() {
    case(
        LAST_WIN,
        Duplicates::Fail,
        1,
        Err("duplicate tensor key 'k10__v' (rows 10 and 150)"),
    );
}

#[test]
fn fail_names_a_repeat_across_shards_before_a_later_one_within_a_shard() {
    // Row 250 repeats row 5 (shard 0; seen only from the key lists), row 260 repeats row
    // 255 in the shard being filled (where the task stops): row 250 comes first.
    case(
        &[(250, 5), (260, 255)],
        Duplicates::Fail,
        1,
        Err("duplicate tensor key 'k5__v' (rows 5 and 250)"),
    );
}

#[test]
fn fail_across_tasks_before_a_repeat_within_the_later_task() {
    // Tasks 0..250 and 250..500: row 300 repeats row 20 (the other task), row 320 repeats
    // row 310 within the second task's shard: row 300 comes first.
    case(
        &[(300, 20), (320, 310)],
        Duplicates::Fail,
        2,
        Err("duplicate tensor key 'k20__v' (rows 20 and 300)"),
    );
}

const PINNED_PLAIN: &str = "\
part-00000-0000 xxh3:2c8a23b83a83f44f
part-00000-0001 xxh3:8e2ee649cc919c8b
part-00000-0002 xxh3:bdb27e808044d7ff
manifest xxh3:5186d284cdfe4928
index xxh3:9ab8a862620471c3
";
const PINNED_LAST_WIN_1: &str = "\
part-00000-0000 xxh3:480c6216164a3f8b
part-00000-0001 xxh3:34684d11973990e3
part-00000-0002 xxh3:610e4999a0029ce2
manifest xxh3:b0739bb00ca6077d
index xxh3:49d8d8dea60b5df6
";
const PINNED_LAST_WIN_2: &str = "\
part-00000-0000 xxh3:480c6216164a3f8b
part-00000-0001 xxh3:f85a27e0ba06d25e
part-00001-0000 xxh3:da7f8bf6b155d3b7
part-00001-0001 xxh3:f42df2bee64e8ee1
manifest xxh3:86d621a394fc79bf
index xxh3:9686f0d79940d837
";
