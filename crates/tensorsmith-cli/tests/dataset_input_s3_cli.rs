//! Dataset input on S3 (issue 33), against moto in server mode (from the repository's
//! `.venv`, required): `dataset write s3://…/a.parquet s3://…/b.parquet OUT` gives the shards
//! and manifest a write of the same local files gives, byte for byte, to a local folder and
//! to `s3://`, in batch and KV mode, through the page copy and decoding and through the
//! Parquet reader; a prefix lists its files in name order (`_`/`.` names skipped); Arrow IPC
//! input is read too; a missing object or an unknown scheme is named; with 5 MiB parts a
//! multi-part input is read by ranged GETs, each byte once; an object replaced mid-read is
//! caught. Remote Parquet goes through the Parquet reader by default, and through the page
//! plan with the hidden `--parquet-remote-pages`: both are checked.

#[path = "object_store/dataset_files.rs"]
mod dataset_files;
#[path = "object_store/moto.rs"]
mod moto;
#[path = "object_store/proxy.rs"]
mod proxy;

use dataset_files::{b64, stem};
use moto::{err, ok, python, signed_cli as cli, Moto, KEY, SECRET};
use proxy::Proxy;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::Ordering;

/// Writes Parquet (and Arrow IPC) inputs with pyarrow: `a.parquet` as pyarrow writes by
/// default (snappy, dictionary), `b.parquet` PLAIN and uncompressed (the page copy's case),
/// several row groups each; `c.arrow` an IPC file. Columns: `v` (list<float32> of `n` values),
/// `label` (list<int32> of 2), `id` (string, unique across the files).
fn inputs(dir: &Path, rows: usize, n: usize) {
    let code = format!(
        "import numpy as np, pyarrow as pa, pyarrow.parquet as pq, pyarrow.ipc as ipc\n\
         def t(seed, rows):\n\
         \x20   r = np.random.default_rng(seed)\n\
         \x20   v = r.standard_normal((rows, {n}), dtype=np.float32)\n\
         \x20   v[:, 0] = np.arange(rows)  # some repeats for the dictionary\n\
         \x20   col = pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), {n}).cast(pa.list_(pa.float32()))\n\
         \x20   return pa.table({{'v': col, 'label': pa.array([[i % 7, i] for i in range(rows)], pa.list_(pa.int32())), 'id': [f'k{{seed}}-{{i}}' for i in range(rows)]}})\n\
         d = {dir:?}\n\
         pq.write_table(t(1, {rows}), d + '/a.parquet', row_group_size=max(1, {rows} // 3))\n\
         pq.write_table(t(2, {rows}), d + '/b.parquet', row_group_size=max(1, {rows} // 2), compression='none', use_dictionary=False)\n\
         tb = t(3, {rows})\n\
         with ipc.new_file(d + '/c.arrow', tb.schema) as w:\n\
         \x20   w.write_table(tb, max_chunksize=max(1, {rows} // 4))\n",
        dir = dir.to_str().unwrap(),
    );
    let o = std::process::Command::new(python())
        .args(["-c", &code])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A digest of some bytes, and their length (assertions print these, not the bytes).
fn digest(b: &[u8]) -> (usize, u64) {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    (b.len(), h.finish())
}

/// Files of a local dataset folder by name (uuids taken out of shard names), with digests.
fn folder(dir: &Path) -> Vec<(String, (usize, u64))> {
    let mut v: Vec<(String, (usize, u64))> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (stem(&name), digest(&std::fs::read(e.path()).unwrap()))
        })
        .filter(|(n, _)| n.ends_with(".safetensors") || n.starts_with("part-"))
        .collect();
    v.sort();
    v
}

/// The manifest's JSON with the shard names' uuids taken out.
fn manifest(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("dataset_manifest.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for s in v["shards"].as_array_mut().unwrap() {
        let p = s["shard_path"].as_str().unwrap().to_string();
        s["shard_path"] = stem(&p).into();
    }
    v
}

