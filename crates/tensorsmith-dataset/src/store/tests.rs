//! The object-store protocol (store_commit.rs, store_clean.rs, store_verify.rs) run on the
//! local store: what it writes is the local layout (read back by the local reader and
//! verify), appends and overwrites make versions, retired shards stay until clean, racing
//! writers each commit a version of their own (none lost), and verify reports damage. The
//! same protocol against an S3 server: crates/tensorsmith-cli/tests/dataset_s3_cli.rs.

use crate::options::WriteOptions;
use crate::store::clean::clean_store;
use crate::store::local::LocalStore;
use crate::store::seam::Store;
use crate::store::verify::verify_store;
use crate::store::versions as sv;
use crate::store::write;
use crate::write::job_options::{JobOptions, Progress, WriteMode};

/// A write into `store` and the clean after it, as `write_dataset_to` runs them.
fn write_to_store(
    input: &Input,
    store: &dyn Store,
    o: &WriteOptions,
    job: &JobOptions,
    progress: &Progress,
) -> crate::Result<Manifest> {
    let m = write::write_to_store(input, store, None, o, job, progress)?;
    let _ = crate::store::clean::clean_store(store, job.retain());
    Ok(m)
}
use crate::{Dataset, DatasetError, Input, Manifest};
use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;
use std::time::Duration;
use tensorsmith::dtype::DType;

fn input(rows: std::ops::Range<usize>) -> Input {
    let mut v = ListBuilder::new(Float32Builder::new());
    for i in rows {
        for j in 0..3 {
            v.values().append_value((i * 10 + j) as f32);
        }
        v.append(true);
    }
    let schema = Arc::new(Schema::new(vec![Field::new(
        "v",
        DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
        true,
    )]));
    let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(v.finish()) as ArrayRef]).unwrap();
    Input::from_batches(schema, vec![b]).unwrap()
}

fn opts() -> WriteOptions {
    let mut o = WriteOptions::batch(4);
    o.dtype = Some(DType::F32);
    o.generate_index = true;
    o
}

fn write(
    store: &dyn Store,
    rows: std::ops::Range<usize>,
    mode: WriteMode,
) -> crate::Result<Manifest> {
    let job = JobOptions::new().with_mode(mode).with_threads(2);
    write_to_store(&input(rows), store, &opts(), &job, &Progress::default())
}

#[test]
fn the_store_protocol_writes_the_local_layout() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    let m = write(&store, 0..11, WriteMode::ErrorIfExists).unwrap();
    assert_eq!(m.total_samples, 11);
    assert_eq!(sv::list(&store).unwrap().len(), 1);
    let ds = Dataset::open(d.path()).unwrap();
    assert_eq!(ds.len().unwrap(), 11);
    let s = ds.sample(9).unwrap();
    assert_eq!(&s[0].1.data[..4], &90f32.to_le_bytes());
    assert!(crate::verify(d.path()).unwrap().is_ok());
    assert!(verify_store(&store, None).unwrap().is_ok());
    let e = write(&store, 0..3, WriteMode::ErrorIfExists).unwrap_err();
    assert!(matches!(e, DatasetError::Exists(_)), "{e}");
}

#[test]
fn appends_and_overwrites_make_versions_and_clean_takes_retired_shards() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    let first = write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
    let both = write(&store, 8..12, WriteMode::Append).unwrap();
    assert_eq!(both.total_samples, 12);
    assert!(verify_store(&store, None).unwrap().is_ok());
    let over = write(&store, 100..104, WriteMode::Overwrite).unwrap();
    assert_eq!(over.total_samples, 4);
    let (versions, retired) = sv::info(&store).unwrap();
    assert_eq!(versions.len(), 3);
    assert_eq!(retired.len(), both.shards.len());
    // Version 2 still reads, from its retired shards.
    assert_eq!(sv::at(&store, 2).unwrap().manifest(), &both);
    for s in &first.shards {
        assert!(d.path().join(&s.shard_path).exists());
    }
    let r = clean_store(&store, Duration::ZERO).unwrap();
    assert_eq!(r.versions, vec![1, 2]);
    assert_eq!(r.shards.len(), both.shards.len());
    for s in &both.shards {
        assert!(!d.path().join(&s.shard_path).exists());
    }
    let e = sv::at(&store, 2).unwrap_err();
    assert!(matches!(e, DatasetError::VersionRemoved { .. }), "{e}");
    assert!(verify_store(&store, None).unwrap().is_ok());
    assert_eq!(Dataset::open(d.path()).unwrap().len().unwrap(), 4);
}

