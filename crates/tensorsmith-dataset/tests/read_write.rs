//! The library round trip without Python: Arrow IPC input (file and stream) written as a
//! dataset, read back by sample (batch mode) and by key (KV mode), and verified.

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::sync::Arc;
use tensorsmith::dtype::DType;
use tensorsmith_dataset::{
    verify, write_dataset, Dataset, DatasetMode, Input, JobOptions, Progress, WriteOptions,
};

fn batch(rows: std::ops::Range<usize>) -> RecordBatch {
    let mut v = ListBuilder::new(Float32Builder::new());
    for i in rows.clone() {
        for j in 0..3 {
            v.values().append_value((i * 10 + j) as f32);
        }
        v.append(true);
    }
    let ids = StringArray::from(rows.map(|i| format!("r{i}")).collect::<Vec<_>>());
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
            true,
        ),
        Field::new("id", DataType::Utf8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![Arc::new(v.finish()) as ArrayRef, Arc::new(ids)],
    )
    .unwrap()
}

fn write_ipc(path: &Path, stream: bool) {
    let f = std::fs::File::create(path).unwrap();
    let b1 = batch(0..7);
    if stream {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(f, &b1.schema()).unwrap();
        w.write(&b1).unwrap();
        w.write(&batch(7..11)).unwrap();
        w.finish().unwrap();
    } else {
        let mut w = arrow_ipc::writer::FileWriter::try_new(f, &b1.schema()).unwrap();
        w.write(&b1).unwrap();
        w.write(&batch(7..11)).unwrap();
        w.finish().unwrap();
    }
}

#[test]
fn batch_and_kv_datasets_read_back() {
    for stream in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("in.arrow");
        write_ipc(&src, stream);
        let input = Input::open(&[&src]).unwrap();
        let mut o = WriteOptions::batch(4);
        o.dtype = Some(DType::F32);
        o.columns = Some(vec!["v".into()]);
        let out = dir.path().join("b");
        let m = write_dataset(
            &input,
            &out,
            &o,
            &JobOptions::default(),
            &Progress::default(),
        )
        .unwrap();
        assert_eq!(m.total_samples, 11);
        let ds = Dataset::open(&out).unwrap();
        assert_eq!(ds.mode(), DatasetMode::Batch);
        assert_eq!(ds.len().unwrap(), 11);
        for i in [0u64, 4, 9, 10] {
            let s = ds.sample(i).unwrap();
            assert_eq!(s[0].0, "v");
            assert_eq!(s[0].1.shape, vec![3]);
            let want: Vec<u8> = (0..3)
                .flat_map(|j| ((i * 10 + j) as f32).to_le_bytes())
                .collect();
            assert_eq!(s[0].1.data, want, "sample {i}");
        }
        assert!(ds.sample(11).is_err());
        assert!(verify(&out).unwrap().is_ok());

        let mut o = WriteOptions::kv("id");
        o.dtype = Some(DType::F16);
        let out = dir.path().join("kv");
        write_dataset(
            &input,
            &out,
            &o,
            &JobOptions::default(),
            &Progress::default(),
        )
        .unwrap();
        let ds = Dataset::open(&out).unwrap();
        assert_eq!(ds.mode(), DatasetMode::Kv);
        assert_eq!(ds.len().unwrap(), 11);
        let t = ds.tensor("r8__v").unwrap();
        assert_eq!((t.dtype, t.shape.clone()), (DType::F16, vec![3]));
        let want: Vec<u8> = [80.0f32, 81.0, 82.0]
            .iter()
            .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
            .collect();
        assert_eq!(t.data, want);
        assert!(ds.tensor("r11__v").is_err());
        assert!(verify(&out).unwrap().is_ok());
    }
}

/// The metadata vectors in tests/data/dataset (manifests in the connector's shape, an index
/// written by pyarrow with nullable columns, as Spark writes Parquet) read back; damaged
/// copies are refused with the rule that failed.
#[test]
fn metadata_vectors_read_and_damage_is_refused() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dataset");
    let p = data.join("manifest_batch.json");
    let m = tensorsmith_dataset::Manifest::parse(&std::fs::read(&p).unwrap(), &p).unwrap();
    assert_eq!((m.total_samples, m.shards.len()), (2500, 3));
    assert_eq!(m.schema["image"].shape, vec![1000, 3, 4, 4]);
    let p = data.join("manifest_kv.json");
    let text = std::fs::read_to_string(&p).unwrap();
    let m = tensorsmith_dataset::Manifest::parse(text.as_bytes(), &p).unwrap();
    assert_eq!(m.schema["b__emb"].dtype, "BF16");
    for (from, to, rule) in [
        (
            "\"total_samples\": 2",
            "\"total_samples\": 3",
            "totals do not match",
        ),
        (
            "\"format_version\": \"1.0\"",
            "\"format_version\": \"2.0\"",
            "only 1.0",
        ),
        ("part-00000", "../part-00000", "not a file name"),
        (
            "\"shards\": [",
            "\"shards\": [], \"x\": [",
            "lists no shards",
        ),
    ] {
        let bad = text.replacen(from, to, 1);
        let e = tensorsmith_dataset::Manifest::parse(bad.as_bytes(), &p).unwrap_err();
        assert!(e.to_string().contains(rule), "{rule}: {e}");
    }
    let idx = tensorsmith_dataset::tensor_index_file::read(&data.join("index_kv.parquet")).unwrap();
    assert_eq!(idx.len(), 2);
    assert_eq!(
        (idx[1].tensor_key.as_str(), idx[1].shape.clone()),
        ("b__emb", vec![8])
    );
    let e =
        tensorsmith_dataset::tensor_index_file::read(&data.join("manifest_kv.json")).unwrap_err();
    assert!(e.to_string().contains("manifest_kv.json"), "{e}");
}

