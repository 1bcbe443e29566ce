//! Input: Parquet, Arrow IPC files and Arrow IPC streams, one after the other as one
//! sequence of rows, or Arrow record batches handed over in memory (input_memory.rs).
//! Parquet, IPC file and in-memory row counts are known up front, so a row range can be read
//! by each task on its own: Parquet skips whole row groups and selects rows within.

use crate::error::{DatasetError, Result};
use crate::input::cut::{arrow_err, Cut, RowSink};
use crate::input::guarded_pages::GuardedPages;
use crate::input::memory::{Batches, Stream};
use crate::input::source::{InputSource, Origin};
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use std::io::{BufReader, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use tensorsmith::bytes::StorageOptions;

/// The kind of an input file, told from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A Parquet file (it starts with `PAR1`).
    Parquet,
    /// An Arrow IPC file (it starts with `ARROW1`).
    IpcFile,
    /// An Arrow IPC stream (any other file is read as one).
    IpcStream,
}

/// One input file, opened: its kind and schema, read from its first bytes and footer.
#[derive(Debug, Clone)]
pub struct InputFile {
    /// The file's path, or its URL as errors show it (no credentials).
    pub path: PathBuf,
    /// Where its bytes come from (a local file, or the remote object opened and pinned).
    pub(crate) origin: Origin,
    /// Parquet, Arrow IPC file or Arrow IPC stream.
    pub kind: InputKind,
    /// The file's columns and their Arrow types.
    pub schema: SchemaRef,
    /// Rows in the file, when known without reading it (Parquet metadata).
    pub rows: Option<u64>,
    /// Parquet: the footer as read (and checked) at open, for every later reader of the file.
    pub(crate) parquet: Option<ArrowReaderMetadata>,
}

/// The input: files read in order as one sequence of rows, or record batches in memory.
#[derive(Debug)]
pub struct Input {
    source: Source,
    /// Remote Parquet files may be written through the page plan (parquet_direct) too.
    remote_pages: bool,
}

#[derive(Debug)]
enum Source {
    Files(Vec<InputFile>),
    Batches(Batches),
    Stream(Stream),
}

fn sniff(path: &Path, origin: &Origin) -> Result<InputKind> {
    let head = first_bytes(path, origin, 6)?;
    Ok(if head.len() >= 4 && &head[..4] == b"PAR1" {
        InputKind::Parquet
    } else if head.len() == 6 && head == b"ARROW1" {
        InputKind::IpcFile
    } else {
        InputKind::IpcStream
    })
}

/// The first `n` bytes of the file (fewer when it is shorter).
fn first_bytes(path: &Path, origin: &Origin, n: usize) -> Result<Vec<u8>> {
    let src = origin.probe().map_err(|e| DatasetError::io(path, e))?;
    let mut head = vec![0u8; n];
    let mut r = src.into_read().map_err(|e| DatasetError::io(path, e))?;
    let mut got = 0;
    while got < n {
        match r
            .read(&mut head[got..])
            .map_err(|e| DatasetError::io(path, e))?
        {
            0 => break,
            k => got += k,
        }
    }
    head.truncate(got);
    Ok(head)
}

/// A file with no Parquet or Arrow IPC file magic that the Arrow stream reader refused: one
/// that starts as a stream does (the continuation marker) is a damaged stream, with the
/// reader's error; any other is not dataset input: say what the input may be and what the
/// file looks like (a local model file is named as one), not what the stream reader made of
/// its bytes.
fn not_an_input(path: &Path, origin: &Origin, source: arrow_schema::ArrowError) -> DatasetError {
    let head = first_bytes(path, origin, 8).unwrap_or_default();
    if head.starts_with(&[0xff; 4]) {
        return DatasetError::Corrupt {
            path: path.to_path_buf(),
            msg: format!("a damaged Arrow IPC stream: {source}"),
        };
    }
    let opened = match origin {
        Origin::Local(p) => {
            tensorsmith::open(&p.to_string_lossy(), &tensorsmith::OpenOptions::default()).ok()
        }
        Origin::Remote { .. } => None,
    };
    let looks = match opened {
        Some(model) => format!(
            "it is a {} model file (`tensorsmith convert` rewrites models)",
            model.index.format.name()
        ),
        None => format!(
            "it starts with {}",
            tensorsmith::bytes::describe_start(&head)
        ),
    };
    DatasetError::Corrupt {
        path: path.to_path_buf(),
        msg: format!(
            "not a Parquet or Arrow file: dataset write reads Parquet files and Arrow IPC files \
             or streams; {looks}"
        ),
    }
}