#[test]
fn racing_writers_each_commit_a_version_of_their_own() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    write(&store, 0..4, WriteMode::ErrorIfExists).unwrap();
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let store = &store;
                s.spawn(move || write(store, 100 * (i + 1)..100 * (i + 1) + 4, WriteMode::Append))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = results.iter().filter(|r| r.is_ok()).count();
    for r in &results {
        if let Err(e) = r {
            assert!(matches!(e, DatasetError::Conflict { .. }), "{e}");
        }
    }
    let list = sv::list(&store).unwrap();
    assert_eq!(list.len(), 1 + ok);
    let current = sv::current(&store).unwrap().unwrap();
    assert_eq!(current.manifest().total_samples, 4 + 4 * ok as u64);
    assert!(verify_store(&store, None).unwrap().is_ok());
}

#[test]
fn verify_reports_a_missing_shard_and_a_stray() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    let m = write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
    std::fs::remove_file(d.path().join(&m.shards[0].shard_path)).unwrap();
    std::fs::write(
        d.path()
            .join("part-00009-0000-00000000-0000-0000-0000-000000000000.safetensors"),
        b"x",
    )
    .unwrap();
    let r = verify_store(&store, None).unwrap();
    let text = r.problems.join("\n");
    assert!(text.contains("missing"), "{text}");
    // The stray is noted, not counted against the dataset.
    assert!(!text.contains("no version lists"), "{text}");
    assert!(
        r.notes.join("\n").contains("no version lists"),
        "{:?}",
        r.notes
    );
    // A fresh unlisted shard may be a live writer's: clean keeps it.
    let c = clean_store(&store, Duration::ZERO).unwrap();
    assert!(c.shards.is_empty(), "{:?}", c.shards);
}

#[test]
fn batch_shards_leave_staging_while_the_tasks_write() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    // 100 shards of 4 samples by 2 tasks, one upload thread (the local store's concurrency).
    let m = write(&store, 0..400, WriteMode::ErrorIfExists).unwrap();
    assert_eq!(m.shards.len(), 100);
    let peak = store.staged_peak.load(std::sync::atomic::Ordering::Relaxed);
    // At most: one being written per task, one queued and one in flight per upload thread
    // (the one being uploaded counted).
    assert!(peak <= 2 + 2, "{peak} shards in staging at once");
    assert!(verify_store(&store, None).unwrap().is_ok());
    assert_eq!(Dataset::open(d.path()).unwrap().len().unwrap(), 400);
}

#[test]
fn a_failed_upload_leaves_no_shard_and_no_version() {
    for (mode, fail_in) in [(WriteMode::ErrorIfExists, 5), (WriteMode::Append, 0)] {
        let d = tempfile::tempdir().unwrap();
        let store = LocalStore::new(d.path());
        if mode == WriteMode::Append {
            write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
        }
        let before = store.list("").unwrap().len();
        store
            .fail_in
            .store(fail_in, std::sync::atomic::Ordering::Relaxed);
        let e = write(&store, 0..40, mode).unwrap_err();
        assert!(e.to_string().contains("injected upload failure"), "{e}");
        assert_eq!(store.list("").unwrap().len(), before);
    }
}

