//! Corrupt pages, a rule per test: a page whose CRC does not match its bytes (on the page
//! copy, the decoding and the reader path), a compressed page that does not decompress, a
//! dictionary index out of range, a page whose values fall short of its levels. Each is an
//! error naming the file, the column and the page, and nothing appears under the dataset's
//! final names.

use arrow_array::{ArrayRef, ListArray, RecordBatch};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tensorsmith::dtype::DType;
use tensorsmith_dataset::parquet_guard::{pages, PageSpot};
use tensorsmith_dataset::{write_dataset, Input, JobOptions, Progress, WriteOptions};

/// 20 rows of 3 f32 (values `k % 5`) as list column `c`, pages of 64 bytes.
fn write_parquet(path: &Path, props: WriterProperties) {
    let values: ArrayRef = Arc::new(arrow_array::Float32Array::from_iter_values(
        (0..60).map(|k| (k % 5) as f32 - 1.5),
    ));
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let offsets = OffsetBuffer::new(ScalarBuffer::from_iter((0..=20).map(|r| r * 3)));
    let col: ArrayRef = Arc::new(ListArray::new(item.clone(), offsets, values, None));
    let schema = Arc::new(Schema::new(vec![Field::new(
        "c",
        DataType::List(item),
        true,
    )]));
    let batch = RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn props() -> parquet::file::properties::WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_compression(Compression::UNCOMPRESSED)
        .set_data_page_size_limit(64)
        .set_write_batch_size(3)
}

/// The pages of a file, as the pre-check walks them.
fn spots(path: &Path) -> Vec<PageSpot> {
    let f = std::fs::File::open(path).unwrap();
    let meta = SerializedFileReader::new(f.try_clone().unwrap())
        .unwrap()
        .metadata()
        .clone();
    pages(&f, &meta).unwrap()
}

fn patch(path: &Path, at: u64, bytes: &[u8]) {
    let mut data = std::fs::read(path).unwrap();
    data[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, data).unwrap();
}

/// Writes `input` both ways (pages, then reader only); each error text, after checking that
/// nothing appeared under the dataset's final names.
fn write_both(input: &Path) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = WriteOptions::batch(4);
    o.dtype = Some(DType::F32);
    [false, true]
        .into_iter()
        .map(|reader_only| {
            let out = tmp.path().join(format!("out-{reader_only}"));
            let job = JobOptions::new()
                .with_threads(2)
                .with_reader_only(reader_only);
            let err = write_dataset(
                &Input::open(&[input]).unwrap(),
                &out,
                &o,
                &job,
                &Progress::default(),
            )
            .unwrap_err()
            .to_string();
            let left: Vec<PathBuf> = std::fs::read_dir(&out)
                .map(|d| d.map(|e| e.unwrap().path()).collect())
                .unwrap_or_default();
            assert!(
                left.iter().all(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    !n.ends_with(".safetensors")
                        && !n.starts_with("dataset_manifest")
                        && !n.starts_with("_tensor_index")
                }),
                "{left:?}"
            );
            err
        })
        .collect()
}

fn names_the_page(err: &str, input: &Path, page: &PageSpot) {
    names_the_page_of(err, input, "c", page)
}

fn names_the_page_of(err: &str, input: &Path, column: &str, page: &PageSpot) {
    assert!(err.contains(&input.display().to_string()), "{err}");
    assert!(err.contains(&format!("column '{column}'")), "{err}");
    assert!(
        err.contains(&format!("page at byte {}", page.header.start)),
        "{err}"
    );
}