fn pq_err(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> DatasetError + '_ {
    move |source| DatasetError::Parquet {
        path: path.to_path_buf(),
        source,
    }
}

impl Input {
    /// Local files, read in order.
    ///
    /// # Errors
    ///
    /// - [`DatasetError::Input`]: no file is given.
    /// - [`DatasetError::Io`]: a file cannot be opened or read.
    /// - [`DatasetError::Corrupt`]: a file is neither Parquet nor Arrow IPC, or is malformed
    ///   Parquet or a damaged stream.
    /// - [`DatasetError::Parquet`], [`DatasetError::Arrow`]: the reader refuses a file's
    ///   footer or schema.
    pub fn open<P: AsRef<Path>>(paths: &[P]) -> Result<Input> {
        let opened = paths
            .iter()
            .map(|p| {
                (
                    p.as_ref().to_path_buf(),
                    Origin::Local(p.as_ref().to_path_buf()),
                )
            })
            .collect();
        Input::open_origins(opened)
    }

    /// Local paths and URLs (`s3://`, `s3a://`, `az://`, `abfs(s)://`, `gs://`, `hf://`,
    /// `http(s)://`), mixed, read in order, URLs with the settings `storage`. A local folder,
    /// or a URL ending with `/`, gives the files directly in it in name order
    /// ([`input_locations`](crate::input_locations)); so does an `s3://`, `az://` or `gs://`
    /// URL that names no object but a prefix. Remote files are read by range, never downloaded whole.
    ///
    /// # Errors
    ///
    /// - [`DatasetError::Input`]: no file is given.
    /// - [`DatasetError::Io`]: a file cannot be opened or read.
    /// - [`DatasetError::Corrupt`]: a file is neither Parquet nor Arrow IPC, or is malformed
    ///   Parquet or a damaged stream.
    /// - [`DatasetError::Parquet`], [`DatasetError::Arrow`]: the reader refuses a file's
    ///   footer or schema.
    /// - [`DatasetError::Tensor`]: a URL cannot be listed or opened (an unknown bucket,
    ///   denied access, an unreachable endpoint, bad `storage` settings).
    pub fn open_at(locations: &[impl AsRef<str>], storage: &StorageOptions) -> Result<Input> {
        let mut opened = Vec::new();
        let flights = Default::default();
        for loc in crate::input::list::input_locations(locations, storage)? {
            let shown = PathBuf::from(tensorsmith::bytes::redact_url(&loc));
            match Origin::open(&loc, storage, &flights) {
                Ok(o) => opened.push((shown, o)),
                Err(e) => {
                    use tensorsmith::bytes::UrlScheme;
                    let listed = matches!(e.kind(), tensorsmith::ErrorKind::RemoteNotFound(_))
                        && matches!(
                            tensorsmith::bytes::url_scheme(&loc),
                            Some(UrlScheme::S3 | UrlScheme::Az | UrlScheme::Gs)
                        );
                    let under = match listed {
                        true => crate::input::list::list_prefix(&format!("{loc}/"), storage)
                            .unwrap_or_default(),
                        false => Vec::new(),
                    };
                    if under.is_empty() {
                        return Err(e.into());
                    }
                    for u in under {
                        let shown = PathBuf::from(tensorsmith::bytes::redact_url(&u));
                        opened.push((shown, Origin::open(&u, storage, &flights)?));
                    }
                }
            }
        }
        Input::open_origins(opened)
    }

