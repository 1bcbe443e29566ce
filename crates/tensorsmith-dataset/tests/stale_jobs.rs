//! Staging folders of dead writers: a marker with a heartbeat in every staging folder, `clean`
//! removing those whose heartbeat is older than a limit (and so does the next commit),
//! `verify` reporting them, and a live job's folder never touched while a clean runs beside it.

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tensorsmith::dtype::DType;
use tensorsmith_dataset::{
    clean, commit_job, start_job, verify_with, write_dataset, write_task, Dataset, Input,
    JobOptions, Progress, WriteMode, WriteOptions,
};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "v",
        DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
        true,
    )]))
}

/// Rows `rows`, each `[i, i, i]`, in memory.
fn input(rows: std::ops::Range<usize>) -> Input {
    let mut v = ListBuilder::new(Float32Builder::new());
    for i in rows {
        for _ in 0..3 {
            v.values().append_value(i as f32);
        }
        v.append(true);
    }
    let b = RecordBatch::try_new(schema(), vec![Arc::new(v.finish()) as ArrayRef]).unwrap();
    Input::from_batches(schema(), vec![b]).unwrap()
}

fn opts() -> WriteOptions {
    let mut o = WriteOptions::batch(4);
    o.dtype = Some(DType::F32);
    o
}

/// A staging folder of a writer that stopped `ago`, with a shard in it; its marker says so
/// (`marker`), or, without one, only its files' times do.
fn dead_folder(dir: &Path, name: &str, ago: Duration, marker: bool) {
    let f = dir.join(name);
    std::fs::create_dir_all(&f).unwrap();
    std::fs::write(f.join("part-00000-0000-x.safetensors"), b"junk").unwrap();
    let then = SystemTime::now() - ago;
    if marker {
        let ms = then.duration_since(UNIX_EPOCH).unwrap().as_millis();
        std::fs::write(
            f.join("_tensorsmith_heartbeat.json"),
            format!("{{\"started_ms\": {ms}, \"heartbeat_ms\": {ms}}}"),
        )
        .unwrap();
    }
    for p in std::fs::read_dir(&f).unwrap().flatten() {
        std::fs::File::open(p.path())
            .unwrap()
            .set_modified(then)
            .unwrap();
    }
    std::fs::File::open(&f).unwrap().set_modified(then).unwrap();
}

#[test]
fn a_live_job_beside_a_clean_is_never_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = opts();
    // The driver starts the job; its heartbeat is renewed every 50 ms.
    let beat = start_job(dir, "live", Duration::from_millis(50)).unwrap();
    dead_folder(
        dir,
        "_tensorsmith_job-dead",
        Duration::from_secs(3600),
        true,
    );
    dead_folder(
        dir,
        "_tensorsmith_job-legacy",
        Duration::from_secs(3600),
        false,
    );
    let mut reports = Vec::new();
    for t in 0..4u64 {
        let rows = (t as usize * 8)..(t as usize * 8 + 8);
        reports.push(write_task(&input(rows), dir, "live", t, &o, &Progress::default()).unwrap());
        // Slower than the clean's limit between tasks: only the heartbeat keeps the folder.
        // The limit is 20 heartbeats, so that a loaded machine (a busy CI runner stalled the
        // heartbeat thread past a 200 ms limit once) cannot fail a live job.
        std::thread::sleep(Duration::from_millis(1500));
        let removed = clean(dir, Duration::from_millis(1000)).unwrap().staging;
        assert!(
            removed
                .iter()
                .all(|p| !p.ends_with("_tensorsmith_job-live")),
            "{removed:?}"
        );
        if t == 0 {
            let mut names: Vec<_> = removed
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            names.sort();
            assert_eq!(names, ["_tensorsmith_job-dead", "_tensorsmith_job-legacy"]);
        }
    }
    let m = commit_job(dir, "live", reports, &o, WriteMode::ErrorIfExists).unwrap();
    drop(beat);
    assert_eq!(m.total_samples, 32);
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(
        ds.sample(31).unwrap()[0].1.data,
        [31f32.to_le_bytes(); 3].concat()
    );
    assert!(!dir.join("_tensorsmith_job-live").exists());
}

