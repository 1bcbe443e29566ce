//! Input refused (or read) at write time by the rule it breaks, before a dataset is written:
//! KV column names that hold the separator, values beyond the target dtype's range (the
//! Parquet reader, the tensor struct and the page decoder alike), input files whose columns
//! differ, Hive-partitioned folders and files that are not input; dictionary-encoded key
//! columns are read as their values.

use arrow_array::builder::{Float64Builder, Int32Builder, ListBuilder};
use arrow_array::types::Int8Type;
use arrow_array::{ArrayRef, DictionaryArray, RecordBatch, StringArray};
use arrow_schema::DataType;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use std::path::Path;
use std::sync::Arc;
use tensorsmith::bytes::StorageOptions;
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

fn i32_lists(rows: &[&[i32]]) -> ArrayRef {
    let mut b = ListBuilder::new(Int32Builder::new());
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

#[test]
fn integers_beyond_f16_are_an_error_naming_row_and_element() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("in.parquet");
    let b = batch(vec![("x", i32_lists(&[&[1, 2], &[3, 70000]]))]);
    parquet(&src, &b, true);
    let input = Input::open(&[&src]).unwrap();
    let mut o = WriteOptions::batch(2);
    o.dtype = Some(DType::F16);
    let out = d.path().join("ds");
    for reader_only in [false, true] {
        let e = write(&input, &out, &o, reader_only).unwrap_err();
        assert!(
            e.contains("column 'x', row 1: element 1 = 70000 does not fit in F16"),
            "{e}"
        );
        assert!(e.contains("in.parquet"), "{e}");
        assert!(!out.join("dataset_manifest.json").exists());
    }
}

#[test]
fn floats_beyond_the_target_are_an_error_and_infinities_stay() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("in.parquet");
    let out = d.path().join("ds");
    let mut o = WriteOptions::batch(2);
    o.dtype = Some(DType::F32);
    // Pages PLAIN (decoded straight into the shard) and dictionary-encoded (the dictionary
    // is cast when the page plan is made), and the Parquet reader.
    for plain in [true, false] {
        let b = batch(vec![(
            "x",
            f64_lists(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 1e300]]),
        )]);
        parquet(&src, &b, plain);
        let input = Input::open(&[&src]).unwrap();
        for reader_only in [false, true] {
            let e = write(&input, &out, &o, reader_only).unwrap_err();
            assert!(
                e.contains("column 'x', row 2: element 1 = 1e300 does not fit in F32"),
                "plain {plain}, reader only {reader_only}: {e}"
            );
            assert!(!out.join("dataset_manifest.json").exists());
        }
        // Infinities and NaNs in the input are kept as they are.
        let b = batch(vec![(
            "x",
            f64_lists(&[&[f64::INFINITY, 2.0], &[f64::NAN, -f64::INFINITY]]),
        )]);
        parquet(&src, &b, plain);
        let input = Input::open(&[&src]).unwrap();
        let decoded = write(&input, &out, &o, false).unwrap();
        assert_eq!(decoded, 1, "the page decoder wrote it");
        let s = Dataset::open(&out).unwrap().sample(1).unwrap();
        let v: Vec<f32> = s[0]
            .1
            .data
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert!(v[0].is_nan() && v[1] == f32::NEG_INFINITY, "{v:?}");
        std::fs::remove_dir_all(&out).unwrap();
    }
}