/// Shards (by stem) of a dataset on moto, with digests.
fn remote_shards(m: &Moto, bucket: &str, prefix: &str) -> Vec<(String, (usize, u64))> {
    let out = m.py(&format!(
        "import base64\n\
         for o in s3.list_objects_v2(Bucket='{bucket}', Prefix='{prefix}/').get('Contents', []):\n\
         \x20   k = o['Key'][len('{prefix}/'):]\n\
         \x20   if k.startswith('part-'):\n\
         \x20       b = s3.get_object(Bucket='{bucket}', Key=o['Key'])['Body'].read()\n\
         \x20       print(k, base64.b64encode(b).decode())\n"
    ));
    let mut v: Vec<(String, (usize, u64))> = out
        .lines()
        .map(|l| {
            let (k, b) = l.split_once(' ').unwrap();
            (stem(k), digest(&b64(b)))
        })
        .collect();
    v.sort();
    v
}

/// (shards copied from pages, decoded from pages, through the reader) from the summary line.
fn paths_taken(o: &Output) -> (u64, u64, u64) {
    let e = String::from_utf8_lossy(&o.stderr);
    let num = |what: &str| -> u64 {
        let i = e.find(what).unwrap_or_else(|| panic!("no '{what}' in {e}"));
        let n = e[..i].split_whitespace().last().unwrap();
        n.trim_start_matches('(').parse().unwrap()
    };
    (
        num(" copied from Parquet pages"),
        num(" decoded from Parquet pages"),
        num(" through the Parquet reader"),
    )
}

fn write(m: &Moto, home: &Path, ins: &[&str], out: &str, extra: &[&str]) -> Output {
    let mut args = vec!["dataset", "write"];
    args.extend_from_slice(ins);
    args.push(out);
    if !extra.contains(&"--threads") {
        args.extend_from_slice(&["--threads", "2"]);
    }
    args.extend_from_slice(extra);
    cli(home, &m.endpoint).args(&args).output().unwrap()
}