    fn open_origins(opened: Vec<(PathBuf, Origin)>) -> Result<Input> {
        if opened.is_empty() {
            return Err(DatasetError::input("no input files"));
        }
        let mut files = Vec::new();
        for (path, origin) in opened {
            let path = path.as_path();
            let kind = sniff(path, &origin)?;
            let (schema, rows, parquet) = match kind {
                InputKind::Parquet => crate::error::guard_parquet(path, || {
                    // The footer by exact ranges (a remote file: a few small GETs).
                    let f = origin.probe().map_err(|e| DatasetError::io(path, e))?;
                    let malformed = |why| DatasetError::malformed_parquet(path, why);
                    crate::parquet_guard::check_file_footer(&f).map_err(malformed)?;
                    let meta = ArrowReaderMetadata::load(&f, ArrowReaderOptions::default())
                        .map_err(pq_err(path))?;
                    // A remote file's pages are checked as they are read (guarded_pages.rs):
                    // walking them all here would fetch the whole object.
                    if origin.is_local() {
                        crate::parquet_guard::check_pages(&f, meta.metadata())
                            .map_err(malformed)?;
                    }
                    let rows = meta.metadata().file_metadata().num_rows().max(0) as u64;
                    Ok((meta.schema().clone(), Some(rows), Some(meta)))
                })?,
                InputKind::IpcFile => {
                    let f = origin.source().map_err(|e| DatasetError::io(path, e))?;
                    let read = f.into_read().map_err(|e| DatasetError::io(path, e))?;
                    let r = arrow_ipc::reader::FileReader::try_new(BufReader::new(read), None)
                        .map_err(arrow_err(path))?;
                    (r.schema(), None, None)
                }
                InputKind::IpcStream => {
                    let f = origin.source().map_err(|e| DatasetError::io(path, e))?;
                    let read = f.into_read().map_err(|e| DatasetError::io(path, e))?;
                    let r = arrow_ipc::reader::StreamReader::try_new(BufReader::new(read), None)
                        .map_err(|e| not_an_input(path, &origin, e))?;
                    (r.schema(), None, None)
                }
            };
            files.push(InputFile {
                path: path.to_path_buf(),
                origin,
                kind,
                schema,
                rows,
                parquet,
            });
        }
        Ok(Input {
            source: Source::Files(files),
            remote_pages: false,
        })
    }

    /// Record batches in memory, all of `schema` (checked here). The row count is known, so
    /// tasks split them like a Parquet file; each range is served by zero-copy slices.
    pub fn from_batches(schema: SchemaRef, batches: Vec<RecordBatch>) -> Result<Input> {
        Ok(Input {
            source: Source::Batches(Batches::new(
                schema,
                batches,
                crate::input::memory::BATCHES_NAME,
            )?),
            remote_pages: false,
        })
    }

    /// A stream of record batches, read once: the row count is unknown, so a write runs it as
    /// one task, in both modes a shard at a time.
    pub fn from_reader(reader: Box<dyn RecordBatchReader + Send>) -> Input {
        Input {
            source: Source::Stream(Stream::new(reader)),
            remote_pages: false,
        }
    }

    /// Remote Parquet files (URLs) written through the page plan too, as local ones are: their
    /// page headers and levels scanned by small ranged reads before their pages are read.
    /// Off by default: on object stores that scan's round trips cost more than the Parquet
    /// reader's one pass (about 3x on s3s-fs), so remote files go through the reader. The
    /// output is the same either way.
    pub fn with_remote_pages(mut self, yes: bool) -> Input {
        self.remote_pages = yes;
        self
    }

    /// Whether remote Parquet files may be written through the page plan.
    pub(crate) fn remote_pages(&self) -> bool {
        self.remote_pages
    }

    /// The input files (none for in-memory input).
    pub fn files(&self) -> &[InputFile] {
        match &self.source {
            Source::Files(f) => f,
            Source::Batches(_) | Source::Stream(_) => &[],
        }
    }

    /// What errors name as the input: the first file, or `<arrow batches>` / `<arrow stream>`.
    pub fn name(&self) -> &Path {
        match &self.source {
            Source::Files(f) => &f[0].path,
            Source::Batches(_) => Path::new(crate::input::memory::BATCHES_NAME),
            Source::Stream(_) => Path::new(crate::input::memory::STREAM_NAME),
        }
    }

