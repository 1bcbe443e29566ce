//! Many `dataset write` processes on one dataset at once (issue 26): in every mode, batch and
//! KV, 4 writers per round, `TS_RACE_ROUNDS` rounds (default 20). After every round the rows
//! are counted against what the exit codes promised (each row of each exit-0 writer exactly
//! once, nothing of a failed one) and the dataset verifies. Also: a reader pinned to its
//! version across overwrites, and writers killed inside their commit.

use arrow_array::builder::{Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tensorsmith_dataset::{verify, Dataset};

const WRITERS: u32 = 4;
const ROWS: u32 = 8;

fn rounds() -> u32 {
    std::env::var("TS_RACE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
}

/// An Arrow IPC file of `ROWS` samples of 4 f32, sample `r` all `tag * 100 + r`; with a key
/// column `id` (`k{tag}-{r}`, or `shared-{r}` with `shared_keys`).
fn input(path: &Path, tag: u32, shared_keys: bool) {
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
            false,
        ),
        Field::new("id", DataType::Utf8, false),
    ]));
    let mut b = ListBuilder::new(Float32Builder::new());
    let mut k = StringBuilder::new();
    for r in 0..ROWS {
        for _ in 0..4 {
            b.values().append_value((tag * 100 + r) as f32);
        }
        b.append(true);
        k.append_value(match shared_keys {
            true => format!("shared-{r}"),
            false => format!("k{tag}-{r}"),
        });
    }
    let cols = vec![Arc::new(b.finish()) as ArrayRef, Arc::new(k.finish())];
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let f = std::fs::File::create(path).unwrap();
    let mut w = arrow_ipc::writer::FileWriter::try_new(f, &schema).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Batch,
    Kv,
}

fn write_cmd(input: &Path, out: &Path, kind: Kind, mode: &str, extra: &[&str]) -> Command {
    let mut c = bin();
    c.args(["dataset", "write"]).arg(input).arg(out);
    match kind {
        Kind::Batch => c.args(["--batch-size", "4", "--columns", "v"]),
        Kind::Kv => c.args(["--name-col", "id"]),
    };
    c.args([
        "--dtype",
        "F32",
        "--generate-index",
        "--mode",
        mode,
        "--threads",
        "2",
    ])
    .args(extra);
    c
}

