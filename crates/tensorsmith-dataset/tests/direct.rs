//! Batch-mode shards copied straight from Parquet pages (parquet_direct) against the same
//! write through the Parquet reader (`JobOptions::reader_only`): byte-identical shards,
//! manifests and indexes for every page version, dtype, list kind, tail strategy and task
//! split it takes; every other file falls back to the reader and gives what it gives.

use arrow_array::types::*;
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, LargeListArray, ListArray, PrimitiveArray, RecordBatch,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{WriterProperties, WriterVersion};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tensorsmith::dtype::DType;
#[path = "support/shards.rs"]
mod shards;
use shards::shard_contents;
use tensorsmith_dataset::{
    tensor_index_file, write_dataset, Input, JobOptions, Progress, TailStrategy, WriteOptions,
};

#[derive(Clone, Copy)]
enum ListKind {
    List,
    Large,
    Fixed,
}

/// `rows` rows of `len` values of leaf type `T` (value `k` of the column: `f(k)`), as a list
/// column of `kind`; `nullable`: the list and its items may be null (none is).
fn column<T: ArrowPrimitiveType>(
    rows: usize,
    len: usize,
    kind: ListKind,
    nullable: bool,
    f: impl Fn(usize) -> T::Native,
) -> (Field, ArrayRef) {
    let values: ArrayRef = Arc::new(PrimitiveArray::<T>::from_iter_values(
        (0..rows * len).map(f),
    ));
    let item = Arc::new(Field::new("item", T::DATA_TYPE, nullable));
    let (t, a): (DataType, ArrayRef) = match kind {
        ListKind::List => {
            let o = OffsetBuffer::new(ScalarBuffer::from_iter(
                (0..=rows).map(|r| (r * len) as i32),
            ));
            let a = ListArray::new(item.clone(), o, values, None);
            (DataType::List(item), Arc::new(a))
        }
        ListKind::Large => {
            let o = OffsetBuffer::new(ScalarBuffer::from_iter(
                (0..=rows).map(|r| (r * len) as i64),
            ));
            let a = LargeListArray::new(item.clone(), o, values, None);
            (DataType::LargeList(item), Arc::new(a))
        }
        ListKind::Fixed => {
            let a = FixedSizeListArray::new(item.clone(), len as i32, values, None);
            (DataType::FixedSizeList(item, len as i32), Arc::new(a))
        }
    };
    (Field::new("c", t, nullable), a)
}

fn props() -> parquet::file::properties::WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_compression(Compression::UNCOMPRESSED)
        .set_max_row_group_row_count(Some(7))
        .set_data_page_size_limit(64)
        .set_write_batch_size(3)
}

/// Writes `cols` (renamed c0, c1, ...) as a Parquet file, in record batches of 11 rows.
fn parquet(path: &Path, cols: Vec<(Field, ArrayRef)>, props: WriterProperties) {
    let fields: Vec<Field> = cols
        .iter()
        .enumerate()
        .map(|(i, (f, _))| f.clone().with_name(format!("c{i}")))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let arrays: Vec<ArrayRef> = cols.into_iter().map(|(_, a)| a).collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    let mut at = 0;
    while at < batch.num_rows() {
        let n = 11.min(batch.num_rows() - at);
        w.write(&batch.slice(at, n)).unwrap();
        at += n;
    }
    w.close().unwrap();
}

/// Shard bytes by name without its uuid (`part-TTTTT-NNNN`), then the manifest and the index
/// with shard names cut the same way.
type Output = (Vec<(String, Vec<u8>)>, serde_json::Value, Vec<String>);

