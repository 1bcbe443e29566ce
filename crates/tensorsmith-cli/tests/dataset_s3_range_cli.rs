//! Datasets on S3 read by range (issue 41, item 4), against moto in server mode behind the
//! counting forwarder (`object_store/proxy.rs`): one column of a dataset of three read
//! through `Dataset` (and `dataset export --column`) moves that column's bytes (plus
//! headers, manifest, versions and index), not the shards; what was read is not fetched
//! again; a read of every column fetches each shard whole once; a shard replaced
//! between its open and a tensor read is `ChangedDuringRead`, never a mix of two versions; a
//! shard `dataset clean` removed, opened or not, is the version's removal error.

#[path = "object_store/moto.rs"]
mod moto;
#[path = "object_store/proxy.rs"]
mod proxy;

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use moto::{ok, signed_cli as cli, Moto, KEY, SECRET};
use proxy::Proxy;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tensorsmith::bytes::StorageOptions;
use tensorsmith::ErrorKind;
use tensorsmith_dataset::{Dataset, DatasetError};

const ROWS: u32 = 1024;
const WIDTH: u32 = 1024;
const BATCH: &str = "256";
/// What a shard's open fetches (`read.rs`'s `SHARD_OPEN_BYTES`): its header.
const OPEN_PREFIX: u64 = 4096;

/// An Arrow IPC file of `ROWS` samples of three columns `a`, `b`, `c`, each `WIDTH` f32
/// (sample `r` of column `k`: `k * 1e6 + r * WIDTH + i`).
fn input(path: &Path) {
    let list = DataType::List(Arc::new(Field::new("item", DataType::Float32, true)));
    let names = ["a", "b", "c"];
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, list.clone(), false))
            .collect::<Vec<_>>(),
    ));
    let cols: Vec<ArrayRef> = (0..3u32)
        .map(|k| {
            let mut b = ListBuilder::new(Float32Builder::new());
            for r in 0..ROWS {
                for i in 0..WIDTH {
                    b.values()
                        .append_value((k * 1_000_000 + r * WIDTH + i) as f32);
                }
                b.append(true);
            }
            Arc::new(b.finish()) as ArrayRef
        })
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let f = std::fs::File::create(path).unwrap();
    let mut w = arrow_ipc::writer::FileWriter::try_new(f, &schema).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

fn write_args<'a>(inp: &'a Path, out: &'a str) -> Vec<&'a str> {
    vec![
        "dataset",
        "write",
        inp.to_str().unwrap(),
        out,
        "--batch-size",
        BATCH,
        "--columns",
        "a,b,c",
        "--dtype",
        "F32",
        "--generate-index",
    ]
}

fn storage(endpoint: &str) -> StorageOptions {
    let mut o = StorageOptions::new();
    for (k, v) in [
        ("endpoint_url", endpoint),
        ("key", KEY),
        ("secret", SECRET),
        ("region", "us-east-1"),
    ] {
        o.set(k, v).unwrap();
    }
    o
}

/// Column `k`'s values of rows `rows`, as little-endian bytes.
fn expected(k: u32, rows: std::ops::Range<u32>) -> Vec<u8> {
    rows.flat_map(|r| (0..WIDTH).map(move |i| (k * 1_000_000 + r * WIDTH + i) as f32))
        .flat_map(f32::to_le_bytes)
        .collect()
}