/// Runs `WRITERS` writers at once; their outputs in writer order. Prints the commits
/// prepared again (another writer committed first).
fn race(cmds: Vec<Command>) -> Vec<Output> {
    let children: Vec<_> = cmds
        .into_iter()
        .map(|mut c| {
            c.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let mut retries = 0u64;
    for o in &outs {
        let e = stderr(o);
        if let Some(rest) = e.split("; commit: ").nth(1) {
            let n = rest.split(' ').next().unwrap();
            retries += n.parse::<u64>().unwrap();
        }
    }
    let ok = outs.iter().filter(|o| o.status.success()).count();
    eprintln!(
        "race: {ok} of {} exit 0, {retries} commits prepared again",
        outs.len()
    );
    outs
}

fn run_ok(mut c: Command) {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The dataset's samples by tag: how many rows of each writer's input it holds (every row of
/// a tag must be there exactly once, `ROWS` in all, or none).
fn tags(dir: &Path, kind: Kind) -> BTreeMap<u32, u32> {
    let ds = Dataset::open(dir).unwrap();
    let mut out: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut add = |data: &[u8]| {
        let x = f32::from_le_bytes(data[..4].try_into().unwrap()) as u32;
        out.entry(x / 100).or_default().push(x % 100);
    };
    match kind {
        Kind::Batch => {
            for i in 0..ds.len().unwrap() {
                add(&ds.sample(i).unwrap()[0].1.data);
            }
        }
        Kind::Kv => {
            for k in ds.tensor_keys().unwrap() {
                add(&ds.tensor(&k).unwrap().data);
            }
        }
    }
    out.into_iter()
        .map(|(tag, mut rows)| {
            rows.sort();
            assert_eq!(rows, (0..ROWS).collect::<Vec<_>>(), "rows of writer {tag}");
            (tag, rows.len() as u32)
        })
        .collect()
}

fn verified(dir: &Path, what: &str) {
    let r = verify(dir).unwrap();
    assert!(r.is_ok(), "{what}: {:?}", r.problems);
    let staging: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("_tensorsmith_"))
        .collect();
    assert!(staging.is_empty(), "{what}: staging left: {staging:?}");
}

struct Round {
    tmp: tempfile::TempDir,
}

impl Round {
    fn new() -> Round {
        Round {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn input(&self, tag: u32, shared: bool) -> PathBuf {
        let p = self.tmp.path().join(format!("in{tag}.arrow"));
        input(&p, tag, shared);
        p
    }
    fn out(&self) -> PathBuf {
        self.tmp.path().join("ds")
    }
}

fn ok_writers(outs: &[Output]) -> Vec<u32> {
    (0..outs.len() as u32)
        .filter(|&w| outs[w as usize].status.success())
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Appends: every writer succeeds and every row of each lands once, over a first dataset.
fn appends(kind: Kind) {
    for round in 0..rounds() {
        let r = Round::new();
        let out = r.out();
        let base = r.input(99, false);
        run_ok(write_cmd(&base, &out, kind, "error", &[]));
        let cmds = (0..WRITERS)
            .map(|w| write_cmd(&r.input(w + 1, false), &out, kind, "append", &[]))
            .collect();
        let outs = race(cmds);
        for o in &outs {
            assert!(o.status.success(), "round {round}: {}", stderr(o));
        }
        let want: BTreeMap<u32, u32> = (1..=WRITERS).chain([99]).map(|t| (t, ROWS)).collect();
        assert_eq!(tags(&out, kind), want, "round {round}");
        verified(&out, &format!("round {round}"));
    }
}

#[test]
fn concurrent_batch_appends_all_land_once() {
    appends(Kind::Batch);
}

#[test]
fn concurrent_kv_appends_all_land_once() {
    appends(Kind::Kv);
}

/// Overwrites: every writer succeeds in its turn; the dataset is the last one's, whole.
fn overwrites(kind: Kind) {
    for round in 0..rounds() {
        let r = Round::new();
        let out = r.out();
        run_ok(write_cmd(&r.input(99, false), &out, kind, "error", &[]));
        let cmds = (0..WRITERS)
            .map(|w| write_cmd(&r.input(w + 1, false), &out, kind, "overwrite", &[]))
            .collect();
        let outs = race(cmds);
        for o in &outs {
            assert!(o.status.success(), "round {round}: {}", stderr(o));
        }
        let got = tags(&out, kind);
        assert_eq!(got.len(), 1, "round {round}: {got:?}");
        let (&tag, _) = got.iter().next().unwrap();
        assert!((1..=WRITERS).contains(&tag), "round {round}: {got:?}");
        // The last version committed is that writer's, and every overwrite made a version.
        let versions = tensorsmith_dataset::versions_info(&out).unwrap().0;
        assert_eq!(versions.len() as u32, WRITERS + 1, "round {round}");
        verified(&out, &format!("round {round}"));
    }
}

#[test]
fn concurrent_batch_overwrites_leave_the_last_whole() {
    overwrites(Kind::Batch);
}

#[test]
fn concurrent_kv_overwrites_leave_the_last_whole() {
    overwrites(Kind::Kv);
}

/// New dataset, default mode: exactly one writer succeeds, the others fail clearly and leave
/// nothing.
fn creates(kind: Kind) {
    for round in 0..rounds() {
        let r = Round::new();
        let out = r.out();
        let cmds = (0..WRITERS)
            .map(|w| write_cmd(&r.input(w + 1, false), &out, kind, "error", &[]))
            .collect();
        let outs = race(cmds);
        let ok = ok_writers(&outs);
        assert_eq!(ok.len(), 1, "round {round}");
        for o in outs.iter().filter(|o| !o.status.success()) {
            assert!(
                stderr(o).contains("already holds a dataset"),
                "round {round}: {}",
                stderr(o)
            );
        }
        let want: BTreeMap<u32, u32> = [(ok[0] + 1, ROWS)].into();
        assert_eq!(tags(&out, kind), want, "round {round}");
        verified(&out, &format!("round {round}"));
        let shards = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".safetensors"))
            .count();
        assert_eq!(
            shards,
            Dataset::open(&out).unwrap().manifest().shards.len(),
            "round {round}: the failed writers left shards"
        );
    }
}

#[test]
fn concurrent_batch_creates_one_wins() {
    creates(Kind::Batch);
}

#[test]
fn concurrent_kv_creates_one_wins() {
    creates(Kind::Kv);
}

/// KV appends of the same keys (duplicatesStrategy=fail): the keys current at commit time
/// count, so exactly one writer lands and the others fail saying why.
#[test]
fn concurrent_kv_appends_of_one_key_set_land_once() {
    for round in 0..rounds() {
        let r = Round::new();
        let out = r.out();
        run_ok(write_cmd(&r.input(99, false), &out, Kind::Kv, "error", &[]));
        let cmds = (0..WRITERS)
            .map(|w| write_cmd(&r.input(w + 1, true), &out, Kind::Kv, "append", &[]))
            .collect();
        let outs = race(cmds);
        let ok = ok_writers(&outs);
        assert_eq!(ok.len(), 1, "round {round}");
        for o in outs.iter().filter(|o| !o.status.success()) {
            assert!(stderr(o).contains("is already in version"), "{}", stderr(o));
        }
        let want: BTreeMap<u32, u32> = [(99, ROWS), (ok[0] + 1, ROWS)].into();
        assert_eq!(tags(&out, Kind::Kv), want, "round {round}");
        verified(&out, &format!("round {round}"));
    }
}

/// A reader that opened the dataset reads that version, whole, while overwrites replace it
/// (each reader a process: `dataset export`, and a `Dataset` opened before the overwrites).
#[test]
fn a_reader_keeps_its_version_across_overwrites() {
    let r = Round::new();
    let out = r.out();
    run_ok(write_cmd(
        &r.input(99, false),
        &out,
        Kind::Batch,
        "error",
        &[],
    ));
    let pinned = Dataset::open(&out).unwrap();
    let inputs: Vec<PathBuf> = (1..=4).map(|t| r.input(t, false)).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let overwrites = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for i in 0..rounds() {
                let inp = &inputs[i as usize % inputs.len()];
                let o = write_cmd(inp, &out, Kind::Batch, "overwrite", &[])
                    .output()
                    .unwrap();
                assert!(o.status.success(), "{}", stderr(&o));
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            rounds()
        });
        let mut exports = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let pq = r.tmp.path().join("export.parquet");
            let o = bin()
                .args(["dataset", "export"])
                .arg(&out)
                .arg(&pq)
                .output()
                .unwrap();
            assert!(o.status.success(), "export: {}", stderr(&o));
            assert!(
                stderr(&o).contains(&format!("{ROWS} rows")),
                "{}",
                stderr(&o)
            );
            exports += 1;
        }
        eprintln!("{exports} exports during the overwrites");
        writer.join().unwrap()
    });
    assert!(overwrites > 0);
    // The reader opened before every overwrite still reads its version, whole.
    for i in 0..ROWS as u64 {
        let s = pinned.sample(i).unwrap();
        assert_eq!(
            f32::from_le_bytes(s[0].1.data[..4].try_into().unwrap()),
            (9900 + i) as f32
        );
    }
    // Once cleaned, it says so.
    let pinned = Dataset::open_version(&out, pinned.version()).unwrap();
    tensorsmith_dataset::clean(&out, Duration::ZERO).unwrap();
    let e = pinned.sample(0).unwrap_err().to_string();
    assert!(
        e.contains("version 1 of") && e.contains("was removed by `dataset clean` at"),
        "{e}"
    );
    let e = Dataset::open_version(&out, 1).err().unwrap().to_string();
    assert!(e.contains("version 1 of"), "{e}");
    verified(&out, "after clean");
}