#[test]
fn parquet_and_arrow_on_s3_write_the_local_dataset() {
    let m = Moto::start();
    m.bucket("inp");
    m.bucket("outp");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    inputs(&src, 120, 16);
    for f in ["a.parquet", "b.parquet", "c.arrow"] {
        m.put_file("inp", &format!("data/{f}"), &src.join(f));
    }
    // Listed prefixes skip these, as a local folder's listing does.
    m.put_file("inp", "data/pq/_SUCCESS", &src.join("c.arrow"));
    m.put_file("inp", "data/pq/.a.parquet.crc", &src.join("c.arrow"));
    m.put_file("inp", "data/pq/a.parquet", &src.join("a.parquet"));
    m.put_file("inp", "data/pq/b.parquet", &src.join("b.parquet"));
    m.put_file("inp", "data/pq/sub/x.parquet", &src.join("a.parquet"));

    let a = src.join("a.parquet");
    let b = src.join("b.parquet");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let modes: [(&str, Vec<&str>); 4] = [
        (
            "batch",
            vec!["--batch-size", "25", "--columns", "v", "--dtype", "F32"],
        ),
        (
            "batch-reader",
            vec![
                "--batch-size",
                "25",
                "--columns",
                "v",
                "--dtype",
                "F32",
                "--parquet-reader-only",
            ],
        ),
        (
            "batch-cast",
            vec![
                "--batch-size",
                "40",
                "--columns",
                "v,label",
                "--dtype",
                "F16",
            ],
        ),
        (
            "kv",
            vec![
                "--name-col",
                "id",
                "--columns",
                "v,label",
                "--dtype",
                "F32",
                "--generate-index",
            ],
        ),
    ];
    for (name, extra) in &modes {
        let local = t.path().join(format!("local-{name}"));
        let lo = write(&m, home, &[a, b], local.to_str().unwrap(), extra);
        ok(&lo);
        let want = folder(&local);
        assert!(!want.is_empty(), "{name}");
        let want_paths = paths_taken(&lo);

        // Objects named one by one, to a local folder: through the Parquet reader (remote
        // files' default), and through the page plan as the local files went.
        for pages in [false, true] {
            let got = t.path().join(format!("from-s3-{name}-{pages}"));
            let mut extra = extra.clone();
            if pages {
                extra.push("--parquet-remote-pages");
            }
            let o = write(
                &m,
                home,
                &["s3://inp/data/a.parquet", "s3a://inp/data/b.parquet"],
                got.to_str().unwrap(),
                &extra,
            );
            ok(&o);
            assert_eq!(folder(&got), want, "{name} ({pages}): shards differ");
            assert_eq!(manifest(&got), manifest(&local), "{name}: manifests differ");
            let (c, d, r) = want_paths;
            let paths = if pages { want_paths } else { (0, 0, c + d + r) };
            assert_eq!(paths_taken(&o), paths, "{name} ({pages})");
        }

        // A prefix (its `_`/`.` names and sub-prefixes skipped), to s3://.
        for (i, prefix) in ["s3://inp/data/pq/", "s3://inp/data/pq"].iter().enumerate() {
            let out = format!("s3://outp/{name}-{i}");
            ok(&write(&m, home, &[prefix], &out, extra));
            let shards = remote_shards(&m, "outp", &format!("{name}-{i}"));
            let local_shards: Vec<_> = want
                .iter()
                .filter(|(n, _)| n.starts_with("part-"))
                .cloned()
                .collect();
            assert_eq!(shards, local_shards, "{name} from {prefix}: shards differ");
        }
    }
    let mut extra = modes[0].1.clone();
    extra.push("--parquet-remote-pages");
    let (copied, decoded, _) = paths_taken(&write(
        &m,
        home,
        &["s3://inp/data/a.parquet", "s3://inp/data/b.parquet"],
        t.path().join("paths").to_str().unwrap(),
        &extra,
    ));
    assert!(
        copied > 0 && decoded > 0,
        "{copied} copied, {decoded} decoded"
    );

    // Arrow IPC file input.
    let c = src.join("c.arrow");
    let extra = ["--batch-size", "30", "--columns", "v", "--dtype", "F32"];
    let local = t.path().join("local-ipc");
    ok(&write(
        &m,
        home,
        &[c.to_str().unwrap()],
        local.to_str().unwrap(),
        &extra,
    ));
    let got = t.path().join("s3-ipc");
    ok(&write(
        &m,
        home,
        &["s3://inp/data/c.arrow"],
        got.to_str().unwrap(),
        &extra,
    ));
    assert_eq!(folder(&got), folder(&local));
    assert_eq!(manifest(&got), manifest(&local));

    // Errors name the URL and what failed; nothing is written.
    let bad = t.path().join("bad");
    let e = err(&write(
        &m,
        home,
        &["s3://inp/data/nope.parquet"],
        bad.to_str().unwrap(),
        &extra,
    ));
    assert!(
        e.contains("s3://inp/data/nope.parquet") && e.contains("not found"),
        "{e}"
    );
    let e = err(&write(
        &m,
        home,
        &["s3://inp/empty/"],
        bad.to_str().unwrap(),
        &extra,
    ));
    assert!(e.contains("no input files in s3://inp/empty/"), "{e}");
    let e = err(&write(
        &m,
        home,
        &["ftp://h/x.parquet"],
        bad.to_str().unwrap(),
        &extra,
    ));
    assert!(
        e.contains("ftp://h/x.parquet") && e.contains("\"ftp\""),
        "{e}"
    );
    let e = err(&write(
        &m,
        home,
        &["s3://nobucket/x.parquet"],
        bad.to_str().unwrap(),
        &extra,
    ));
    assert!(e.contains("nobucket"), "{e}");
    assert!(!bad.exists());
}