#[test]
fn a_page_whose_crc_does_not_match_is_an_error_on_every_path() {
    // pyarrow's pages with checksums: copied (PLAIN, uncompressed), decoded (snappy and
    // dictionary-encoded), and through the reader (the same files, reader only).
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dataset");
    let tmp = tempfile::tempdir().unwrap();
    for name in [
        "input_crc_plain_v1.parquet",
        "input_snappy_dict_v1.parquet",
        "input_zstd_fallback_v2.parquet",
    ] {
        let p = tmp.path().join(name);
        std::fs::copy(data.join(name), &p).unwrap();
        // The last byte of the second data page.
        let page = spots(&p)
            .into_iter()
            .filter(|s| !s.dictionary)
            .nth(1)
            .unwrap();
        let at = page.body.end - 1;
        let old = std::fs::read(&p).unwrap()[at as usize];
        patch(&p, at, &[old ^ 0x55]);
        let mut o = WriteOptions::batch(3);
        o.dtype = Some(DType::F32);
        for err in write_both_with(&p, &o) {
            assert!(err.contains("CRC does not match"), "{name}: {err}");
            names_the_page_of(&err, &p, "v", &page);
        }
    }
}

fn write_both_with(input: &Path, o: &WriteOptions) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    [false, true]
        .into_iter()
        .map(|reader_only| {
            let out = tmp.path().join("out");
            let job = JobOptions::new()
                .with_threads(2)
                .with_reader_only(reader_only);
            let r = write_dataset(
                &Input::open(&[input]).unwrap(),
                &out,
                o,
                &job,
                &Progress::default(),
            );
            assert!(!out.join("dataset_manifest.json").exists());
            r.unwrap_err().to_string()
        })
        .collect()
}

#[test]
fn a_compressed_page_that_does_not_decompress_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    for (v, version) in [
        ("v1", WriterVersion::PARQUET_1_0),
        ("v2", WriterVersion::PARQUET_2_0),
    ] {
        let p = tmp.path().join(format!("zstd-{v}.parquet"));
        let zstd = Compression::ZSTD(ZstdLevel::try_new(1).unwrap());
        write_parquet(
            &p,
            props()
                .set_compression(zstd)
                .set_writer_version(version)
                .build(),
        );
        // The zstd magic of the second data page's values, broken.
        let page = spots(&p)
            .into_iter()
            .filter(|s| !s.dictionary)
            .nth(1)
            .unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let body = &bytes[page.body.start as usize..page.body.end as usize];
        let magic = body
            .windows(4)
            .position(|w| w == [0x28, 0xb5, 0x2f, 0xfd])
            .unwrap();
        patch(&p, page.body.start + magic as u64, &[0]);
        let errs = write_both(&p);
        names_the_page(&errs[0], &p, &page);
        assert!(
            errs[0].contains("zstd") || errs[0].contains("Unknown frame"),
            "{}",
            errs[0]
        );
    }
}

#[test]
fn a_dictionary_index_out_of_range_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("dict.parquet");
    write_parquet(&p, props().set_dictionary_enabled(true).build());
    // The v1 data page: rep levels, def levels (each after its u32 length), then the indices:
    // bit width 3, then one RLE run of 127 x index 7 (the dictionary holds 5 values).
    let page = spots(&p).into_iter().find(|s| !s.dictionary).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let b = page.body.start as usize;
    let len = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let rep = len(b);
    let def = len(b + 4 + rep);
    let values = (b + 8 + rep + def) as u64;
    patch(&p, values, &[3, 0xfe, 0x01, 7]);
    let errs = write_both(&p);
    names_the_page(&errs[0], &p, &page);
    assert!(
        errs[0].contains("dictionary index 7 out of range (5 entries)"),
        "{}",
        errs[0]
    );
}

#[test]
fn a_page_whose_values_fall_short_of_its_levels_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("short.parquet");
    write_parquet(&p, props().build());
    // A v1 page: its definition levels' length grown by 4 bytes, so that its values hold one
    // f32 fewer than its levels give.
    let page = spots(&p)
        .into_iter()
        .filter(|s| !s.dictionary)
        .nth(1)
        .unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let b = page.body.start as usize;
    let rep = u32::from_le_bytes(bytes[b..b + 4].try_into().unwrap()) as usize;
    let at = b + 4 + rep;
    let def = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    patch(&p, at as u64, &(def + 4).to_le_bytes());
    let errs = write_both(&p);
    names_the_page(&errs[0], &p, &page);
    assert!(errs[0].contains("where its levels give"), "{}", errs[0]);
}