#[test]
fn one_column_of_an_s3_dataset_moves_that_columns_bytes() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let inp = t.path().join("in.arrow");
    input(&inp);
    ok(&cli(t.path(), &m.endpoint)
        .args(write_args(&inp, "s3://bkt/ds"))
        .output()
        .unwrap());
    let p = Proxy::start(&m.endpoint);
    let opts = storage(&p.endpoint);
    let ds = Dataset::open_at("s3://bkt/ds", &opts, None).unwrap();
    let at_open = p.down.load(Ordering::SeqCst) as u64;
    let shards = ds.manifest().shards.len() as u64;
    assert_eq!(shards, 4);
    let total: u64 = ds.manifest().shards.iter().map(|s| s.bytes).sum();
    let requests_before = p.requests.load(Ordering::SeqCst) as u64;

    // One column of every row: that column's bytes move, and the shards' headers.
    let cols = ds.rows_of(0..u64::from(ROWS), Some(&["b"])).unwrap();
    assert_eq!(cols.len(), 1);
    assert_eq!(cols[0].name, "b");
    assert_eq!(cols[0].shape, vec![u64::from(ROWS), u64::from(WIDTH)]);
    assert!(cols[0].data == expected(1, 0..ROWS), "column b's values");
    let column = cols[0].data.len() as u64;
    let moved = p.down.load(Ordering::SeqCst) as u64 - at_open;
    let requests = p.requests.load(Ordering::SeqCst) as u64 - requests_before;
    // Each response's status line and headers: well under 2 KiB.
    let allowance = shards * OPEN_PREFIX + requests * 2048;
    eprintln!(
        "open (manifest, versions, index): {at_open} B; one column: {moved} B in {requests} \
         requests for a column of {column} B, a dataset of {total} B"
    );
    assert!(
        moved as f64 <= 1.1 * column as f64 + allowance as f64,
        "moved {moved} B for a column of {column} B (+ {allowance} B of headers)"
    );
    assert!(moved < total / 2, "moved {moved} B of a {total} B dataset");
    for k in 0..ds.manifest().shards.len() {
        assert!(!ds.file(k).unwrap().is_downloaded());
    }

    // One sample's column: its row alone.
    let before = p.down.load(Ordering::SeqCst) as u64;
    let s = ds.rows_of(700..701, Some(&["c"])).unwrap();
    assert!(s[0].data == expected(2, 700..701));
    let one = p.down.load(Ordering::SeqCst) as u64 - before;
    assert!(one < u64::from(WIDTH) * 4 + 2048, "one row moved {one} B");

    // What was read is kept: column b again moves nothing, and is a view (of the cache's map).
    let before = p.down.load(Ordering::SeqCst) as u64;
    let again = ds.rows_of(256..512, Some(&["b"])).unwrap();
    assert!(matches!(again[0].data, std::borrow::Cow::Borrowed(_)));
    assert!(again[0].data == expected(1, 256..512));
    assert_eq!(p.down.load(Ordering::SeqCst) as u64, before, "read again");

    // Every column of a shard: what the shard's cache lacks is fetched in one download, then
    // read from there.
    let held = ds.file(2).unwrap().bytes_held();
    let before = p.down.load(Ordering::SeqCst) as u64;
    let all = ds.shard_rows(2, 0..256).unwrap();
    assert_eq!(all.len(), 3);
    assert!(all[0].data == expected(0, 512..768));
    assert!(all[2].data == expected(2, 512..768));
    assert!(ds.file(2).unwrap().is_downloaded());
    let whole = p.down.load(Ordering::SeqCst) as u64 - before;
    let size = ds.manifest().shards[2].bytes;
    let lacking = size - held;
    assert!(
        whole <= lacking + 16 * 2048 && whole + OPEN_PREFIX >= lacking,
        "{whole} B for the {lacking} B of a shard of {size} B not read before"
    );
    let before = p.down.load(Ordering::SeqCst) as u64;
    ds.shard_rows(2, 0..256).unwrap();
    assert_eq!(
        p.down.load(Ordering::SeqCst) as u64,
        before,
        "read again from the download"
    );

    // `dataset export --column b`: the local export's file, and column b's bytes moved.
    let local = t.path().join("local");
    ok(&cli(t.path(), &m.endpoint)
        .args(write_args(&inp, local.to_str().unwrap()))
        .output()
        .unwrap());
    let (e1, e2) = (t.path().join("l.parquet"), t.path().join("r.parquet"));
    let export = |from: &str, to: &Path| {
        ok(&cli(t.path(), &p.endpoint)
            .args([
                "dataset",
                "export",
                from,
                to.to_str().unwrap(),
                "--column",
                "b",
            ])
            .output()
            .unwrap())
    };
    export(local.to_str().unwrap(), &e1);
    let (before, requests_before) = (
        p.down.load(Ordering::SeqCst) as u64,
        p.requests.load(Ordering::SeqCst) as u64,
    );
    export("s3://bkt/ds", &e2);
    let moved = p.down.load(Ordering::SeqCst) as u64 - before;
    let requests = p.requests.load(Ordering::SeqCst) as u64 - requests_before;
    assert_eq!(std::fs::read(&e1).unwrap(), std::fs::read(&e2).unwrap());
    let allowance = 2 * at_open + shards * OPEN_PREFIX + requests * 2048;
    eprintln!("export --column b: {moved} B in {requests} requests");
    let o = cli(t.path(), &m.endpoint)
        .args(["dataset", "export", "s3://bkt/ds", e2.to_str().unwrap()])
        .args(["--column", "b", "--column", "z"])
        .output()
        .unwrap();
    let e = moto::err(&o);
    assert!(e.contains("no column 'z' in the dataset"), "{e}");
    assert!(
        moved as f64 <= 1.1 * column as f64 + allowance as f64,
        "export moved {moved} B for a column of {column} B (+ {allowance} B)"
    );
}

