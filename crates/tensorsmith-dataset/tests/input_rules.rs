//! Input refused at write time by the rule it breaks, before a dataset is written: KV column
//! names that hold the separator.

use arrow_array::builder::{Float64Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use std::path::Path;
use std::sync::Arc;
use tensorsmith::dtype::DType;
use tensorsmith_dataset::{write_dataset, Dataset, Input, JobOptions, Progress, WriteOptions};

/// A record batch of `cols` (name, array).
fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(cols).unwrap()
}

fn f64_lists(rows: &[&[f64]]) -> ArrayRef {
    let mut b = ListBuilder::new(Float64Builder::new());
    for r in rows {
        b.values().append_slice(r);
        b.append(true);
    }
    Arc::new(b.finish())
}

fn keys(k: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(k.to_vec()))
}

/// `b` as a Parquet file, pages PLAIN (no dictionary) when `plain`.
fn parquet(path: &Path, b: &RecordBatch, plain: bool) {
    let props = WriterProperties::builder()
        .set_dictionary_enabled(!plain)
        .build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        b.schema(),
        Some(props),
    )
    .unwrap();
    w.write(b).unwrap();
    w.close().unwrap();
}

/// Writes `input` to `out`: the number of shards decoded from Parquet pages, or the error.
fn write(input: &Input, out: &Path, o: &WriteOptions, reader_only: bool) -> Result<u64, String> {
    let job = JobOptions::new().with_reader_only(reader_only);
    let p = Progress::default();
    match write_dataset(input, out, o, &job, &p) {
        Ok(_) => Ok(p.decoded_shards.load(std::sync::atomic::Ordering::Relaxed)),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn a_kv_column_name_holding_the_separator_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("in.parquet");
    let b = batch(vec![
        ("img__emb", f64_lists(&[&[1.0], &[2.0]])),
        ("txt", f64_lists(&[&[3.0], &[4.0]])),
        ("id", keys(&["alice", "bob"])),
    ]);
    parquet(&src, &b, false);
    let input = Input::open(&[&src]).unwrap();
    let mut o = WriteOptions::kv("id");
    o.dtype = Some(DType::F32);
    let out = d.path().join("ds");
    let e = write(&input, &out, &o, false).unwrap_err();
    assert!(e.contains("column 'img__emb'"), "{e}");
    assert!(e.contains("the KV separator '__'"), "{e}");
    assert!(e.contains("kv_separator option"), "{e}");
    assert!(!out.join("dataset_manifest.json").exists());
    // A column that begins with the end of the separator splits wrongly too.
    let b = batch(vec![("_x", f64_lists(&[&[1.0]])), ("id", keys(&["alice"]))]);
    parquet(&src, &b, false);
    let input = Input::open(&[&src]).unwrap();
    let e = write(&input, &out, &o, false).unwrap_err();
    assert!(e.contains("would see a column 'x'"), "{e}");
    // Another separator: written, and read back as two columns of two names.
    let b = batch(vec![
        ("img__emb", f64_lists(&[&[1.0], &[2.0]])),
        ("txt", f64_lists(&[&[3.0], &[4.0]])),
        ("id", keys(&["alice", "bob"])),
    ]);
    parquet(&src, &b, false);
    let input = Input::open(&[&src]).unwrap();
    o.kv_separator = "::".into();
    write(&input, &out, &o, false).unwrap();
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(ds.tensor("alice::img__emb").unwrap().shape, vec![1]);
}
