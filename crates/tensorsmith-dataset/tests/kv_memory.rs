//! A KV write of a one-pass stream holds one shard, not its input: 512 MiB of 16 KiB samples
//! streamed into 50 MiB shards (the smallest target), with lastWin duplicates that make the
//! write re-pack every shard, grows peak RSS (VmHWM, reset through /proc/self/clear_refs) by
//! about one shard, far below the input. Alone in its test binary, so no other test's memory
//! is counted.

use arrow_array::{ArrayRef, Float32Array, ListArray, RecordBatch, StringArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;
use tensorsmith::dtype::DType;
use tensorsmith_dataset::{
    write_dataset, Dataset, Duplicates, Input, JobOptions, Progress, WriteMode, WriteOptions,
};

const VALUES: usize = 4096; // 16 KiB of f32 per sample
const ROWS: usize = 32768; // 512 MiB
const BATCH: usize = 256;

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn schema() -> SchemaRef {
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    Arc::new(Schema::new(vec![
        Field::new("v", DataType::List(item), false),
        Field::new("id", DataType::Utf8, false),
    ]))
}

/// Batch `b` of the stream, made when the writer asks for it. Row `i` is keyed `k{i}`,
/// except the last row, which repeats row 0's key (lastWin: the first shard loses a tensor,
/// so every shard is rewritten).
fn make_batch(b: usize) -> RecordBatch {
    let rows = b * BATCH..(b + 1) * BATCH;
    let values: Vec<f32> = rows
        .clone()
        .flat_map(|i| (0..VALUES).map(move |j| (i * 7 + j) as f32))
        .collect();
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let v = ListArray::new(
        item,
        OffsetBuffer::from_lengths(std::iter::repeat_n(VALUES, BATCH)),
        Arc::new(Float32Array::from(values)),
        None,
    );
    let keys: StringArray = rows
        .map(|i| format!("k{}", if i == ROWS - 1 { 0 } else { i }))
        .map(Some)
        .collect();
    let cols: Vec<ArrayRef> = vec![Arc::new(v), Arc::new(keys)];
    RecordBatch::try_new(schema(), cols).unwrap()
}

#[test]
fn a_streamed_kv_write_holds_one_shard_not_its_input() {
    if std::fs::write("/proc/self/clear_refs", "5").is_err() {
        eprintln!("SKIPPED: cannot reset VmHWM here");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ds");
    let stream = arrow_array::RecordBatchIterator::new(
        (0..ROWS / BATCH).map(|b| Ok(make_batch(b))),
        schema(),
    );
    let input = Input::from_reader(Box::new(stream));
    let mut o = WriteOptions::kv("id");
    o.dtype = Some(DType::F32);
    o.duplicates = Duplicates::LastWin;
    o.target_shard_size_mb = 50;
    let job = JobOptions::new().with_mode(WriteMode::ErrorIfExists);
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_kib("VmRSS:");
    let m = write_dataset(&input, &out, &o, &job, &Progress::default()).unwrap();
    let grown_mib = (status_kib("VmHWM:") - before) / 1024;
    eprintln!(
        "512 MiB streamed into {} shards of 50 MiB: peak RSS grew by {grown_mib} MiB",
        m.shards.len()
    );
    assert_eq!(m.total_samples, ROWS as u64 - 1);
    assert!(m.shards.len() >= 10, "{}", m.shards.len());
    // The last row's tensor won its key; row 0's is gone.
    let ds = Dataset::open(&out).unwrap();
    let t = ds.tensor("k0__v").unwrap();
    assert_eq!(t.data[..4], (((ROWS - 1) * 7) as f32).to_le_bytes());
    // One shard being filled (or re-packed) plus a batch read ahead and the key lists; the
    // former implementation collected the whole stream first (over 512 MiB).
    assert!(grown_mib < 50 + 64, "peak RSS grew by {grown_mib} MiB");
}