fn contents(dir: &Path) -> Output {
    let shards = shard_contents(dir);
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("dataset_manifest.json")).unwrap()).unwrap();
    for s in m["shards"].as_array_mut().unwrap() {
        let p = s["shard_path"].as_str().unwrap()[..15].to_string();
        s["shard_path"] = p.into();
    }
    let idx = dir.join("_tensor_index.parquet");
    let entries = if idx.exists() {
        tensor_index_file::read(&idx)
            .unwrap()
            .into_iter()
            .map(|e| {
                format!(
                    "{} {} {:?} {}",
                    e.tensor_key,
                    &e.file_name[..15],
                    e.shape,
                    e.dtype
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    (shards, m, entries)
}

/// Writes `inputs` with `o` on `threads` threads both ways and checks the outputs are
/// identical; returns the shards copied from pages, or both errors' texts.
fn both_ways(inputs: &[&Path], o: &WriteOptions, threads: usize) -> Result<u64, (String, String)> {
    let tmp = tempfile::tempdir().unwrap();
    let run = |reader_only: bool| {
        let out = tmp.path().join(format!("o{reader_only}"));
        let job = JobOptions::new()
            .with_threads(threads)
            .with_reader_only(reader_only);
        let p = Progress::default();
        let input = Input::open(inputs).unwrap();
        write_dataset(&input, &out, o, &job, &p)
            .map(|_| (contents(&out), p.direct_shards.load(Ordering::Relaxed)))
            .map_err(|e| e.to_string())
    };
    match (run(false), run(true)) {
        (Ok((a, direct)), Ok((b, none))) => {
            assert_eq!(none, 0);
            assert!(a.0 == b.0, "shards differ");
            assert_eq!(a.1, b.1, "manifests differ");
            assert_eq!(a.2, b.2, "indexes differ");
            assert!(!a.0.is_empty());
            Ok(direct)
        }
        (Err(a), Err(b)) => Err((a, b)),
        (a, b) => panic!("one way failed: {:?} / {:?}", a.err(), b.err()),
    }
}

fn opts(bs: u64, dtype: DType) -> WriteOptions {
    let mut o = WriteOptions::batch(bs);
    o.dtype = Some(dtype);
    o
}

fn f32_col(rows: usize, len: usize, kind: ListKind) -> (Field, ArrayRef) {
    column::<Float32Type>(rows, len, kind, true, |k| k as f32 * 0.25 - 3.0)
}

#[test]
fn pages_v1_and_v2_every_tail_and_task_split_match_the_reader() {
    let tmp = tempfile::tempdir().unwrap();
    for (v, version) in [
        ("v1", WriterVersion::PARQUET_1_0),
        ("v2", WriterVersion::PARQUET_2_0),
    ] {
        let pq = tmp.path().join(format!("{v}.parquet"));
        parquet(
            &pq,
            vec![f32_col(50, 5, ListKind::List)],
            props().set_writer_version(version).build(),
        );
        for tail in [TailStrategy::Drop, TailStrategy::Pad, TailStrategy::Write] {
            for (bs, threads) in [(4, 1), (4, 3), (7, 2), (50, 2), (64, 1), (1, 2)] {
                let mut o = opts(bs, DType::F32);
                o.tail_strategy = tail;
                o.generate_index = true;
                match both_ways(&[&pq], &o, threads) {
                    Ok(direct) => {
                        assert!(
                            direct > 0,
                            "{v} {tail:?} bs {bs}: no shard copied from pages"
                        )
                    }
                    // Every row dropped: the same error both ways.
                    Err((x, y)) => assert!(x == y && bs > 50 && tail == TailStrategy::Drop, "{x}"),
                }
            }
        }
    }
}

#[test]
fn every_dtype_stored_as_its_own_bytes_is_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 23;
    let cases: Vec<(DType, (Field, ArrayRef))> = vec![
        (DType::F32, f32_col(n, 4, ListKind::Large)),
        (DType::F32, f32_col(n, 4, ListKind::Fixed)),
        (
            DType::F64,
            column::<Float64Type>(n, 3, ListKind::List, true, |k| k as f64 / 3.0),
        ),
        (
            DType::I32,
            column::<Int32Type>(n, 3, ListKind::Fixed, true, |k| k as i32 * 7 - 100),
        ),
        (
            DType::I64,
            column::<Int64Type>(n, 2, ListKind::List, false, |k| (k as i64) << 40),
        ),
        (
            DType::U32,
            column::<UInt32Type>(n, 3, ListKind::List, true, |k| u32::MAX - k as u32),
        ),
        (
            DType::U64,
            column::<UInt64Type>(n, 1, ListKind::List, true, |k| u64::MAX - k as u64),
        ),
        (
            DType::F16,
            column::<Float16Type>(n, 6, ListKind::List, true, |k| {
                half::f16::from_f32(k as f32 - 8.5)
            }),
        ),
    ];
    for (i, (dtype, col)) in cases.into_iter().enumerate() {
        let pq = tmp.path().join(format!("{i}.parquet"));
        parquet(&pq, vec![col], props().build());
        for threads in [1, 2] {
            let direct = both_ways(&[&pq], &opts(5, dtype), threads).unwrap();
            assert_eq!(direct, 5, "case {i} ({dtype}), {threads} threads");
        }
    }
}

#[test]
fn several_columns_shapes_and_several_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a.parquet"), tmp.path().join("b.parquet"));
    for (p, rows) in [(&a, 13), (&b, 18)] {
        parquet(
            p,
            vec![
                f32_col(rows, 6, ListKind::List),
                f32_col(rows, 2, ListKind::Fixed),
            ],
            props().build(),
        );
    }
    let mut o = opts(4, DType::F32);
    o.shapes.insert("c0".into(), vec![2, 3]);
    o.tail_strategy = TailStrategy::Pad;
    for threads in [1, 2, 3] {
        // 31 rows: 8 shards, the last padded; tasks cross the file boundary.
        assert_eq!(both_ways(&[&a, &b], &o, threads), Ok(8));
    }
    // A shape whose elements are not the rows': the reader's error.
    o.shapes.insert("c0".into(), vec![4]);
    let (x, y) = both_ways(&[&a], &o, 1).unwrap_err();
    assert_eq!(x, y);
    assert!(x.contains("the shapes option [4] needs 4"), "{x}");
}

#[test]
fn what_pages_do_not_hold_as_is_goes_through_the_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let write = |name: &str, col: (Field, ArrayRef), props: WriterProperties| {
        let p = tmp.path().join(name);
        parquet(&p, vec![col], props);
        p
    };
    let cases = [
        // Dictionary pages; compressed pages; a cast to F16; integers stored widened.
        (
            write(
                "dict.parquet",
                f32_col(20, 3, ListKind::List),
                props().set_dictionary_enabled(true).build(),
            ),
            DType::F32,
        ),
        (
            write(
                "snappy.parquet",
                f32_col(20, 3, ListKind::List),
                props().set_compression(Compression::SNAPPY).build(),
            ),
            DType::F32,
        ),
        (
            write(
                "cast.parquet",
                f32_col(20, 3, ListKind::List),
                props().build(),
            ),
            DType::F16,
        ),
        (
            write(
                "i16.parquet",
                column::<Int16Type>(20, 3, ListKind::List, true, |k| k as i16),
                props().build(),
            ),
            DType::I16,
        ),
    ];
    for (p, dtype) in &cases {
        assert_eq!(
            both_ways(&[p], &opts(6, *dtype), 2),
            Ok(0),
            "{}",
            p.display()
        );
    }
}