#[test]
fn a_dataset_written_before_versions_is_adopted_as_version_0() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    let first = write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
    // What safetensors-spark leaves: shards and a manifest, no versions, no index.
    std::fs::remove_dir_all(d.path().join("_tensorsmith")).unwrap();
    std::fs::remove_file(d.path().join(crate::manifest::INDEX_NAME)).unwrap();
    // An append asking for an index reads the old shards' headers for it.
    let m = write(&store, 8..12, WriteMode::Append).unwrap();
    assert_eq!(m.total_samples, 12);
    let list: Vec<u64> = sv::list(&store).unwrap().iter().map(|l| l.n).collect();
    assert_eq!(list, vec![0, 1]);
    assert_eq!(sv::at(&store, 0).unwrap().manifest(), &first);
    let snap = sv::current(&store).unwrap().unwrap();
    let indexed: std::collections::HashSet<String> = sv::index_entries(&store, &snap)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|e| e.file_name.to_string())
        .collect();
    assert_eq!(indexed.len(), m.shards.len());
    assert!(verify_store(&store, None).unwrap().is_ok());
}

#[test]
fn a_writer_that_looked_before_a_newer_commit_never_puts_its_manifest_over_it() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    write(&store, 0..4, WriteMode::ErrorIfExists).unwrap();
    write(&store, 4..8, WriteMode::Append).unwrap();
    let v2 = sv::read(&store, 2).unwrap();
    // Writer A mirrors version 2: it reads the manifest, sees no newer version, and then
    // writer B commits version 3 (and mirrors its manifest) before A writes.
    let dir = d.path().to_path_buf();
    *store.after_versions_listed.lock().unwrap() = Some(Box::new(move || {
        let b = LocalStore::new(&dir);
        assert_eq!(
            write(&b, 8..12, WriteMode::Append).unwrap().total_samples,
            12
        );
    }));
    crate::store::commit::mirror_entry_files(&store, &v2, None).unwrap();
    assert!(
        store.after_versions_listed.lock().unwrap().is_none(),
        "B wrote"
    );
    let m = Manifest::read(d.path()).unwrap();
    assert_eq!(m.total_samples, 12, "version 3's manifest stands");
    assert_eq!(sv::current(&store).unwrap().unwrap().version.version, 3);
}

#[test]
fn clean_takes_only_writer_named_shards_for_abandoned_never_a_users_or_listed_file() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
    let age = |name: &str| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.path().join(name))
            .unwrap();
        f.set_modified(old).unwrap();
    };
    let users = [
        "part-0.safetensors",
        "part-00001-of-00002.safetensors",
        "part-00000-0000-mine.safetensors",
    ];
    for n in users {
        std::fs::write(d.path().join(n), b"the user's").unwrap();
        age(n);
    }
    let abandoned = "part-00009-0000-00000000-0000-0000-0000-000000000000.safetensors";
    std::fs::write(d.path().join(abandoned), b"x").unwrap();
    age(abandoned);
    let c = clean_store(&store, Duration::ZERO).unwrap();
    let removed: Vec<&str> = c.shards.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(removed, [abandoned]);
    for n in users {
        assert!(d.path().join(n).exists(), "{n}");
    }
}

#[test]
fn writer_shard_names_are_told_from_a_users() {
    use crate::write::shard_record::is_writer_shard_name as w;
    assert!(w(
        "part-00003-0012-550e8400-e29b-41d4-a716-446655440000.safetensors"
    ));
    assert!(!w("part-0.safetensors"));
    assert!(!w("part-00001-of-00002.safetensors"));
    assert!(!w("part-00000-0000-mine.safetensors"));
    assert!(!w(
        "part-00003-0012-550e8400-e29b-41d4-a716-446655440000.bin"
    ));
}

