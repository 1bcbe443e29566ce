//! Datasets on S3 (issue 33) against a real S3 server (moto in server mode, from the
//! repository's `.venv`; required, not skipped): `dataset write` to `s3://` gives the shards
//! and manifest a local write gives (bytes compared), `info`, `verify`, `export` read it back,
//! appends and overwrites make versions, overwritten shards are retired until `clean`,
//! writers racing on one prefix each commit a version of their own or fail with the conflict
//! error (no version lost, never an empty dataset), damage is reported by verify, and
//! `hf://` and unknown schemes are refused by name.

#[path = "object_store/dataset_files.rs"]
mod dataset_files;
#[path = "object_store/moto.rs"]
mod moto;

use dataset_files::{b64, input, manifest_without_names, stem, write_args};
use moto::{err, ok, signed_cli as cli, Moto};
use std::path::Path;

/// Objects under `prefix` of `bucket`: key (below the prefix) and bytes, by key.
fn objects(m: &Moto, bucket: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let out = m.py(&format!(
        "import base64\n\
         p = s3.get_paginator('list_objects_v2')\n\
         for page in p.paginate(Bucket='{bucket}', Prefix='{prefix}/'):\n\
         \x20   for o in page.get('Contents', []):\n\
         \x20       b = s3.get_object(Bucket='{bucket}', Key=o['Key'])['Body'].read()\n\
         \x20       print(o['Key'][len('{prefix}/'):], base64.b64encode(b).decode())\n"
    ));
    let mut v: Vec<(String, Vec<u8>)> = out
        .lines()
        .map(|l| {
            let (k, b) = l.split_once(' ').unwrap();
            (k.to_string(), b64(b))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn an_s3_dataset_is_the_local_dataset_and_reads_back() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let inp = t.path().join("in.arrow");
    input(&inp, 1, 11);
    let local = t.path().join("local");
    let run = |args: &[&str]| cli(home, &m.endpoint).args(args).output().unwrap();
    ok(&run(&write_args(&inp, local.to_str().unwrap(), "error")));
    let o = run(&write_args(&inp, "s3://bkt/ds", "error"));
    ok(&o);
    // The same shards, byte for byte, and the same manifest but for the names' uuids.
    let remote = objects(&m, "bkt", "ds");
    let shards: Vec<&(String, Vec<u8>)> = remote
        .iter()
        .filter(|(k, _)| k.starts_with("part-"))
        .collect();
    let mut local_shards: Vec<(String, Vec<u8>)> = std::fs::read_dir(&local)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("part-"))
        .map(|n| (stem(&n), std::fs::read(local.join(&n)).unwrap()))
        .collect();
    local_shards.sort();
    assert_eq!(shards.len(), 3);
    assert_eq!(
        shards
            .iter()
            .map(|(k, b)| (stem(k), b.clone()))
            .collect::<Vec<_>>(),
        local_shards
    );
    let manifest = remote
        .iter()
        .find(|(k, _)| k == "dataset_manifest.json")
        .unwrap();
    let local_manifest = std::fs::read_to_string(local.join("dataset_manifest.json")).unwrap();
    assert_eq!(
        manifest_without_names(std::str::from_utf8(&manifest.1).unwrap()),
        manifest_without_names(&local_manifest)
    );
    let keys: Vec<&str> = remote.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        keys.contains(&"_tensorsmith/versions/00000001.json"),
        "{keys:?}"
    );
    assert!(keys.contains(&"_tensor_index.parquet"), "{keys:?}");
    // info, verify and export read it back.
    let info = ok(&run(&["dataset", "info", "s3://bkt/ds"]));
    assert!(
        info.contains("samples: 11") && info.contains("version: 1"),
        "{info}"
    );
    let v = ok(&run(&["dataset", "verify", "s3://bkt/ds"]));
    assert!(v.starts_with("ok: s3://bkt/ds (3 shards"), "{v}");
    let (e1, e2) = (t.path().join("l.parquet"), t.path().join("r.parquet"));
    ok(&run(&[
        "dataset",
        "export",
        local.to_str().unwrap(),
        e1.to_str().unwrap(),
    ]));
    ok(&run(&[
        "dataset",
        "export",
        "s3a://bkt/ds",
        e2.to_str().unwrap(),
    ]));
    assert_eq!(std::fs::read(&e1).unwrap(), std::fs::read(&e2).unwrap());
    // Exported to the store itself: the same Parquet bytes, as one object.
    ok(&run(&[
        "dataset",
        "export",
        "s3://bkt/ds",
        "s3://bkt/exports/ds.parquet",
    ]));
    let exported = objects(&m, "bkt", "exports");
    assert_eq!(
        exported.len(),
        1,
        "{:?}",
        exported.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    assert_eq!(exported[0].1, std::fs::read(&e1).unwrap());
    // A URL no store writes to is refused by name, and nothing is written.
    let e = err(&run(&[
        "dataset",
        "export",
        "s3://bkt/ds",
        "hf://org/repo/ds.parquet",
    ]));
    assert!(e.contains("hf://"), "{e}");
    // A second write in the default mode is refused, naming the URL.
    let e = err(&run(&write_args(&inp, "s3://bkt/ds", "error")));
    assert!(e.contains("s3://bkt/ds: already holds a dataset"), "{e}");
}

#[test]
fn appends_overwrites_retired_shards_and_clean_on_s3() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let (a, b) = (t.path().join("a.arrow"), t.path().join("b.arrow"));
    input(&a, 1, 8);
    input(&b, 2, 4);
    let run = |args: &[&str]| cli(home, &m.endpoint).args(args).output().unwrap();
    ok(&run(&write_args(&a, "s3://bkt/ds", "error")));
    ok(&run(&write_args(&b, "s3://bkt/ds", "append")));
    let info = ok(&run(&["dataset", "info", "s3://bkt/ds"]));
    assert!(
        info.contains("samples: 12") && info.contains("version: 2"),
        "{info}"
    );
    ok(&run(&write_args(&b, "s3://bkt/ds", "overwrite")));
    let info = ok(&run(&["dataset", "info", "s3://bkt/ds"]));
    assert!(
        info.contains("samples: 4") && info.contains("version: 3"),
        "{info}"
    );
    assert!(info.contains("retired shards: 3"), "{info}");
    ok(&run(&["dataset", "verify", "s3://bkt/ds"]));
    // Version 2 is still there to read, with its shards.
    ok(&run(&[
        "dataset",
        "verify",
        "s3://bkt/ds",
        "--version",
        "2",
    ]));
    let parts = |m: &Moto| {
        objects(m, "bkt", "ds")
            .into_iter()
            .filter(|(k, _)| k.starts_with("part-"))
            .count()
    };
    assert_eq!(parts(&m), 4);
    // An unfinished multipart upload: moto dates every upload 2010-11-10 (a fixed
    // `Initiated`), so clean takes it for a dead writer's and aborts it.
    m.py("s3.create_multipart_upload(Bucket='bkt', Key='ds/part-00000-0000-dead.safetensors')");
    let c = ok(&run(&[
        "dataset",
        "clean",
        "s3://bkt/ds",
        "--older-than",
        "0",
    ]));
    assert!(
        c.contains("1 unfinished upload, 2 versions, 3 shards"),
        "{c}"
    );
    assert!(
        c.contains("aborted s3://bkt/ds/part-00000-0000-dead.safetensors (upload "),
        "{c}"
    );
    assert_eq!(parts(&m), 1);
    let uploads = m.py("print(len(s3.list_multipart_uploads(Bucket='bkt').get('Uploads', [])))");
    assert_eq!(uploads.trim(), "0");
    let e = err(&run(&[
        "dataset",
        "verify",
        "s3://bkt/ds",
        "--version",
        "2",
    ]));
    assert!(
        e.contains("version 2 of s3://bkt/ds was removed by `dataset clean`"),
        "{e}"
    );
    ok(&run(&["dataset", "verify", "s3://bkt/ds"]));
}