/// The tensor struct: F64 rows written as F32 by the dtype option.
#[test]
fn tensor_struct_floats_beyond_the_target_are_an_error() {
    use arrow_array::builder::{BinaryBuilder, StringBuilder};
    use arrow_array::{Array, StructArray};
    use arrow_schema::Field;
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("in.parquet");
    let rows: [[f64; 2]; 2] = [[1.0, f64::INFINITY], [2.0, -1e300]];
    let mut data = BinaryBuilder::new();
    let mut shape = ListBuilder::new(Int32Builder::new());
    let mut dtype = StringBuilder::new();
    for r in rows {
        data.append_value(r.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
        shape.values().append_value(2);
        shape.append(true);
        dtype.append_value("F64");
    }
    let shape = shape.finish();
    let fields = vec![
        Field::new("data", DataType::Binary, false),
        Field::new("shape", shape.data_type().clone(), false),
        Field::new("dtype", DataType::Utf8, false),
    ];
    let t = StructArray::try_new(
        fields.into(),
        vec![
            Arc::new(data.finish()),
            Arc::new(shape),
            Arc::new(dtype.finish()),
        ],
        None,
    )
    .unwrap();
    parquet(&src, &batch(vec![("t", Arc::new(t) as ArrayRef)]), false);
    let input = Input::open(&[&src]).unwrap();
    let mut o = WriteOptions::batch(2);
    o.dtype = Some(DType::F32);
    let out = d.path().join("ds");
    let e = write(&input, &out, &o, false).unwrap_err();
    assert!(
        e.contains("column 't', row 1: element 1 = -1e300 does not fit in F32"),
        "{e}"
    );
    assert!(!out.join("dataset_manifest.json").exists());
}

#[test]
fn a_column_only_a_later_file_has_is_an_error_naming_both_files() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("in");
    std::fs::create_dir(&dir).unwrap();
    let narrow = batch(vec![("x", f64_lists(&[&[1.0]]))]);
    let wide = batch(vec![
        ("x", f64_lists(&[&[2.0]])),
        ("y", f64_lists(&[&[3.0]])),
    ]);
    let out = d.path().join("ds");
    let mut o = WriteOptions::batch(1);
    o.dtype = Some(DType::F32);
    let storage = StorageOptions::default();
    let folder = [dir.to_string_lossy().into_owned()];
    for (first, second, has) in [
        (&narrow, &wide, "this file has"),
        (&wide, &narrow, "has the column and this file does not"),
    ] {
        parquet(&dir.join("a.parquet"), first, false);
        parquet(&dir.join("b.parquet"), second, false);
        let input = Input::open_at(&folder, &storage).unwrap();
        let e = write(&input, &out, &o, false).unwrap_err();
        assert!(e.contains("b.parquet: column 'y'"), "{e}");
        assert!(e.contains("a.parquet (the first input file)"), "{e}");
        assert!(e.contains(has), "{e}");
        assert!(!out.join("dataset_manifest.json").exists());
    }
    // With the columns named, only they must agree.
    o.columns = Some(vec!["x".into()]);
    let input = Input::open_at(&folder, &storage).unwrap();
    write(&input, &out, &o, false).unwrap();
    assert_eq!(Dataset::open(&out).unwrap().len().unwrap(), 2);
}

#[test]
fn a_dictionary_encoded_key_column_is_read_as_strings() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("in.parquet");
    let names: DictionaryArray<Int8Type> = vec!["bob", "alice", "bob2"].into_iter().collect();
    let b = batch(vec![
        ("v", f64_lists(&[&[1.0], &[2.0], &[3.0]])),
        ("name", Arc::new(names) as ArrayRef),
    ]);
    parquet(&src, &b, false);
    let input = Input::open(&[&src]).unwrap();
    assert!(matches!(
        input.schema().field_with_name("name").unwrap().data_type(),
        DataType::Dictionary(_, _)
    ));
    let mut o = WriteOptions::kv("name");
    o.dtype = Some(DType::F64);
    let out = d.path().join("ds");
    write(&input, &out, &o, false).unwrap();
    let ds = Dataset::open(&out).unwrap();
    let t = ds.tensor("alice__v").unwrap();
    assert_eq!(t.data, 2.0f64.to_le_bytes());
    assert_eq!(ds.len().unwrap(), 3);
}

#[test]
fn a_hive_partitioned_folder_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("table");
    std::fs::create_dir_all(dir.join("part=0")).unwrap();
    let b = batch(vec![("x", f64_lists(&[&[1.0]]))]);
    parquet(&dir.join("part=0").join("f.parquet"), &b, false);
    let folder = [dir.to_string_lossy().into_owned()];
    let e = Input::open_at(&folder, &StorageOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("{}: a Hive-partitioned folder", dir.display())),
        "{e}"
    );
    assert!(e.contains("subfolder part=0"), "{e}");
}

/// A text file is named as not Parquet or Arrow, without the Arrow stream reader's account of
/// its bytes; a file that starts as an Arrow stream does and is cut short is a damaged stream.
#[test]
fn a_file_that_is_not_input_is_named_for_what_it_is() {
    let d = tempfile::tempdir().unwrap();
    let txt = d.path().join("rows.txt");
    std::fs::write(&txt, "hello, world\n").unwrap();
    let e = Input::open(&[&txt]).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: not a Parquet or Arrow file", txt.display())),
        "{e}"
    );
    assert!(!e.contains("metadata bytes"), "{e}");
    let cut = d.path().join("cut.arrows");
    std::fs::write(&cut, [0xff, 0xff, 0xff, 0xff, 0x40, 0, 0, 0, 1, 2]).unwrap();
    let e = Input::open(&[&cut]).unwrap_err().to_string();
    assert!(e.contains("a damaged Arrow IPC stream: "), "{e}");
}