/// What safetensors-spark does to append through s3a: a new shard under its naming, the
/// manifest rewritten over old and new (its own spelling). Returns the new shard's name.
fn connector_append(root: &std::path::Path) -> String {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("dataset_manifest.json")).unwrap())
            .unwrap();
    let first = m["shards"][0]["shard_path"].as_str().unwrap().to_string();
    let name = "part-00000-0000-550e8400-e29b-41d4-a716-446655440000.safetensors".to_string();
    std::fs::copy(root.join(&first), root.join(&name)).unwrap();
    let bytes = std::fs::metadata(root.join(&name)).unwrap().len();
    let samples = m["shards"][0]["samples_count"].as_u64().unwrap();
    let mut shards = m["shards"].as_array().unwrap().clone();
    shards.push(serde_json::json!({"shard_path": name, "samples_count": samples, "bytes": bytes}));
    let manifest = serde_json::json!({
        "format_version": "1.0", "safetensors_version": "1.0",
        "total_samples": shards.iter().map(|s| s["samples_count"].as_u64().unwrap()).sum::<u64>(),
        "total_bytes": shards.iter().map(|s| s["bytes"].as_u64().unwrap()).sum::<u64>(),
        "shards": shards, "schema": m["schema"],
    });
    std::fs::write(
        root.join("dataset_manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    name
}

#[test]
fn another_writers_manifest_on_a_store_is_refused_by_readers_and_adopted_by_writers() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
    let theirs = connector_append(d.path());
    let e = sv::current_checked(&store).unwrap_err();
    assert!(
        matches!(e, DatasetError::Conflict { .. }) && e.to_string().contains(&theirs),
        "{e}"
    );
    assert!(e.to_string().contains("dataset adopt"), "{e}");
    let r = verify_store(&store, None).unwrap();
    let text = r.problems.join("\n");
    assert!(
        text.contains(&theirs) && text.contains("dataset adopt"),
        "{text}"
    );
    assert!(!text.contains("dataset clean"), "{text}");
    assert!(clean_store(&store, Duration::ZERO).is_err());
    // A write adopts it first: nothing the manifest lists is dropped.
    let m = write(&store, 0..4, WriteMode::Append).unwrap();
    assert_eq!(m.total_samples, 8 + 4 + 4);
    assert!(m.shards.iter().any(|s| s.shard_path == theirs));
    assert!(verify_store(&store, None).unwrap().is_ok());
}

#[test]
fn adopt_on_a_store_checks_each_new_shard() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
    let theirs = connector_append(d.path());
    std::fs::write(d.path().join(&theirs), b"not a shard").unwrap();
    let e = crate::store::adopt::adopt_store(&store).unwrap_err();
    assert!(e.to_string().contains("not adopted"), "{e}");
    let bytes = std::fs::read(d.path().join(m_first(d.path()))).unwrap();
    std::fs::write(d.path().join(&theirs), bytes).unwrap();
    assert_eq!(crate::store::adopt::adopt_store(&store).unwrap(), Some(2));
    assert_eq!(crate::store::adopt::adopt_store(&store).unwrap(), None);
    assert_eq!(
        sv::current(&store)
            .unwrap()
            .unwrap()
            .manifest()
            .total_samples,
        12
    );
}

fn m_first(root: &std::path::Path) -> String {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("dataset_manifest.json")).unwrap())
            .unwrap();
    m["shards"][0]["shard_path"].as_str().unwrap().to_string()
}

/// The current version verifies with no problem and no note (no stray).
fn assert_whole(store: &dyn Store) {
    let r = verify_store(store, None).unwrap();
    assert!(
        r.is_ok() && r.notes.is_empty(),
        "{:?} {:?}",
        r.problems,
        r.notes
    );
}