    /// The input's columns and their Arrow types: the first file's, or the batches'.
    pub fn schema(&self) -> &SchemaRef {
        match &self.source {
            Source::Files(f) => &f[0].schema,
            Source::Batches(b) => b.schema(),
            Source::Stream(s) => s.schema(),
        }
    }

    /// Checks that every file has `columns` with the first file's types.
    pub fn check_columns(&self, columns: &[String]) -> Result<()> {
        let files =
            match &self.source {
                Source::Files(f) => f,
                Source::Batches(_) | Source::Stream(_) => {
                    let schema = self.schema();
                    return match columns.iter().find(|c| schema.index_of(c).is_err()) {
                        Some(c) => Err(DatasetError::column(c, "no such column in the input")
                            .in_file(self.name())),
                        None => Ok(()),
                    };
                }
            };
        let first = &files[0];
        for c in columns {
            let want = first.schema.field_with_name(c).map_err(|_| {
                DatasetError::column(c, "no such column in the input").in_file(&first.path)
            })?;
            for f in &files[1..] {
                let got = f.schema.field_with_name(c).map_err(|_| {
                    DatasetError::column(
                        c,
                        format!(
                            "{} (the first input file) has the column and this file does not",
                            first.path.display()
                        ),
                    )
                    .in_file(&f.path)
                })?;
                if !crate::input::value_type::same_values_type(got.data_type(), want.data_type()) {
                    return Err(DatasetError::column(
                        c,
                        format!(
                            "type {} here, {} in {}",
                            got.data_type(),
                            want.data_type(),
                            first.path.display()
                        ),
                    )
                    .in_file(&f.path));
                }
            }
        }
        Ok(())
    }

    /// Total rows, when every file's count is known up front.
    pub fn total_rows(&self) -> Option<u64> {
        match &self.source {
            Source::Files(f) => f.iter().map(|f| f.rows).sum(),
            Source::Batches(b) => Some(b.rows()),
            Source::Stream(_) => None,
        }
    }

    /// Calls `f(batch, first input row of the batch, file)` for the rows of `range` (global
    /// row numbers), with only `columns`, in record batches of at most `batch_rows` rows.
    pub fn read_range(
        &self,
        range: Range<u64>,
        columns: &[String],
        batch_rows: usize,
        f: &mut RowSink,
    ) -> Result<()> {
        let files = match &self.source {
            Source::Files(files) => files,
            Source::Batches(b) => return b.read_range(range, columns, batch_rows, f),
            Source::Stream(s) => return s.read_range(range, columns, batch_rows, f),
        };
        let mut base = 0u64;
        for file in files {
            if base >= range.end {
                break;
            }
            let path = &file.path;
            match (file.kind, file.rows) {
                (InputKind::Parquet, Some(rows)) => {
                    let (lo, hi) = (range.start.max(base), range.end.min(base + rows));
                    if lo < hi {
                        crate::error::guard_parquet(path, || {
                            read_parquet(
                                file,
                                lo - base..hi - base,
                                columns,
                                batch_rows,
                                &mut |b, r| {
                                    f(b, base + r, path).map_err(|e| e.in_file_from(path, base))
                                },
                            )
                        })?;
                    }
                    base += rows;
                }
                _ => {
                    // IPC: read through, keeping what falls in the range.
                    let fh = file
                        .origin
                        .source()
                        .map_err(|e| DatasetError::io(path, e))?;
                    let fh = fh.into_read().map_err(|e| DatasetError::io(path, e))?;
                    let reader: Box<dyn RecordBatchReader> = if file.kind == InputKind::IpcFile {
                        Box::new(
                            arrow_ipc::reader::FileReader::try_new(BufReader::new(fh), None)
                                .map_err(arrow_err(path))?,
                        )
                    } else {
                        Box::new(
                            arrow_ipc::reader::StreamReader::try_new(BufReader::new(fh), None)
                                .map_err(arrow_err(path))?,
                        )
                    };
                    let cut = Cut {
                        range: &range,
                        columns,
                        batch_rows,
                        schema: &file.schema,
                        name: path,
                    };
                    base = cut.serve(reader.map(|b| b.map_err(arrow_err(path))), base, f)?;
                }
            }
        }
        Ok(())
    }
}