#[test]
fn writers_racing_on_one_prefix_each_commit_or_fail_clearly() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let base = t.path().join("base.arrow");
    input(&base, 9, 4);
    ok(&cli(home, &m.endpoint)
        .args(write_args(&base, "s3://bkt/race", "error"))
        .output()
        .unwrap());
    let inputs: Vec<_> = (1..=4)
        .map(|i| {
            let p = t.path().join(format!("in{i}.arrow"));
            input(&p, i, 4);
            p
        })
        .collect();
    let children: Vec<_> = inputs
        .iter()
        .map(|p| {
            cli(home, &m.endpoint)
                .args(write_args(p, "s3://bkt/race", "append"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut committed = 0u64;
    for c in children {
        let o = c.wait_with_output().unwrap();
        if o.status.success() {
            committed += 1;
        } else {
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(e.contains("other writers committed"), "{e}");
        }
    }
    assert!(committed >= 1);
    let info = ok(&cli(home, &m.endpoint)
        .args(["dataset", "info", "s3://bkt/race"])
        .output()
        .unwrap());
    assert!(
        info.contains(&format!("samples: {}", 4 + 4 * committed)),
        "{committed} committed: {info}"
    );
    assert!(
        info.contains(&format!("version: {}", 1 + committed)),
        "{info}"
    );
    ok(&cli(home, &m.endpoint)
        .args(["dataset", "verify", "s3://bkt/race"])
        .output()
        .unwrap());
}

#[test]
fn verify_reports_damage_and_other_schemes_are_refused() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let inp = t.path().join("in.arrow");
    input(&inp, 1, 8);
    let run = |args: &[&str]| cli(home, &m.endpoint).args(args).output().unwrap();
    ok(&run(&write_args(&inp, "s3://bkt/ds", "error")));
    let shard = objects(&m, "bkt", "ds")
        .into_iter()
        .find(|(k, _)| k.starts_with("part-"))
        .unwrap()
        .0;
    m.py(&format!(
        "s3.put_object(Bucket='bkt', Key='ds/{shard}', Body=b'truncated')"
    ));
    let o = run(&["dataset", "verify", "s3://bkt/ds"]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("{shard}: 9 bytes, the manifest says")),
        "{text}"
    );
    // The manifest of another version (a writer stopped after its commit point): verify
    // says so, --repair writes it again from the current version.
    m.py("s3.put_object(Bucket='bkt', Key='ds/dataset_manifest.json', Body=b'{}')");
    let o = run(&["dataset", "verify", "s3://bkt/ds"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("is not version 1's"), "{text}");
    let o = run(&["dataset", "verify", "s3://bkt/ds", "--repair"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("repaired: s3://bkt/ds"), "{text}");
    assert!(!text.contains("is not version 1's"), "{text}");
    let e = err(&run(&write_args(&inp, "hf://org/repo/ds", "error")));
    assert!(e.contains("read only"), "{e}");
    let e = err(&run(&write_args(&inp, "ftp://host/ds", "error")));
    assert!(e.contains("unsupported URL scheme \"ftp\""), "{e}");
    assert!(!Path::new("ftp:").exists() && !Path::new("hf:").exists());
    let e = err(&run(&["dataset", "info", "s3://bkt/nothing"]));
    assert!(
        e.contains("s3://bkt/nothing") && e.contains("no dataset here"),
        "{e}"
    );
    let e = err(&run(&write_args(&inp, "s3://missing-bucket/ds", "error")));
    assert!(e.contains("s3://missing-bucket/"), "{e}");
}

/// A writer paused at `step` of its object-store commit (TENSORSMITH_TEST_COMMIT_PAUSE), then
/// killed.
fn killed_at(home: &Path, endpoint: &str, inp: &Path, out: &str, step: &str) {
    use std::io::BufRead;
    let mut child = cli(home, endpoint)
        .args(write_args(inp, out, "append"))
        .env("TENSORSMITH_TEST_COMMIT_PAUSE", step)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = std::io::BufReader::new(child.stderr.take().unwrap());
    assert!(
        err.lines()
            .map_while(Result::ok)
            .any(|l| l.contains("PAUSED")),
        "the writer never paused at step {step}"
    );
    let _ = child.kill();
    child.wait().unwrap();
}

#[test]
fn writers_killed_before_and_after_the_commit_point() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let (a, b) = (t.path().join("a.arrow"), t.path().join("b.arrow"));
    input(&a, 1, 8);
    input(&b, 2, 8);
    let run = |args: &[&str]| cli(home, &m.endpoint).args(args).output().unwrap();
    ok(&run(&write_args(&a, "s3://bkt/k", "error")));
    // Killed with its shards uploaded, before the commit point: the dataset is version 1,
    // whole; its shards are strays that verify names and clean keeps until its write's
    // heartbeat has been still for an hour (they could be a live writer's).
    killed_at(home, &m.endpoint, &b, "s3://bkt/k", "10");
    let info = ok(&run(&["dataset", "info", "s3://bkt/k"]));
    assert!(
        info.contains("version: 1 ") && info.contains("samples: 8"),
        "{info}"
    );
    let o = run(&["dataset", "verify", "s3://bkt/k"]);
    // A killed writer's shards are noted; the dataset (version 1) is sound.
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.matches("note: part-").count(), 2, "{text}");
    assert_eq!(
        text.matches("a shard no version lists").count(),
        2,
        "{text}"
    );
    assert_eq!(text.lines().count(), 3, "{text}");
    let c = ok(&run(&[
        "dataset",
        "clean",
        "s3://bkt/k",
        "--older-than",
        "0",
    ]));
    assert!(c.contains("0 versions, 0 shards"), "{c}");
    // It says what it left and when a clean will take it (an hour after the heartbeat).
    assert_eq!(c.matches("kept shard part-").count(), 2, "{c}");
    assert!(
        c.contains(
            "(no version lists it yet; its writer's heartbeat is fresh) for now: a clean from "
        ),
        "{c}"
    );
    assert!(c.contains(" UTC takes it"), "{c}");
    // Killed just after the commit point: version 2 is committed and read; the manifest is
    // still version 1's until verify --repair (or the next commit) writes it again.
    killed_at(home, &m.endpoint, &b, "s3://bkt/k", "13");
    let info = ok(&run(&["dataset", "info", "s3://bkt/k"]));
    assert!(
        info.contains("version: 2 ") && info.contains("samples: 16"),
        "{info}"
    );
    let o = run(&["dataset", "verify", "s3://bkt/k"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("is not version 2's"), "{text}");
    let o = run(&["dataset", "verify", "s3://bkt/k", "--repair"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("repaired: s3://bkt/k"), "{text}");
    assert!(!text.contains("is not version 2's"), "{text}");
}

#[test]
fn a_shard_the_connector_appended_on_s3_is_refused_by_readers_and_kept_by_writers() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let inp = t.path().join("in.arrow");
    input(&inp, 1, 11);
    let run = |args: &[&str]| cli(home, &m.endpoint).args(args).output().unwrap();
    ok(&run(&write_args(&inp, "s3://bkt/ca", "error")));
    // What safetensors-spark does to append through s3a, done with boto3: a shard under its
    // naming, the manifest rewritten over old and new.
    let name = "part-00000-0000-550e8400-e29b-41d4-a716-446655440000.safetensors";
    let total = m.py(&format!(
        "import json\n\
         m = json.loads(s3.get_object(Bucket='bkt', Key='ca/dataset_manifest.json')['Body'].read())\n\
         first = m['shards'][0]\n\
         s3.copy_object(Bucket='bkt', Key='ca/{name}', CopySource={{'Bucket': 'bkt', 'Key': 'ca/' + first['shard_path']}})\n\
         m['shards'].append({{'shard_path': '{name}', 'samples_count': first['samples_count'], 'bytes': first['bytes']}})\n\
         m['total_samples'] += first['samples_count']\n\
         m['total_bytes'] += first['bytes']\n\
         s3.put_object(Bucket='bkt', Key='ca/dataset_manifest.json', Body=json.dumps(m).encode())\n\
         print(m['total_samples'])\n"
    ));
    let total: u64 = total.trim().parse().unwrap();
    let e = err(&run(&["dataset", "info", "s3://bkt/ca"]));
    assert!(e.contains(name) && e.contains("dataset adopt"), "{e}");
    // An append adopts it first: the connector's shard stays listed, and every row is read.
    ok(&run(&write_args(&inp, "s3://bkt/ca", "append")));
    let info = ok(&run(&["dataset", "info", "s3://bkt/ca"]));
    assert!(info.contains(&format!("samples: {}", total + 11)), "{info}");
    let v = ok(&run(&["dataset", "verify", "s3://bkt/ca"]));
    assert!(v.starts_with("ok: s3://bkt/ca"), "{v}");
    let keys: Vec<String> = objects(&m, "bkt", "ca")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(keys.iter().any(|k| k == name), "{keys:?}");
}

#[test]
fn a_kv_append_on_s3_replaces_committed_keys_with_last_win() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let (a, b) = (t.path().join("a.arrow"), t.path().join("b.arrow"));
    input(&a, 1, 8);
    // Keys k1-0..k1-2 again: each shard of the first write holds some of them.
    input(&b, 1, 3);
    let run = |args: &[&str]| cli(home, &m.endpoint).args(args).output().unwrap();
    let kv = |inp: &Path, mode: &str, dups: &str, index: bool| {
        let mut args = vec![
            "dataset".to_string(),
            "write".into(),
            inp.to_str().unwrap().into(),
            "s3://bkt/kv".into(),
            "--name-col".into(),
            "id".into(),
            "--dtype".into(),
            "F32".into(),
            "--threads".into(),
            "2".into(),
            "--mode".into(),
            mode.into(),
            "--duplicates-strategy".into(),
            dups.into(),
        ];
        if index {
            args.push("--generate-index".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args)
    };
    ok(&kv(&a, "error", "fail", false));
    let e = err(&kv(&b, "append", "fail", true));
    assert!(e.contains("'k1-0__v' is already in version 1"), "{e}");
    // lastWin, asking for an index over a version that has none: both were refused before.
    ok(&kv(&b, "append", "lastWin", true));
    let info = ok(&run(&["dataset", "info", "s3://bkt/kv"]));
    // Every key once.
    assert!(
        info.contains("version: 2") && info.contains("samples: 8"),
        "{info}"
    );
    let v = ok(&run(&["dataset", "verify", "s3://bkt/kv"]));
    assert!(!v.contains("no version lists"), "{v}");
    // Version 1 still reads, from the shards the append copied rather than changed.
    ok(&run(&[
        "dataset",
        "verify",
        "s3://bkt/kv",
        "--version",
        "1",
    ]));
}