/// Rows `ids` of a KV input: key `r{i}`, tensor `v` = `[base + i; 3]`.
fn kv_input(ids: std::ops::Range<usize>, base: f32) -> Input {
    let mut v = ListBuilder::new(Float32Builder::new());
    for i in ids.clone() {
        for _ in 0..3 {
            v.values().append_value(base + i as f32);
        }
        v.append(true);
    }
    let names: Vec<String> = ids.map(|i| format!("r{i}")).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
            true,
        ),
        Field::new("id", DataType::Utf8, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(v.finish()),
        Arc::new(arrow_array::StringArray::from(names)),
    ];
    let b = RecordBatch::try_new(schema.clone(), cols).unwrap();
    Input::from_batches(schema, vec![b]).unwrap()
}

fn kv_write(
    store: &dyn Store,
    input: &Input,
    index: bool,
    dups: crate::options::Duplicates,
    mode: WriteMode,
) -> crate::Result<Manifest> {
    let mut o = WriteOptions::kv("id");
    o.dtype = Some(DType::F32);
    o.generate_index = index;
    o.duplicates = dups;
    let job = JobOptions::new().with_mode(mode).with_threads(2);
    write_to_store(input, store, &o, &job, &Progress::default())
}

fn first_value(ds: &Dataset, key: &str) -> f32 {
    let t = ds.tensor(key).unwrap();
    f32::from_le_bytes(t.data[..4].try_into().unwrap())
}

#[test]
fn a_last_win_append_on_a_store_replaces_committed_keys_in_copies() {
    use crate::options::Duplicates;
    for index in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let store = LocalStore::new(d.path());
        let first = kv_write(
            &store,
            &kv_input(0..6, 0.0),
            index,
            Duplicates::LastWin,
            WriteMode::ErrorIfExists,
        )
        .unwrap();
        // Keys r4 and r5 are replaced (values 100 + i; r3 stays, in a copy of its shard), r6
        // and r7 are new.
        let m = kv_write(
            &store,
            &kv_input(4..8, 100.0),
            index,
            Duplicates::LastWin,
            WriteMode::Append,
        )
        .unwrap();
        let ds = Dataset::open(d.path()).unwrap();
        let mut keys = ds.tensor_keys().unwrap();
        keys.sort();
        let want: Vec<String> = (0..8).map(|i| format!("r{i}__v")).collect();
        assert_eq!(keys, want, "index {index}");
        for i in 0..8 {
            let v = if i < 4 { i as f32 } else { 100.0 + i as f32 };
            assert_eq!(
                first_value(&ds, &format!("r{i}__v")),
                v,
                "index {index}, r{i}"
            );
        }
        // Version 1 still reads its own values, from shards the append did not touch.
        let old = Dataset::open_version(d.path(), 1).unwrap();
        assert_eq!(first_value(&old, "r4__v"), 4.0);
        assert!(first
            .shards
            .iter()
            .all(|s| d.path().join(&s.shard_path).exists()));
        assert_whole(&store);
        // Only shards a version lists are in the store (no copy of a lost attempt).
        let listed: std::collections::HashSet<String> = first
            .shards
            .iter()
            .chain(&m.shards)
            .map(|s| s.shard_path.clone())
            .collect();
        for e in store.list("part-").unwrap() {
            assert!(listed.contains(&e.key), "{} is listed by no version", e.key);
        }
        // Duplicates=fail refuses a committed key.
        let e = kv_write(
            &store,
            &kv_input(0..1, 0.0),
            index,
            Duplicates::Fail,
            WriteMode::Append,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("'r0__v' is already in version 2"),
            "{e}"
        );
    }
}

#[test]
fn an_append_with_an_index_over_a_version_without_one_reads_the_headers() {
    use crate::options::Duplicates;
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    kv_write(
        &store,
        &kv_input(0..6, 0.0),
        false,
        Duplicates::Fail,
        WriteMode::ErrorIfExists,
    )
    .unwrap();
    kv_write(
        &store,
        &kv_input(6..9, 0.0),
        true,
        Duplicates::Fail,
        WriteMode::Append,
    )
    .unwrap();
    let snap = sv::current(&store).unwrap().unwrap();
    let mut keys: Vec<String> = sv::index_entries(&store, &snap)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|e| e.tensor_key)
        .collect();
    keys.sort();
    assert_eq!(keys, (0..9).map(|i| format!("r{i}__v")).collect::<Vec<_>>());
    let r = verify_store(&store, None).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