/// With 5 MiB parts (2 at once) a 30 MiB input is read by ranged GETs of at most a part, each
/// byte of it fetched once (a block cache of 6 parts, smaller than the file), and the output
/// is the local input's, through the page copy and through the Parquet reader.
#[test]
fn a_multi_part_input_is_read_by_bounded_ranges() {
    let m = Moto::start();
    m.bucket("inp");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    inputs(&src, 1920, 4096);
    let b = src.join("b.parquet");
    let size = std::fs::metadata(&b).unwrap().len();
    assert!(size > 28 << 20, "{size}");
    m.put_file("inp", "big/b.parquet", &b);
    let local = t.path().join("local");
    let extra = [
        "--batch-size",
        "100",
        "--columns",
        "v",
        "--dtype",
        "F32",
        "--storage-option",
        "part_size=5MiB",
        "--storage-option",
        "max_concurrency=2",
        // One task: each byte is wanted once (two tasks would both read the row group
        // their ranges share).
        "--threads",
        "1",
    ];
    ok(&write(
        &m,
        home,
        &[b.to_str().unwrap()],
        local.to_str().unwrap(),
        &extra,
    ));
    for (i, reader_only) in [false, true].into_iter().enumerate() {
        let proxy = Proxy::start(&m.endpoint);
        let got = t.path().join(format!("got-{i}"));
        let mut args = vec![
            "dataset",
            "write",
            "s3://inp/big/b.parquet",
            got.to_str().unwrap(),
        ];
        args.extend_from_slice(&extra);
        if !reader_only {
            args.push("--parquet-remote-pages");
        }
        ok(&cli(home, &proxy.endpoint).args(&args).output().unwrap());
        assert_eq!(folder(&got), folder(&local));
        let moved = proxy.down.load(Ordering::SeqCst) as u64;
        eprintln!("reader only {reader_only}: moved {moved} of {size}");
        let requests = proxy.requests.load(Ordering::SeqCst) as u64;
        // The page plan's scan of headers and levels adds a 64 KiB window per 1 MiB page.
        let limit = size + size / 8;
        assert!(
            moved >= size && moved <= limit,
            "moved {moved} of {size} (reader only: {reader_only})"
        );
        // Ranged GETs of at most a part each.
        assert!(
            requests >= size / (5 << 20),
            "{requests} requests for {size} bytes"
        );
    }
}

/// An input object replaced between two ranged reads fails the write, naming the URL, on
/// either path: never shards of two versions.
#[test]
fn an_input_replaced_mid_read_is_caught() {
    let m = Moto::start();
    m.bucket("inp");
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    inputs(&src, 480, 4096);
    let (a, b) = (src.join("a.parquet"), src.join("b.parquet"));
    for (i, reader_only) in [false, true].into_iter().enumerate() {
        m.put_file("inp", "m/b.parquet", &b);
        let (endpoint, a) = (m.endpoint.clone(), a.to_str().unwrap().to_owned());
        // Past the opening reads (first bytes, footer), another version goes up.
        let proxy = Proxy::start_with_hook(
            &m.endpoint,
            6,
            Box::new(move || {
                let code = format!(
                    "import boto3\nboto3.client('s3', endpoint_url='{endpoint}', \
                     aws_access_key_id='{KEY}', aws_secret_access_key='{SECRET}', \
                     region_name='us-east-1').upload_file({a:?}, 'inp', 'm/b.parquet')"
                );
                let s = std::process::Command::new(python())
                    .args(["-c", &code])
                    .status()
                    .unwrap();
                assert!(s.success());
            }),
        );
        let out = t.path().join(format!("out-{i}"));
        let mut args = vec![
            "dataset",
            "write",
            "s3://inp/m/b.parquet",
            out.to_str().unwrap(),
            "--batch-size",
            "50",
            "--columns",
            "v",
            "--dtype",
            "F32",
            "--storage-option",
            "part_size=5MiB",
        ];
        if !reader_only {
            args.push("--parquet-remote-pages");
        }
        let e = err(&cli(home, &proxy.endpoint).args(&args).output().unwrap());
        assert!(
            e.contains("s3://inp/m/b.parquet") && e.contains("changed during the read"),
            "{e}"
        );
        assert!(!out.join("dataset_manifest.json").exists());
    }
}