/// Writers killed inside their commit (paused there by the test hook, just before or after the
/// commit point) or at random points: the dataset stays valid, and the next writer is not blocked.
#[test]
fn a_writer_killed_inside_its_commit_blocks_no_one() {
    let r = Round::new();
    let out = r.out();
    run_ok(write_cmd(
        &r.input(99, false),
        &out,
        Kind::Batch,
        "error",
        &[],
    ));
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..rounds() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mode = if round % 2 == 0 {
            "append"
        } else {
            "overwrite"
        };
        let inp = r.input(round % 4 + 1, false);
        let mut victim = write_cmd(&inp, &out, Kind::Batch, mode, &[]);
        if round % 3 == 0 {
            // Paused inside its commit: its shards in, just before or just after the
            // commit point (the version file's exclusive create).
            let step = [10, 13][(seed % 2) as usize];
            victim.env("TENSORSMITH_TEST_COMMIT_PAUSE", format!("{step}"));
        }
        let paused = round % 3 == 0;
        let mut child = victim
            .stdout(Stdio::null())
            .stderr(if paused {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .unwrap();
        if paused {
            // Killed once it says it holds the lock at that step.
            use std::io::BufRead;
            let err = std::io::BufReader::new(child.stderr.take().unwrap());
            let line = err
                .lines()
                .map_while(Result::ok)
                .find(|l| l.contains("PAUSED"));
            assert!(line.is_some(), "round {round}: the victim never paused");
        } else {
            std::thread::sleep(Duration::from_millis(seed % 120));
        }
        let _ = child.kill();
        child.wait().unwrap();
        let before = Dataset::open(&out).unwrap().len().unwrap();
        let t = Instant::now();
        let o = write_cmd(
            &r.input(50, false),
            &out,
            Kind::Batch,
            "append",
            &["--lock-timeout", "20s"],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "round {round}: {}", stderr(&o));
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "round {round}: blocked"
        );
        assert_eq!(
            Dataset::open(&out).unwrap().len().unwrap(),
            before + ROWS as u64,
            "round {round}"
        );
        let o = bin()
            .args(["dataset", "verify"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        // Next round from a fresh base, so that appended rows do not pile up.
        let o = write_cmd(
            &r.input(99, false),
            &out,
            Kind::Batch,
            "overwrite",
            &["--retain", "0"],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    verified(&out, "end");
}

/// Concurrent `convert --append` into one zTensor file: every exit-0 append is in the file.
#[test]
fn concurrent_ztensor_appends_all_land() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..4096u32)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    let src = |name: &str| {
        let p = tmp.path().join(format!("{name}.safetensors"));
        let mut w = tensorsmith::safetensors::Writer::new();
        w.add(name, tensorsmith::dtype::DType::F32, &[4096], &bytes[..])
            .unwrap();
        w.write_file(&p).unwrap();
        p
    };
    let base = src("base");
    let adds: Vec<PathBuf> = (0..WRITERS).map(|w| src(&format!("add{w}"))).collect();
    let out = tmp.path().join("out.zt");
    for round in 0..rounds() {
        let o = bin().arg("convert").arg(&base).arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let cmds = adds
            .iter()
            .map(|a| {
                let mut c = bin();
                c.args(["convert", "--append"]).arg(a).arg(&out);
                c
            })
            .collect();
        let outs = race(cmds);
        let m = tensorsmith::open(out.to_str().unwrap(), &Default::default()).unwrap();
        let names: Vec<String> = m.index.tensors.iter().map(|t| t.name.clone()).collect();
        for (w, o) in outs.iter().enumerate() {
            assert!(o.status.success(), "round {round}: {}", stderr(o));
            assert!(
                names.contains(&format!("add{w}")),
                "round {round}: add{w} lost: {names:?}"
            );
        }
        assert_eq!(names.len(), WRITERS as usize + 1, "round {round}");
        assert!(!tmp.path().join(".out.zt.lock").exists());
    }
}

/// KV appends of one key set with lastWin, at once: every writer lands in its turn, each key
/// once, holding the last committed writer's tensor; a reader of an older version keeps
/// reading the tensors it had (the replaced shards are copied, never changed).
#[test]
fn concurrent_kv_last_win_appends_replace_keys_current_at_commit() {
    for round in 0..rounds() {
        let r = Round::new();
        let out = r.out();
        let lw = ["--duplicates-strategy", "lastWin"];
        // The base holds the shared keys (tag 98) and keys of its own (tag 99).
        run_ok(write_cmd(&r.input(98, true), &out, Kind::Kv, "error", &lw));
        run_ok(write_cmd(
            &r.input(99, false),
            &out,
            Kind::Kv,
            "append",
            &lw,
        ));
        let pinned = Dataset::open(&out).unwrap();
        let cmds = (0..WRITERS)
            .map(|w| write_cmd(&r.input(w + 1, true), &out, Kind::Kv, "append", &lw))
            .collect();
        let outs = race(cmds);
        for o in &outs {
            assert!(o.status.success(), "round {round}: {}", stderr(o));
        }
        let got = tags(&out, Kind::Kv);
        assert_eq!(got.len(), 2, "round {round}: {got:?}");
        assert!(got.contains_key(&99), "round {round}: {got:?}");
        let ds = Dataset::open(&out).unwrap();
        assert_eq!(ds.len().unwrap(), 2 * ROWS as u64, "round {round}");
        // Every writer committed a version of its own.
        let last = tensorsmith_dataset::versions_info(&out).unwrap().0;
        assert_eq!(last.len() as u32, WRITERS + 2, "round {round}");
        assert_eq!(
            pinned.tensor("shared-3__v").unwrap().data[..4],
            9803f32.to_le_bytes(),
            "round {round}"
        );
        verified(&out, &format!("round {round}"));
    }
}

/// A writer killed just after its commit point (its version file is in place, the layout's
/// entry files are not yet): readers of the version see the new data, `dataset_manifest.json`
/// still names the old dataset whole, `verify` says so, and `verify --repair` (as `clean` and
/// the next commit would) writes it again.
#[test]
fn a_kill_after_the_commit_point_is_repaired() {
    let r = Round::new();
    let out = r.out();
    run_ok(write_cmd(
        &r.input(99, false),
        &out,
        Kind::Batch,
        "error",
        &[],
    ));
    let old_manifest = std::fs::read(out.join("dataset_manifest.json")).unwrap();
    let old_index = std::fs::read(out.join("_tensor_index.parquet")).ok();
    killed_at(
        write_cmd(&r.input(1, false), &out, Kind::Batch, "overwrite", &[]),
        13,
    );
    assert_eq!(tags(&out, Kind::Batch), [(1, ROWS)].into());
    assert_eq!(
        std::fs::read(out.join("dataset_manifest.json")).unwrap(),
        old_manifest
    );
    assert_eq!(
        std::fs::read(out.join("_tensor_index.parquet")).ok(),
        old_index
    );
    let o = bin()
        .args(["dataset", "verify"])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("verify --repair"), "{text}");
    let o = bin()
        .args(["dataset", "verify", "--repair"])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("repaired"), "{text}");
    let m = tensorsmith_dataset::Manifest::read(&out).unwrap();
    assert_eq!(m, Dataset::open(&out).unwrap().manifest().clone());
    assert!(out.join("_tensor_index.parquet").exists());
}