/// Arms `store`'s race hook: at the first listing of the versions after shards that are not
/// in `listed` are in the folder (a running write's, once uploaded), `act` runs on them.
fn when_unlisted(
    store: Arc<LocalStore>,
    listed: Vec<String>,
    act: impl FnOnce(&std::path::Path, Vec<std::path::PathBuf>) + Send + 'static,
) {
    let s = store.clone();
    *store.after_versions_listed.lock().unwrap() = Some(Box::new(move || {
        let theirs: Vec<std::path::PathBuf> = std::fs::read_dir(&s.dir)
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("part-") && !listed.contains(&n)
            })
            .map(|e| e.path())
            .collect();
        if theirs.is_empty() {
            return when_unlisted(s, listed, act);
        }
        act(&s.dir, theirs);
    }));
}

/// Another writer appending keys r10 and r11 to the dataset in `dir`.
fn other_writer_appends(dir: &std::path::Path, _: Vec<std::path::PathBuf>) {
    let other = LocalStore::new(dir);
    let dups = crate::options::Duplicates::LastWin;
    kv_write(
        &other,
        &kv_input(10..12, 0.0),
        true,
        dups,
        WriteMode::Append,
    )
    .unwrap();
}

#[test]
fn a_last_win_append_that_loses_the_race_removes_the_copies_of_its_attempt() {
    use crate::options::Duplicates;
    let d = tempfile::tempdir().unwrap();
    let store = Arc::new(LocalStore::new(d.path()));
    let first = kv_write(
        &*store,
        &kv_input(0..6, 0.0),
        true,
        Duplicates::LastWin,
        WriteMode::ErrorIfExists,
    )
    .unwrap();
    let listed = first.shards.iter().map(|s| s.shard_path.clone()).collect();
    when_unlisted(store.clone(), listed, other_writer_appends);
    let progress = Progress::default();
    let mut o = WriteOptions::kv("id");
    o.dtype = Some(DType::F32);
    o.generate_index = true;
    o.duplicates = Duplicates::LastWin;
    let job = JobOptions::new()
        .with_mode(WriteMode::Append)
        .with_threads(2);
    let m = write_to_store(&kv_input(4..8, 100.0), &*store, &o, &job, &progress).unwrap();
    assert!(
        store.after_versions_listed.lock().unwrap().is_none(),
        "the other writer wrote"
    );
    assert_eq!(
        progress
            .commit_retries
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(sv::current(&*store).unwrap().unwrap().version.version, 3);
    let ds = Dataset::open(d.path()).unwrap();
    assert_eq!(ds.tensor_keys().unwrap().len(), 10);
    assert_eq!(first_value(&ds, "r3__v"), 3.0);
    assert_eq!(first_value(&ds, "r4__v"), 104.0);
    assert_eq!(first_value(&ds, "r11__v"), 11.0);
    let mut listed = std::collections::HashSet::new();
    for v in 1..=3 {
        let snap = sv::at(&*store, v).unwrap();
        listed.extend(snap.manifest().shards.iter().map(|s| s.shard_path.clone()));
    }
    assert!(m.shards.iter().all(|s| listed.contains(&s.shard_path)));
    for e in store.list("part-").unwrap() {
        assert!(listed.contains(&e.key), "{} is listed by no version", e.key);
    }
    assert_whole(&*store);
}

#[test]
fn a_local_store_moves_a_finished_shard_in_by_renaming_it() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(&d.path().join("ds"));
    let staging = d.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    let from = staging.join("part-00000-0000-a.safetensors");
    std::fs::write(&from, b"shard bytes").unwrap();
    let inode = std::fs::metadata(&from).unwrap().ino();
    store.adopt("part-00000-0000-a.safetensors", &from).unwrap();
    assert!(!from.exists());
    let to = d.path().join("ds/part-00000-0000-a.safetensors");
    assert_eq!(
        std::fs::metadata(&to).unwrap().ino(),
        inode,
        "renamed, not copied"
    );
    assert_eq!(std::fs::read(&to).unwrap(), b"shard bytes");
    // A failed move leaves neither the staged file nor the object.
    std::fs::write(&from, b"other").unwrap();
    store.fail_in.store(0, std::sync::atomic::Ordering::Relaxed);
    assert!(store.adopt("part-00000-0000-b.safetensors", &from).is_err());
    assert!(!from.exists() && !d.path().join("ds/part-00000-0000-b.safetensors").exists());
}