/// Found by the `dataset` fuzz target: Parquet metadata with a negative column start makes
/// the Parquet reader panic; the index reader reports it as malformed instead.
#[test]
fn parquet_reader_panics_become_errors() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/dataset/fuzz_parquet_negative_column_start.bin");
    let data = std::fs::read(&p).unwrap();
    let e = tensorsmith_dataset::tensor_index_file::read_bytes(
        bytes::Bytes::copy_from_slice(&data[1..]),
        &p,
    )
    .unwrap_err();
    assert!(e.to_string().contains("malformed Parquet"), "{e}");
    // The same bytes as dataset input: an error naming the file, not a crash.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.parquet");
    std::fs::write(&f, &data[1..]).unwrap();
    let e = match Input::open(&[&f]) {
        Err(e) => e,
        Ok(input) => {
            let cols: Vec<String> = input
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            input
                .read_range(0..u64::MAX, &cols, 1024, &mut |_, _, _| Ok(()))
                .expect_err("malformed Parquet read")
        }
    };
    assert!(e.to_string().contains("bad.parquet"), "{e}");
}

/// Found by the `dataset` fuzz target: a 2 KiB index whose page headers declare lists of
/// 2^31 bools, which the Parquet reader skips one zero-byte element at a time (seconds per
/// list). The pre-check (parquet_guard) refuses it after walking its bytes once.
#[test]
fn thrift_list_bombs_are_refused_quickly() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/dataset/fuzz_parquet_slow_thrift_skip.bin");
    let data = std::fs::read(&p).unwrap();
    let t = std::time::Instant::now();
    let e = tensorsmith_dataset::tensor_index_file::read_bytes(
        bytes::Bytes::copy_from_slice(&data[1..]),
        &p,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("malformed Parquet: row group 0"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bomb.parquet");
    std::fs::write(&f, &data[1..]).unwrap();
    let Err(e) = Input::open(&[&f]) else {
        panic!("the bomb opened as input")
    };
    assert!(e.to_string().contains("bomb.parquet"), "{e}");
    assert!(
        e.to_string().contains("malformed Parquet: row group 0"),
        "{e}"
    );
    // Unguarded, a debug build spends well over a minute here.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
}

/// Found by the `dataset` fuzz target, three times: a schema element claiming up to 2^31
/// children made the Parquet reader reserve up to 15 GB before reading them. In the second and
/// third vectors the count is in a field whose header declares another type (a UUID; a string
/// read by arrow-rs as the name), which arrow-rs reads as an i32 anyway; the pre-check holds
/// every field it knows to its type, so it reads what arrow-rs reads, and refuses all three.
#[test]
fn schema_child_counts_are_bounded_before_the_reader_allocates() {
    for (name, why_part) in [
        ("fuzz_parquet_schema_children_oom.bin", "more children"),
        (
            "fuzz_parquet_schema_children_oom2.bin",
            "not the type the Parquet format gives it",
        ),
        (
            "fuzz_parquet_schema_children_oom3.bin",
            "not the type the Parquet format gives it",
        ),
    ] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/dataset")
            .join(name);
        let data = std::fs::read(&p).unwrap();
        let b = bytes::Bytes::copy_from_slice(&data[1..]);
        let why = tensorsmith_dataset::parquet_guard::check_file_footer(&b).unwrap_err();
        assert!(why.contains(why_part), "{name}: {why}");
        let e = tensorsmith_dataset::tensor_index_file::read_bytes(b, &p).unwrap_err();
        assert!(
            e.to_string().contains("malformed Parquet: footer metadata"),
            "{name}: {e}"
        );
        assert!(e.to_string().contains(name), "{e}");
    }
}

/// Found by the `dataset_write` fuzz target: a Parquet input (pyarrow's, mutated) whose page
/// repetition levels end before the page's value count. Skipping rows into it (a task starting
/// inside a row group) kept arrow-rs 60.1 in an endless loop; reading the same rows fails. The
/// reader path reads and drops the rows before a task's range instead of skipping them, so
/// every task split gives the reader's error, quickly.
#[test]
fn rows_before_a_task_are_read_not_skipped() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/dataset/fuzz_write_skip_spin.parquet");
    for threads in [1, 2, 3] {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = p.clone();
        std::thread::spawn(move || {
            let dir = tempfile::tempdir().unwrap();
            let mut o = WriteOptions::batch(3);
            o.dtype = Some(DType::F32);
            let job = JobOptions::new().with_threads(threads);
            let r = Input::open(&[&p]).and_then(|input| {
                write_dataset(
                    &input,
                    &dir.path().join("o"),
                    &o,
                    &job,
                    &Progress::default(),
                )
            });
            let _ = tx.send(r.map(drop).map_err(|e| e.to_string()));
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the write still runs after 30 s")
            .unwrap_err();
        assert!(
            e.contains("fuzz_write_skip_spin.parquet") && e.contains("repetition levels"),
            "{threads} threads: {e}"
        );
    }
}
