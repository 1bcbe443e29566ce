//! The `dataset_write` fuzz target's differential check as a randomized test, for machines
//! without cargo-fuzz: the Parquet vectors of tests/data/dataset (pyarrow's, every codec,
//! encoding and page version, with page checksums) and the same shapes written by arrow-rs
//! here (no checksums, so that a mutated page is read rather than refused) mutated at random (bytes flipped, set, or runs overwritten, in the pages and
//! the footer), each written both ways (from pages and through the reader). No panic; where
//! both write, the shards are byte-identical; the pages never refuse what the reader writes.
//!
//! `DS_DIFF_SECS=N` runs for N seconds (default: 300 mutations).

use std::sync::atomic::Ordering;
use tensorsmith::dtype::DType;
use tensorsmith_dataset::{write_dataset, Input, JobOptions, Progress, WriteOptions};
#[path = "support/shards.rs"]
mod shards;

/// xorshift64*: reproducible from the seed printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Where a file's pages lie (the first page header to the last page's end).
fn page_region(path: &std::path::Path) -> std::ops::Range<usize> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let f = std::fs::File::open(path).unwrap();
    let meta = SerializedFileReader::new(f.try_clone().unwrap())
        .unwrap()
        .metadata()
        .clone();
    let pages = tensorsmith_dataset::parquet_guard::pages(&f, &meta).unwrap();
    let lo = pages.iter().map(|p| p.header.start).min().unwrap() as usize;
    let hi = pages.iter().map(|p| p.body.end).max().unwrap() as usize;
    lo..hi
}

/// 1 to 4 mutations: 9 in 10 inside the pages, the rest anywhere but the magic.
fn mutate(data: &mut [u8], pages: &std::ops::Range<usize>, rng: &mut Rng) {
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        let at = if rng.below(10) == 0 {
            4 + rng.below(len - 12)
        } else {
            pages.start + rng.below(pages.len())
        };
        match rng.below(4) {
            0 => data[at] ^= 1 << rng.below(8),
            1 => data[at] = rng.next() as u8,
            2 => data[at] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)],
            _ => {
                let n = (1 + rng.below(8)).min(len - 8 - at);
                for b in &mut data[at..at + n] {
                    *b = rng.next() as u8;
                }
            }
        }
    }
}

/// 13 rows of 4 f32 (7 distinct values) written by arrow-rs with every codec, PLAIN /
/// dictionary / dictionary then PLAIN, data pages v1 and v2, pages of 64 bytes, row groups of
/// 5 rows.
fn arrow_rs_seeds(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    use arrow_array::{ArrayRef, ListArray, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::basic::{Compression, GzipLevel, ZstdLevel};
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use std::sync::Arc;
    let values: ArrayRef = Arc::new(arrow_array::Float32Array::from_iter_values(
        (0..52).map(|k| (k % 7) as f32 - 2.5),
    ));
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let offsets = arrow_buffer::OffsetBuffer::new((0..=13).map(|r| r * 4).collect());
    let col: ArrayRef = Arc::new(ListArray::new(item.clone(), offsets, values, None));
    let schema = Arc::new(Schema::new(vec![Field::new(
        "v",
        DataType::List(item),
        true,
    )]));
    let batch = RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
    let mut out = Vec::new();
    for (c, codec) in [
        Compression::UNCOMPRESSED,
        Compression::SNAPPY,
        Compression::ZSTD(ZstdLevel::try_new(1).unwrap()),
        Compression::GZIP(GzipLevel::default()),
        Compression::LZ4,
        Compression::LZ4_RAW,
    ]
    .into_iter()
    .enumerate()
    {
        for (e, (dict, limit)) in [(false, 1 << 20), (true, 1 << 20), (true, 12)]
            .into_iter()
            .enumerate()
        {
            for (v, version) in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0]
                .into_iter()
                .enumerate()
            {
                let p = dir.join(format!("seed-{c}-{e}-{v}.parquet"));
                let props = WriterProperties::builder()
                    .set_compression(codec)
                    .set_dictionary_enabled(dict)
                    .set_dictionary_page_size_limit(limit)
                    .set_writer_version(version)
                    .set_max_row_group_row_count(Some(5))
                    .set_data_page_size_limit(64)
                    .set_write_batch_size(3)
                    .build();
                let f = std::fs::File::create(&p).unwrap();
                let mut w =
                    parquet::arrow::ArrowWriter::try_new(f, schema.clone(), Some(props)).unwrap();
                w.write(&batch).unwrap();
                w.close().unwrap();
                out.push(p);
            }
        }
    }
    out
}