#[test]
fn of_writers_replacing_one_local_object_as_they_read_it_one_wins() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    store.put("dataset_manifest.json", b"v0").unwrap();
    for round in 0..20 {
        let (seen, tag) = store.get_tagged("dataset_manifest.json").unwrap().unwrap();
        let tag = tag.unwrap();
        let barrier = std::sync::Barrier::new(8);
        let won: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let (store, barrier, tag) = (&store, &barrier, &tag);
                    s.spawn(move || {
                        // Each in its own process would open the lock file on its own too.
                        let other = LocalStore::new(&store.dir);
                        barrier.wait();
                        let body = format!("r{round}-w{i}");
                        other
                            .replace(
                                "dataset_manifest.json",
                                body.as_bytes(),
                                crate::store::seam::Expect::Tag(tag),
                            )
                            .unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap() as usize).sum()
        });
        assert_eq!(won, 1, "round {round}: {won} writers replaced {seen:?}");
    }
}

#[test]
fn a_write_whose_shard_a_clean_took_commits_nothing() {
    let d = tempfile::tempdir().unwrap();
    let store = Arc::new(LocalStore::new(d.path()));
    let first = write(&*store, 0..8, WriteMode::ErrorIfExists).unwrap();
    let listed = first.shards.iter().map(|s| s.shard_path.clone()).collect();
    // A clean with a retention shorter than the write takes one of its shards.
    when_unlisted(store.clone(), listed, |_, theirs| {
        std::fs::remove_file(&theirs[0]).unwrap()
    });
    let e = write(&*store, 8..16, WriteMode::Append).unwrap_err();
    assert!(
        matches!(e, DatasetError::Conflict { .. })
            && e.to_string().contains("left the store before its commit")
            && e.to_string().contains("nothing was committed"),
        "{e}"
    );
    assert!(store.after_versions_listed.lock().unwrap().is_none());
    assert_eq!(sv::current(&*store).unwrap().unwrap().version.version, 1);
    // The write's other shards went with it; version 1 is whole.
    let parts: Vec<String> = store
        .list("part-")
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(parts.len(), first.shards.len(), "{parts:?}");
    assert_whole(&*store);
}

#[test]
fn a_clean_beside_a_write_that_runs_for_hours_spares_its_shards() {
    let d = tempfile::tempdir().unwrap();
    let store = Arc::new(LocalStore::new(d.path()));
    let first = write(&*store, 0..8, WriteMode::ErrorIfExists).unwrap();
    let listed = first.shards.iter().map(|s| s.shard_path.clone()).collect();
    // Its shards dated two hours back (a write that has run that long), a clean with no
    // retention runs beside it.
    when_unlisted(store.clone(), listed, |dir, theirs| {
        let then = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
        for p in &theirs {
            let f = std::fs::File::options().write(true).open(p).unwrap();
            f.set_modified(then).unwrap();
        }
        clean_store(&LocalStore::new(dir), Duration::ZERO).unwrap();
    });
    let m = write(&*store, 8..16, WriteMode::Append).unwrap();
    assert!(
        store.after_versions_listed.lock().unwrap().is_none(),
        "the clean ran"
    );
    assert_eq!(m.total_samples, 16);
    assert_whole(&*store);
    // The write's job is swept: no heartbeat, no marker left.
    assert!(store
        .list(crate::store::job_marks::JOBS_PREFIX)
        .unwrap()
        .is_empty());
}