fn read_parquet(
    file: &InputFile,
    range: Range<u64>,
    columns: &[String],
    batch_rows: usize,
    f: &mut dyn FnMut(&RecordBatch, u64) -> Result<()>,
) -> Result<()> {
    let path = &file.path;
    let meta = file.parquet.clone().expect("read at open");
    let fh = file
        .origin
        .source_within(chunk_ranges(meta.metadata(), range.clone(), columns))
        .map_err(|e| DatasetError::io(path, e))?;
    match fh {
        InputSource::Local(_) => {
            let b = ParquetRecordBatchReaderBuilder::new_with_metadata(fh, meta);
            read_parquet_with(b, path, range, columns, batch_rows, f)
        }
        InputSource::Remote(_) | InputSource::Exact(_) => {
            let guarded = GuardedPages::new(fh, meta.metadata());
            let b = ParquetRecordBatchReaderBuilder::new_with_metadata(guarded, meta);
            read_parquet_with(b, path, range, columns, batch_rows, f)
        }
    }
}

/// The byte ranges of the column chunks of `columns` in the row groups holding rows `rows`.
fn chunk_ranges(
    meta: &parquet::file::metadata::ParquetMetaData,
    rows: Range<u64>,
    columns: &[String],
) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut at = 0u64;
    for rg in meta.row_groups() {
        let n = rg.num_rows().max(0) as u64;
        if at < rows.end && at + n > rows.start {
            for col in rg.columns() {
                let root = col.column_descr().path().parts().first();
                if root.is_some_and(|r| columns.contains(r)) {
                    let (start, size) = col.byte_range();
                    out.push(start..start.saturating_add(size));
                }
            }
        }
        at += n;
    }
    out
}

fn read_parquet_with<T: parquet::file::reader::ChunkReader + 'static>(
    b: ParquetRecordBatchReaderBuilder<T>,
    path: &Path,
    range: Range<u64>,
    columns: &[String],
    batch_rows: usize,
    f: &mut dyn FnMut(&RecordBatch, u64) -> Result<()>,
) -> Result<()> {
    // Row groups overlapping the range, and the first row of the first of them.
    let mut groups = Vec::new();
    let mut first_row = None;
    let mut at = 0u64;
    for (i, g) in b.metadata().row_groups().iter().enumerate() {
        let n = g.num_rows().max(0) as u64;
        if at + n > range.start && at < range.end {
            groups.push(i);
            first_row.get_or_insert(at);
        }
        at += n;
    }
    let Some(first_row) = first_row else {
        return Ok(());
    };
    let schema = b.schema().clone();
    let roots: Vec<usize> = columns
        .iter()
        .map(|c| schema.index_of(c).expect("checked"))
        .collect();
    let mask = ProjectionMask::roots(b.parquet_schema(), roots.iter().copied());
    // No row selection: arrow-rs 60.1 skips rows (skip_records) in an endless loop when a
    // page's repetition levels end before its value count, where reading the same rows
    // fails with an error. So the rows of the first row group before the range are read and
    // dropped here, and reading stops at the range's end.
    let reader = b
        .with_row_groups(groups)
        .with_projection(mask)
        .with_batch_size(batch_rows.max(1))
        .build()
        .map_err(pq_err(path))?;
    let mut at = first_row;
    let mut row = range.start;
    for batch in reader {
        let batch = batch.map_err(arrow_err(path))?;
        let n = batch.num_rows() as u64;
        let (lo, hi) = (range.start.max(at), range.end.min(at + n));
        if lo < hi {
            f(&batch.slice((lo - at) as usize, (hi - lo) as usize), row)?;
            row += hi - lo;
        }
        at += n;
        if at >= range.end {
            break;
        }
    }
    if row != range.end {
        return Err(DatasetError::input(format!(
            "read {} rows of {}..{}, the file's metadata promised more",
            row - range.start,
            range.start,
            range.end
        ))
        .in_file(path));
    }
    Ok(())
}
