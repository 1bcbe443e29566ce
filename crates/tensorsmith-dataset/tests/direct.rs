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
    both_ways_counted(inputs, o, threads).map(|(copied, _)| copied)
}

/// `both_ways`, returning the shards copied from pages and those decoded from pages.
fn both_ways_counted(
    inputs: &[&Path],
    o: &WriteOptions,
    threads: usize,
) -> Result<(u64, u64), (String, String)> {
    let tmp = tempfile::tempdir().unwrap();
    let run = |reader_only: bool| {
        let out = tmp.path().join(format!("o{reader_only}"));
        let job = JobOptions::new()
            .with_threads(threads)
            .with_reader_only(reader_only);
        let p = Progress::default();
        let input = Input::open(inputs).unwrap();
        write_dataset(&input, &out, o, &job, &p)
            .map(|_| {
                let copied = p.direct_shards.load(Ordering::Relaxed);
                let decoded = p.decoded_shards.load(Ordering::Relaxed);
                (contents(&out), (copied, decoded))
            })
            .map_err(|e| e.to_string())
    };
    match (run(false), run(true)) {
        (Ok((a, direct)), Ok((b, none))) => {
            assert_eq!(none, (0, 0));
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

/// Every codec the decoding reads, arrow-rs's name for it.
fn codecs() -> Vec<(&'static str, Compression)> {
    use parquet::basic::{GzipLevel, ZstdLevel};
    vec![
        ("none", Compression::UNCOMPRESSED),
        ("snappy", Compression::SNAPPY),
        ("zstd", Compression::ZSTD(ZstdLevel::try_new(3).unwrap())),
        ("gzip", Compression::GZIP(GzipLevel::default())),
        ("lz4_raw", Compression::LZ4_RAW),
        ("lz4", Compression::LZ4),
    ]
}

/// How the values are encoded: PLAIN, a dictionary, a dictionary that overflows so that the
/// chunk's later pages are PLAIN (pyarrow's and arrow-rs's fallback).
type Builder = parquet::file::properties::WriterPropertiesBuilder;
type Encoding = (&'static str, fn(Builder) -> Builder);

fn encodings() -> Vec<Encoding> {
    vec![
        ("plain", |p| p),
        ("dict", |p| p.set_dictionary_enabled(true)),
        ("dict-fallback", |p| {
            p.set_dictionary_enabled(true)
                .set_dictionary_page_size_limit(24)
        }),
    ]
}

#[test]
fn every_codec_encoding_and_page_version_is_decoded_as_the_reader_writes_it() {
    let tmp = tempfile::tempdir().unwrap();
    // Values repeat (k % 13) so that dictionaries hold; 29 rows of 6, row groups of 7.
    let col = || column::<Float32Type>(29, 6, ListKind::List, true, |k| (k % 13) as f32 - 2.5);
    for (cname, codec) in codecs() {
        for (ename, enc) in encodings() {
            for (v, version) in [
                ("v1", WriterVersion::PARQUET_1_0),
                ("v2", WriterVersion::PARQUET_2_0),
            ] {
                let case = format!("{cname} {ename} {v}");
                let pq = tmp.path().join(format!("{cname}-{ename}-{v}.parquet"));
                let p = enc(props().set_compression(codec).set_writer_version(version));
                parquet(&pq, vec![col()], p.build());
                for (bs, threads) in [(4, 1), (5, 2), (29, 1)] {
                    let mut o = opts(bs, DType::F32);
                    o.tail_strategy = TailStrategy::Pad;
                    o.generate_index = true;
                    let (copied, decoded) = both_ways_counted(&[&pq], &o, threads).unwrap();
                    let shards = 29u64.div_ceil(bs);
                    assert_eq!(copied + decoded, shards, "{case} bs {bs}");
                    if cname == "none" && ename == "plain" {
                        assert_eq!(copied, shards, "{case}");
                    } else if cname != "none" || ename == "dict" {
                        assert_eq!(decoded, shards, "{case}");
                    }
                }
            }
        }
    }
}

#[test]
fn every_dtype_and_cast_is_decoded_from_compressed_dictionary_pages() {
    use tensorsmith::cast::Rounding;
    let tmp = tempfile::tempdir().unwrap();
    let n = 23;
    let f32s = |k: usize| ((k % 11) as f32 - 5.0) * 1.000_123_4 + 1e-4;
    let cases: Vec<(DType, DType, (Field, ArrayRef))> = vec![
        (
            DType::F32,
            DType::F32,
            column::<Float32Type>(n, 4, ListKind::Fixed, true, f32s),
        ),
        (
            DType::F32,
            DType::F16,
            column::<Float32Type>(n, 4, ListKind::Large, true, f32s),
        ),
        (
            DType::F32,
            DType::BF16,
            column::<Float32Type>(n, 4, ListKind::List, true, f32s),
        ),
        (
            DType::F32,
            DType::F64,
            column::<Float32Type>(n, 4, ListKind::List, true, f32s),
        ),
        (
            DType::F64,
            DType::F64,
            column::<Float64Type>(n, 3, ListKind::List, true, |k| (k % 7) as f64 / 3.0),
        ),
        (
            DType::F64,
            DType::BF16,
            column::<Float64Type>(n, 3, ListKind::List, true, |k| (k % 7) as f64 / 3.0),
        ),
        (
            DType::F16,
            DType::F16,
            column::<Float16Type>(n, 6, ListKind::List, true, |k| {
                half::f16::from_f32((k % 9) as f32 - 8.5)
            }),
        ),
        (
            DType::F16,
            DType::F32,
            column::<Float16Type>(n, 6, ListKind::Fixed, true, |k| {
                half::f16::from_f32((k % 9) as f32 - 8.5)
            }),
        ),
        (
            DType::I32,
            DType::I32,
            column::<Int32Type>(n, 3, ListKind::Fixed, true, |k| (k % 5) as i32 * 7 - 100),
        ),
        (
            DType::I32,
            DType::I64,
            column::<Int32Type>(n, 3, ListKind::List, true, |k| (k % 5) as i32 * 7 - 100),
        ),
        (
            DType::I64,
            DType::I64,
            column::<Int64Type>(n, 2, ListKind::List, false, |k| ((k % 4) as i64) << 40),
        ),
        (
            DType::U32,
            DType::U64,
            column::<UInt32Type>(n, 3, ListKind::List, true, |k| u32::MAX - (k % 3) as u32),
        ),
        (
            DType::U32,
            DType::I64,
            column::<UInt32Type>(n, 3, ListKind::List, true, |k| u32::MAX - (k % 3) as u32),
        ),
        (
            DType::U64,
            DType::U64,
            column::<UInt64Type>(n, 1, ListKind::List, true, |k| u64::MAX - (k % 6) as u64),
        ),
    ];
    for (i, (from, to, col)) in cases.into_iter().enumerate() {
        for (ename, enc) in encodings() {
            let pq = tmp.path().join(format!("{i}-{ename}.parquet"));
            let p = enc(props().set_compression(Compression::SNAPPY));
            parquet(&pq, vec![col.clone()], p.build());
            for rounding in [Rounding::Nearest, Rounding::Truncate] {
                let mut o = opts(5, to);
                o.f16_rounding = rounding;
                let got = both_ways_counted(&[&pq], &o, 2);
                assert_eq!(
                    got,
                    Ok((0, 5)),
                    "case {i} ({from} -> {to}, {ename}, {rounding:?})"
                );
            }
        }
    }
}

#[test]
fn a_cast_of_uncompressed_pages_is_decoded_and_several_columns_mix_the_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let pq = tmp.path().join("cast.parquet");
    parquet(&pq, vec![f32_col(20, 3, ListKind::List)], props().build());
    assert_eq!(
        both_ways_counted(&[&pq], &opts(6, DType::F16), 2),
        Ok((0, 4))
    );
    // One column copied, one decoded (a dictionary): the shards count as decoded.
    let two = tmp.path().join("two.parquet");
    let c1 =
        || parquet::schema::types::ColumnPath::new(vec!["c1".into(), "list".into(), "item".into()]);
    let p = props()
        .set_column_dictionary_enabled(c1(), true)
        .set_column_compression(c1(), Compression::SNAPPY);
    parquet(
        &two,
        vec![
            f32_col(20, 3, ListKind::List),
            f32_col(20, 2, ListKind::List),
        ],
        p.build(),
    );
    assert_eq!(
        both_ways_counted(&[&two], &opts(6, DType::F32), 2),
        Ok((0, 4))
    );
}

#[test]
fn what_pages_cannot_give_goes_through_the_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let write = |name: &str, col: (Field, ArrayRef), props: WriterProperties| {
        let p = tmp.path().join(name);
        parquet(&p, vec![col], props);
        p
    };
    let cases = [
        // Integers stored widened; brotli; integers to floats.
        (
            write(
                "i16.parquet",
                column::<Int16Type>(20, 3, ListKind::List, true, |k| k as i16),
                props().build(),
            ),
            DType::I16,
        ),
        (
            write(
                "brotli.parquet",
                f32_col(20, 3, ListKind::List),
                props()
                    .set_compression(Compression::BROTLI(Default::default()))
                    .build(),
            ),
            DType::F32,
        ),
        (
            write(
                "i32-to-f32.parquet",
                column::<Int32Type>(20, 3, ListKind::List, true, |k| k as i32),
                props().set_compression(Compression::SNAPPY).build(),
            ),
            DType::F32,
        ),
    ];
    for (p, dtype) in &cases {
        assert_eq!(
            both_ways_counted(&[p], &opts(6, *dtype), 2),
            Ok((0, 0)),
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

#[test]
fn files_pyarrow_writes_compressed_and_dictionary_encoded_are_decoded_from_their_pages() {
    // tests/data/dataset/generate.py: 13 rows of 4 f32 (7 distinct values), pages of 64 bytes,
    // row groups of 5 rows, every codec, PLAIN / dictionary / dictionary then PLAIN, data
    // pages v1 and v2, page checksums.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dataset");
    let mut seen = 0;
    for codec in ["snappy", "zstd", "gzip", "lz4"] {
        for enc in ["plain", "dict", "fallback"] {
            for v in ["v1", "v2"] {
                let pq = data.join(format!("input_{codec}_{enc}_{v}.parquet"));
                for (threads, to) in [(1, DType::F32), (2, DType::F32), (2, DType::BF16)] {
                    assert_eq!(
                        both_ways_counted(&[&pq], &opts(3, to), threads),
                        Ok((0, 5)),
                        "{}",
                        pq.display()
                    );
                }
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 24);
    // Uncompressed PLAIN pages with checksums: still copied (the CRCs checked first).
    let pq = data.join("input_crc_plain_v1.parquet");
    assert_eq!(
        both_ways_counted(&[&pq], &opts(3, DType::F32), 2),
        Ok((5, 0))
    );
}