#[test]
fn a_clean_that_listed_before_a_write_committed_never_takes_its_shards() {
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
    // Between the clean's listing of the versions and its look at the jobs, another writer
    // commits version 2 and is stopped in its sweep: its heartbeat gone, its attempts'
    // markers still there (an ended job).
    let dir = d.path().to_path_buf();
    *store.after_versions_listed.lock().unwrap() = Some(Box::new(move || {
        let other = LocalStore::new(&dir);
        let m = write(&other, 8..16, WriteMode::Append).unwrap();
        for s in &m.shards {
            if let Some(a) = crate::write::shard_record::attempt_of(&s.shard_path) {
                let marker = format!(
                    "{}write-stopped/attempt-{a}",
                    crate::store::job_marks::JOBS_PREFIX
                );
                other.put(&marker, b"").unwrap();
            }
        }
    }));
    clean_store(&store, Duration::ZERO).unwrap();
    assert!(store.after_versions_listed.lock().unwrap().is_none());
    assert_eq!(Dataset::open(d.path()).unwrap().len().unwrap(), 16);
    let r = verify_store(&store, None).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    // The ended job's markers are swept.
    assert!(store
        .list(crate::store::job_marks::JOBS_PREFIX)
        .unwrap()
        .is_empty());
}

#[test]
fn verify_on_a_store_checks_the_layouts_index_as_a_folders_verify_does() {
    // The entry index of another version (a commit stopped between the manifest and the
    // index): a problem that `--repair` (store_clean::republish) mends.
    let d = tempfile::tempdir().unwrap();
    let store = LocalStore::new(d.path());
    let v1 = write(&store, 0..8, WriteMode::ErrorIfExists).unwrap();
    let top = d.path().join(crate::manifest::INDEX_NAME);
    let first = std::fs::read(&top).unwrap();
    write(&store, 8..20, WriteMode::Append).unwrap();
    std::fs::write(&top, &first).unwrap();
    let r = verify_store(&store, None).unwrap();
    assert!(
        r.problems.join("\n").contains("is not version 2's"),
        "{:?}",
        r.problems
    );
    let snap = sv::current(&store).unwrap().unwrap();
    assert!(crate::store::clean::republish(&store, &snap).unwrap());
    assert!(verify_store(&store, None).unwrap().is_ok());
    // A dataset without versions (safetensors-spark's layout): its index is checked too.
    std::fs::remove_dir_all(d.path().join("_tensorsmith")).unwrap();
    assert!(verify_store(&store, None).unwrap().is_ok());
    std::fs::write(&top, &first).unwrap();
    let m = sv::current(&store).unwrap().unwrap();
    let r = verify_store(&store, None).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    // An index naming a shard the manifest does not list (one of version 1's, which the
    // index written back names).
    let gone = &v1.shards[0].shard_path;
    std::fs::remove_file(d.path().join(crate::manifest::MANIFEST_NAME)).unwrap();
    let rest = Manifest::new(
        m.manifest()
            .shards
            .iter()
            .filter(|s| &s.shard_path != gone)
            .cloned()
            .collect(),
        m.manifest().schema.clone(),
    );
    std::fs::write(
        d.path().join(crate::manifest::MANIFEST_NAME),
        rest.to_json(),
    )
    .unwrap();
    let r = verify_store(&store, None).unwrap();
    let text = r.problems.join("\n");
    assert!(
        text.contains(crate::manifest::INDEX_NAME) && text.contains(gone.as_str()),
        "{text}"
    );
}