#[test]
fn rows_the_pages_cannot_give_are_the_readers_errors() {
    let tmp = tempfile::tempdir().unwrap();
    // Row 9 has 2 values, the others 3; row 12 is null; row 15 holds a null element.
    let mut b = arrow_array::builder::ListBuilder::new(arrow_array::builder::Float32Builder::new());
    for r in 0..20 {
        for j in 0..if r == 9 { 2 } else { 3 } {
            b.values().append_value((r * 3 + j) as f32);
        }
        b.append(true);
    }
    let col: ArrayRef = Arc::new(b.finish());
    let f = Field::new("c", col.data_type().clone(), true);
    let pq = tmp.path().join("short.parquet");
    parquet(&pq, vec![(f.clone(), col)], props().build());
    let (x, y) = both_ways(&[&pq], &opts(4, DType::F32), 2).unwrap_err();
    assert_eq!(x, y);
    assert!(x.contains("row 9"), "{x}");
    // An empty row where the others hold values.
    let mut b = arrow_array::builder::ListBuilder::new(arrow_array::builder::Float32Builder::new());
    for r in 0..20 {
        if r != 12 {
            b.values().append_slice(&[1.0, 2.0]);
        }
        b.append(r != 12);
    }
    let col: ArrayRef = Arc::new(b.finish());
    let pq = tmp.path().join("null.parquet");
    parquet(&pq, vec![(f.clone(), col)], props().build());
    let (x, y) = both_ways(&[&pq], &opts(4, DType::F32), 1).unwrap_err();
    assert_eq!(x, y);
    assert!(x.contains("row 12"), "{x}");
    let mut b = arrow_array::builder::ListBuilder::new(arrow_array::builder::Float32Builder::new());
    for r in 0..20 {
        b.values().append_value(1.0);
        b.values().append_option((r != 15).then_some(2.0));
        b.append(true);
    }
    let col: ArrayRef = Arc::new(b.finish());
    let pq = tmp.path().join("null-element.parquet");
    parquet(&pq, vec![(f, col)], props().build());
    let (x, y) = both_ways(&[&pq], &opts(4, DType::F32), 1).unwrap_err();
    assert_eq!(x, y);
    assert!(x.contains("row 15") && x.contains("null element"), "{x}");
}

#[test]
fn files_pyarrow_writes_are_copied_from_their_pages() {
    // tests/data/dataset/generate.py: 13 rows of 4 f32, pages of 64 bytes (v1 rows split
    // between pages), row groups of 5 rows, data pages v1 and v2.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dataset");
    for v in ["v1", "v2"] {
        let pq = data.join(format!("input_plain_{v}.parquet"));
        for threads in [1, 2] {
            // 4 shards of 3 rows and the tail of 1.
            assert_eq!(
                both_ways(&[&pq], &opts(3, DType::F32), threads),
                Ok(5),
                "{v}"
            );
        }
    }
}
