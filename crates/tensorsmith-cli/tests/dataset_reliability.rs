//! `dataset write` killed (SIGKILL) at random points: the folder always holds a dataset that
//! verifies, either the previous one or the complete new one (its manifest is the commit
//! point); what a killed writer leaves (a staging folder, shards renamed in before the
//! manifest) is removed by the next write. Batch mode, and KV mode (streamed shards, lastWin
//! duplicates resolved after the tasks). Quick by default; `TS_RELIABILITY_KILLS=N` sets the
//! number of kills (default 12).

use arrow_array::builder::{Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tensorsmith_dataset::{verify, Manifest};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
}

/// An Arrow IPC file: `rows` samples of 4096 f32 each, values from `seed`; with `keys`, a
/// key column `id` too (`s{row}`, except that every 100th row repeats the key 50 rows back).
fn write_input(path: &Path, rows: usize, seed: u32, keys: bool) {
    let mut fields = vec![Field::new(
        "v",
        DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
        false,
    )];
    if keys {
        fields.push(Field::new("id", DataType::Utf8, false));
    }
    let schema = Arc::new(Schema::new(fields));
    let f = std::fs::File::create(path).unwrap();
    let mut w = arrow_ipc::writer::FileWriter::try_new(f, &schema).unwrap();
    for chunk in 0..rows / 256 {
        let mut b = ListBuilder::new(Float32Builder::new());
        let mut k = StringBuilder::new();
        for r in 0..256 {
            let row = chunk * 256 + r;
            let key = if row % 100 == 99 { row - 50 } else { row };
            k.append_value(format!("s{key}"));
            for j in 0..4096u32 {
                b.values()
                    .append_value(((chunk * 256 + r) as u32 * 31 + j + seed) as f32);
            }
            b.append(true);
        }
        let mut cols = vec![Arc::new(b.finish()) as ArrayRef];
        if keys {
            cols.push(Arc::new(k.finish()));
        }
        let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
        w.write(&batch).unwrap();
    }
    w.finish().unwrap();
}

fn kill_count() -> usize {
    std::env::var("TS_RELIABILITY_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

fn problems_other_than_strays(dir: &Path) -> Vec<String> {
    verify(dir)
        .unwrap()
        .problems
        .into_iter()
        // A kill after the commit point leaves the layout's entry files one version behind
        // (the old dataset, whole) until the next commit or `verify --repair`.
        .filter(|p| !p.contains("verify --repair"))
        .collect()
}

#[test]
fn dataset_write_killed_at_random_points_leaves_old_or_new_dataset() {
    killed_writes(false, &["--batch-size", "128"], 2048);
}

#[test]
fn kv_dataset_write_killed_at_random_points_leaves_old_or_new_dataset() {
    // 2048 rows, 20 of them repeating an earlier key: lastWin keeps 2028 tensors.
    killed_writes(
        true,
        &["--name-col", "id", "--duplicates-strategy", "lastWin"],
        2028,
    );
}

/// Kills `dataset write` with `args` (after an old dataset of 256 rows, a new one of 2048
/// rows, which commits `new_samples` samples) at random points.
fn killed_writes(keys: bool, args: &[&str], new_samples: u64) {
    let dir = tempfile::tempdir().unwrap();
    let (old_in, new_in) = (dir.path().join("old.arrow"), dir.path().join("new.arrow"));
    write_input(&old_in, 256, 1, keys);
    write_input(&new_in, 2048, 2, keys); // 32 MiB of F32
    let out = dir.path().join("ds");
    let write = |input: &Path| {
        let mut c = bin();
        c.args(["dataset", "write"])
            .arg(input)
            .arg(&out)
            .args(args)
            .args(["--dtype", "F32", "--mode", "overwrite", "--generate-index"]);
        c
    };
    let o = write(&old_in).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let old = Manifest::read(&out).unwrap();
    let t = Instant::now();
    let o = write(&new_in).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let full = t.elapsed();
    assert_eq!(Manifest::read(&out).unwrap().total_samples, new_samples);

    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let (mut saw_old, mut saw_new) = (0, 0);
    for round in 0..kill_count() {
        // Every other round starts from the old dataset.
        if round % 2 == 0 {
            let o = write(&old_in).output().unwrap();
            assert!(o.status.success());
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % (full.as_micros() as u64 * 6 / 5).max(1));
        let mut child = write(&new_in)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().unwrap();
        let entry = Manifest::read(&out).expect("a manifest is always there");
        assert!(
            [old.total_samples, new_samples].contains(&entry.total_samples),
            "round {round}: dataset_manifest.json of {} samples",
            entry.total_samples
        );
        let m = tensorsmith_dataset::Snapshot::current(&out)
            .unwrap()
            .expect("a version")
            .version
            .manifest;
        assert!(
            m.total_samples == old.total_samples || m.total_samples == new_samples,
            "round {round}, killed after {delay:?}: {} samples",
            m.total_samples
        );
        if m.total_samples == new_samples {
            saw_new += 1;
        } else {
            saw_old += 1;
        }
        let p = problems_other_than_strays(&out);
        assert!(p.is_empty(), "round {round}, killed after {delay:?}: {p:?}");
    }
    eprintln!(
        "{} kills over {full:?}: old {saw_old}, new {saw_new}",
        kill_count()
    );
    // A complete write leaves nothing behind: no stray shard, no staging folder.
    let o = write(&new_in).output().unwrap();
    assert!(o.status.success());
    let r = verify(&out).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with('_') && n != "_tensor_index.parquet" && n != "_tensorsmith"
                || n.starts_with('.')
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