/// Runs `c` until it says it paused at commit step `step` (the test hook), then kills it.
fn killed_at(mut c: Command, step: u32) {
    let mut child = c
        .env("TENSORSMITH_TEST_COMMIT_PAUSE", step.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let err = std::io::BufReader::new(child.stderr.take().unwrap());
    assert!(
        err.lines()
            .map_while(Result::ok)
            .any(|l| l.contains("PAUSED")),
        "it never paused at step {step}"
    );
    let _ = child.kill();
    child.wait().unwrap();
}

/// `path`'s modification time set `ago` back.
fn age(path: &Path, ago: Duration) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::SystemTime::now() - ago).unwrap();
}

/// A writer killed with its shards in the folder, before its commit point: the dataset reads
/// and verifies as before, `verify` notes the shards, `clean` keeps them while the writer's
/// heartbeat is fresh (and says so), and takes them with the job's markers once the heartbeat
/// has been still for two hours. A user's copy of such a shard, which no job of this folder
/// marked, is never taken however old.
#[test]
fn a_killed_writers_shards_go_once_its_heartbeat_is_still() {
    let r = Round::new();
    let out = r.out();
    run_ok(write_cmd(
        &r.input(99, false),
        &out,
        Kind::Batch,
        "error",
        &[],
    ));
    let before = tags(&out, Kind::Batch);
    killed_at(
        write_cmd(&r.input(1, false), &out, Kind::Batch, "append", &[]),
        10,
    );
    assert_eq!(tags(&out, Kind::Batch), before);
    let listed: Vec<String> = Dataset::open(&out)
        .unwrap()
        .manifest()
        .shards
        .iter()
        .map(|s| s.shard_path.clone())
        .collect();
    let shards = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".safetensors") && !listed.contains(n))
            .collect();
        v.sort();
        v
    };
    let strays = shards();
    assert!(!strays.is_empty(), "the killed writer moved no shard in");
    let user = "part-00007-0000-0f8fad5b-d9cb-469f-a165-70867728950e.safetensors";
    std::fs::copy(out.join(&listed[0]), out.join(user)).unwrap();
    age(&out.join(user), Duration::from_secs(2 * 3600));
    let show = |args: &[&str]| {
        let o = bin().args(args).arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned() + &stderr(&o);
        assert!(o.status.success(), "{args:?}: {text}");
        text
    };
    let text = show(&["dataset", "verify"]);
    for s in &strays {
        let line = text.lines().find(|l| l.contains(s.as_str())).unwrap_or("");
        assert!(line.contains("heartbeat"), "{s}: {text}");
    }
    let line = text.lines().find(|l| l.contains(user)).unwrap_or("");
    assert!(line.contains("not this dataset's"), "{text}");

    let text = show(&["dataset", "clean", "--older-than", "0s"]);
    assert!(text.contains("heartbeat is fresh"), "{text}");
    let mut all = strays.clone();
    all.push(user.to_string());
    all.sort();
    assert_eq!(shards(), all, "{text}");

    let jobs = out.join("_tensorsmith/jobs");
    let beats: Vec<PathBuf> = std::fs::read_dir(&jobs)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("heartbeat"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(beats.len(), 1, "one job: the killed writer's");
    age(&beats[0], Duration::from_secs(2 * 3600));
    let text = show(&["dataset", "clean", "--older-than", "0s"]);
    assert_eq!(shards(), vec![user.to_string()], "{text}");
    assert_eq!(std::fs::read_dir(&jobs).unwrap().count(), 0, "{text}");
    assert_eq!(tags(&out, Kind::Batch), before);
    let text = show(&["dataset", "verify"]);
    assert!(!text.contains("heartbeat"), "{text}");
}