/// An error of the page checks (parquet_direct): it names the page.
fn is_bad_page(e: &tensorsmith_dataset::DatasetError) -> bool {
    matches!(e, tensorsmith_dataset::DatasetError::Corrupt { msg, .. } if msg.contains(", page at byte "))
}

#[test]
fn mutated_vectors_write_the_same_both_ways() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dataset");
    let mut seeds: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "parquet") && !p.ends_with("index_kv.parquet")
        })
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 27, "{seeds:?}");
    let tmp = tempfile::tempdir().unwrap();
    seeds.extend(arrow_rs_seeds(tmp.path()));
    let regions: Vec<_> = seeds.iter().map(|p| page_region(p)).collect();
    let secs: Option<u64> = std::env::var("DS_DIFF_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let start = std::time::Instant::now();
    let seed = std::env::var("DS_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    let mut rng = Rng(seed);
    let (mut runs, mut opened, mut both_wrote, mut from_pages) = (0u64, 0u64, 0u64, 0u64);
    let mut refused = 0u64;
    let mut o = WriteOptions::batch(3);
    o.dtype = Some(DType::F32);
    loop {
        match secs {
            Some(s) if start.elapsed().as_secs() >= s => break,
            None if runs >= 300 => break,
            _ => {}
        }
        runs += 1;
        let k = rng.below(seeds.len());
        let mut bytes = std::fs::read(&seeds[k]).unwrap();
        mutate(&mut bytes, &regions[k], &mut rng);
        let input = tmp.path().join("in.parquet");
        std::fs::write(&input, &bytes).unwrap();
        let Ok(inp) = Input::open(&[&input]) else {
            continue;
        };
        opened += 1;
        let run = |reader_only: bool| {
            let out = tmp.path().join(format!("out-{reader_only}"));
            let _ = std::fs::remove_dir_all(&out);
            let job = JobOptions::new()
                .with_threads(2)
                .with_reader_only(reader_only);
            let p = Progress::default();
            write_dataset(&inp, &out, &o, &job, &p).map(|_| {
                let n = p.direct_shards.load(Ordering::Relaxed)
                    + p.decoded_shards.load(Ordering::Relaxed);
                (shards::shard_contents(&out), n)
            })
        };
        let keep = || {
            let p = std::env::temp_dir().join(format!("differential-failure-{runs}.parquet"));
            std::fs::write(&p, &bytes).unwrap();
            p
        };
        match (run(false), run(true)) {
            (Ok((a, n)), Ok((b, _))) => {
                both_wrote += 1;
                from_pages += u64::from(n > 0);
                assert!(
                    a == b,
                    "shards differ: {} (seed {seed}, run {runs})",
                    keep().display()
                );
            }
            // A page the decoding finds corrupt (values short of its levels, a dictionary
            // index out of range, bytes that do not decompress) is an error; arrow-rs may
            // read such a page anyway (it pads values short of the levels).
            (Err(e), Ok(_)) if is_bad_page(&e) => refused += 1,
            (Err(e), Ok(_)) => panic!(
                "the pages failed where the reader wrote: {e}: {} (seed {seed}, run {runs})",
                keep().display()
            ),
            (Ok(_), Err(_)) | (Err(_), Err(_)) => {}
        }
    }
    eprintln!(
        "differential: {runs} mutated inputs, {opened} opened, {both_wrote} written both ways \
         ({from_pages} of them from pages), {refused} corrupt pages refused that the reader \
         read, {:.0} s",
        start.elapsed().as_secs_f64()
    );
    assert!(both_wrote > 0 && from_pages > 0);
}