#[test]
fn a_shard_replaced_after_its_open_is_changed_during_read() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let inp = t.path().join("in.arrow");
    input(&inp);
    ok(&cli(t.path(), &m.endpoint)
        .args(write_args(&inp, "s3://bkt/ds"))
        .output()
        .unwrap());
    let ds = Dataset::open_at("s3://bkt/ds", &storage(&m.endpoint), None).unwrap();
    let key = ds.manifest().shards[1].shard_path.clone();
    // The shard's header is read (its version pinned), then the object is replaced by the
    // same bytes but one value of column b.
    let f = ds.file(1).unwrap();
    let b = f.info("b").unwrap().data_range();
    m.py(&format!(
        "o = s3.get_object(Bucket='bkt', Key='ds/{key}')['Body'].read()\n\
         o = o[:{at}] + bytes([o[{at}] ^ 0xff]) + o[{at} + 1:]\n\
         s3.put_object(Bucket='bkt', Key='ds/{key}', Body=o)\n",
        at = b.start + 8
    ));
    for read in [ds.rows_of(256..512, Some(&["b"])), ds.shard_rows(1, 0..256)] {
        match read {
            Err(DatasetError::Tensor(e)) => assert!(
                matches!(e.kind(), ErrorKind::ChangedDuringRead { .. }),
                "{e}"
            ),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a read of a replaced shard gave bytes"),
        }
    }

    // The CLI: `dataset export --column b` with the last shard replaced between its header
    // and its column (before the export's last request) exits 3 and writes nothing.
    let last = ds.manifest().shards[3].shard_path.clone();
    let out = t.path().join("e.parquet");
    let export = |endpoint: &str| {
        cli(t.path(), endpoint)
            .args(["dataset", "export", "s3://bkt/ds", out.to_str().unwrap()])
            .args(["--column", "b"])
            .output()
            .unwrap()
    };
    let counted = Proxy::start(&m.endpoint);
    ok(&export(&counted.endpoint));
    let requests = counted.requests.load(Ordering::SeqCst);
    std::fs::remove_file(&out).unwrap();
    let (py, endpoint) = (moto::python(), m.endpoint.clone());
    let replace = move || {
        let code = format!(
            "import boto3\n\
             s3 = boto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='{KEY}', \
             aws_secret_access_key='{SECRET}', region_name='us-east-1')\n\
             o = s3.get_object(Bucket='bkt', Key='ds/{last}')['Body'].read()\n\
             s3.put_object(Bucket='bkt', Key='ds/{last}', Body=o[:-1] + bytes([o[-1] ^ 1]))\n"
        );
        let st = std::process::Command::new(&py)
            .args(["-c", &code])
            .status()
            .unwrap();
        assert!(st.success());
    };
    let hooked = Proxy::start_with_hook(&m.endpoint, requests, Box::new(replace));
    let o = export(&hooked.endpoint);
    let e = moto::err(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(e.contains("changed during the read"), "{e}");
    assert!(!out.exists());
}

#[test]
fn shards_of_a_version_clean_removed_are_version_removed_mid_read() {
    let m = Moto::start();
    m.bucket("bkt");
    let t = tempfile::tempdir().unwrap();
    let inp = t.path().join("in.arrow");
    input(&inp);
    let run = |args: &[&str]| cli(t.path(), &m.endpoint).args(args).output().unwrap();
    ok(&run(&write_args(&inp, "s3://bkt/ds")));
    let ds = Dataset::open_at("s3://bkt/ds", &storage(&m.endpoint), None).unwrap();
    // Shard 0's header is read (opened, by range); shard 1 is not opened yet.
    ds.file(0).unwrap();
    let mut args = write_args(&inp, "s3://bkt/ds");
    args.extend(["--mode", "overwrite"]);
    ok(&run(&args));
    ok(&run(&[
        "dataset",
        "clean",
        "s3://bkt/ds",
        "--older-than",
        "0",
    ]));
    for read in [
        ds.rows_of(0..10, Some(&["a"])),
        ds.rows_of(300..310, Some(&["a"])),
    ] {
        match read {
            Err(e @ DatasetError::VersionRemoved { .. }) => assert!(
                e.to_string()
                    .contains("version 1 of s3://bkt/ds was removed by `dataset clean`"),
                "{e}"
            ),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a removed shard read"),
        }
    }
}
