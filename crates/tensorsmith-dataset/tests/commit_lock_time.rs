//! How long a commit holds the dataset's commit lock (issue 26: under 50 ms on a local disk
//! for datasets of 1,000 shards and of 100,000 KV keys). Appends to such a dataset, with the
//! index; prints the median and the longest hold. Ignored by default (a minute of writing):
//! `cargo test --release -p tensorsmith-dataset --test commit_lock_time -- --ignored --nocapture`.

use arrow_array::builder::{Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tensorsmith_dataset::{
    write_dataset, DatasetMode, Input, JobOptions, Naming, Progress, WriteMode, WriteOptions,
};

fn input(rows: usize, first: usize) -> Input {
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
    for r in first..first + rows {
        for j in 0..4 {
            b.values().append_value((r * 4 + j) as f32);
        }
        b.append(true);
        k.append_value(format!("key{r:07}"));
    }
    let cols = vec![Arc::new(b.finish()) as ArrayRef, Arc::new(k.finish())];
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    Input::from_batches(schema, vec![batch]).unwrap()
}

fn holds(opts: &WriteOptions, base_rows: usize, what: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let job = JobOptions::new().with_threads(2);
    let p = Progress::default();
    let m = write_dataset(&input(base_rows, 0), dir, opts, &job, &p).unwrap();
    let mut held = Vec::new();
    for i in 0..7 {
        let p = Progress::default();
        let job = job.clone().with_mode(WriteMode::Append);
        write_dataset(&input(4, base_rows + 4 * i), dir, opts, &job, &p).unwrap();
        held.push(p.lock_held_us.load(Ordering::Relaxed) as f64 / 1e3);
    }
    held.sort_by(f64::total_cmp);
    let ds = tensorsmith_dataset::Dataset::open(dir).unwrap();
    let keys = match ds.mode() {
        DatasetMode::Kv => ds.len().unwrap(),
        DatasetMode::Batch => 0,
    };
    eprintln!(
        "{what}: {} shards, {keys} keys: commit lock held median {:.1} ms, max {:.1} ms over {} appends",
        m.shards.len(),
        held[held.len() / 2],
        held[held.len() - 1],
        held.len()
    );
    assert!(held[held.len() / 2] < 50.0, "{held:?}");
}

#[test]
#[ignore]
fn commit_lock_held_under_50ms_for_1000_shards() {
    let mut o = WriteOptions::batch(4);
    o.dtype = Some(tensorsmith::dtype::DType::F32);
    o.columns = Some(vec!["v".into()]);
    o.generate_index = true;
    holds(&o, 4000, "batch");
}

#[test]
#[ignore]
fn commit_lock_held_under_50ms_for_100k_keys() {
    let mut o = WriteOptions::kv("id");
    o.dtype = Some(tensorsmith::dtype::DType::F32);
    o.generate_index = true;
    assert!(matches!(o.naming, Naming::Kv { .. }));
    holds(&o, 100_000, "kv");
}