#[test]
fn a_local_write_keeps_its_heartbeat_while_a_clean_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cleaner = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut removed = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // 25 heartbeats: a scheduling stall on a loaded machine is not a dead job.
                if let Ok(r) = clean(&dir, Duration::from_millis(500)) {
                    removed.extend(r.staging);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            removed
        })
    };
    let job = JobOptions::new()
        .with_threads(2)
        .with_heartbeat(Duration::from_millis(20));
    for round in 0..5 {
        let mode = if round == 0 {
            WriteMode::ErrorIfExists
        } else {
            WriteMode::Append
        };
        write_dataset(
            &input(0..64),
            &dir,
            &opts(),
            &job.clone().with_mode(mode),
            &Progress::default(),
        )
        .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(cleaner.join().unwrap(), Vec::<std::path::PathBuf>::new());
    assert_eq!(
        Dataset::open(&dir).unwrap().manifest().total_samples,
        5 * 64
    );
}

#[test]
fn the_next_commit_and_verify_see_stale_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_dataset(
        &input(0..8),
        dir,
        &opts(),
        &JobOptions::new(),
        &Progress::default(),
    )
    .unwrap();
    dead_folder(
        dir,
        "_tensorsmith_job-old",
        Duration::from_secs(30 * 3600),
        true,
    );
    dead_folder(
        dir,
        "_tensorsmith_job-young",
        Duration::from_secs(3600),
        true,
    );
    let r = verify_with(dir, Duration::from_secs(24 * 3600)).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].starts_with(
            "_tensorsmith_job-old: the staging folder of a writer that stopped 1d 6h ago"
        ),
        "{:?}",
        r.problems
    );
    assert!(verify_with(dir, Duration::from_secs(48 * 3600))
        .unwrap()
        .is_ok());
    // The next commit to the dataset removes what is older than a day, and only that.
    let job = JobOptions::new().with_mode(WriteMode::Append);
    write_dataset(&input(8..16), dir, &opts(), &job, &Progress::default()).unwrap();
    assert!(!dir.join("_tensorsmith_job-old").exists());
    assert!(dir.join("_tensorsmith_job-young").exists());
}

#[test]
fn clean_refuses_a_folder_that_is_not_a_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), b"x").unwrap();
    let e = clean(tmp.path(), Duration::ZERO).unwrap_err().to_string();
    assert!(
        e.contains("not a dataset folder") && e.contains("dataset_manifest.json"),
        "{e}"
    );
    let e = clean(&tmp.path().join("nope"), Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such directory"), "{e}");
    assert!(tmp.path().join("notes.txt").exists());
}

#[test]
fn a_write_spares_a_live_writers_staging_folder_on_another_machine() {
    // A dataset folder shared by machines (NFS): a writer's process id means something only
    // on the machine it runs on, which its staging folder's name carries.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let job = JobOptions::new();
    write_dataset(&input(0..8), dir, &opts(), &job, &Progress::default()).unwrap();
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    // Each named with a process id that runs on no machine here.
    let live = "_tensorsmith_staging-4000000000-a@another-machine";
    let killed_here = format!("_tensorsmith_staging-4000000000-b@{here}");
    let still_elsewhere = "_tensorsmith_staging-4000000000-c@another-machine";
    dead_folder(dir, live, Duration::ZERO, true);
    dead_folder(dir, &killed_here, Duration::ZERO, true);
    dead_folder(dir, still_elsewhere, Duration::from_secs(3600), true);
    let append = job.with_mode(WriteMode::Append);
    write_dataset(&input(8..16), dir, &opts(), &append, &Progress::default()).unwrap();
    assert!(dir
        .join(live)
        .join("part-00000-0000-x.safetensors")
        .exists());
    assert!(!dir.join(killed_here).exists());
    assert!(!dir.join(still_elsewhere).exists());
}
