//! Where an input file's bytes come from: a local file (positioned reads, kernel copies into
//! shards, as before URLs were read) or a remote object (`s3://`, `az://`, `gs://`, `hf://`,
//! `http(s)://`) opened once through the byte layer, pinned to the version opened, and read
//! by each reader through its own bounded block cache (remote_chunks.rs). Both are the
//! Parquet reader's `ChunkReader`, the page copy's source and the Arrow IPC readers' input.

use crate::input::remote_chunks::{ChunkCursor, RemoteChunks};
use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use tensorsmith::bytes::{ReadAt, StorageOptions, Transfer};
use tensorsmith::safetensors::Piece;

/// Bytes fetched when a remote input is opened: enough to tell its kind and start an Arrow
/// IPC file or stream.
const FIRST_BYTES: u64 = 64 << 10;

/// An input file as opened: its local path, or the remote object (shared by every reader).
#[derive(Debug, Clone)]
pub(crate) enum Origin {
    Local(PathBuf),
    Remote {
        file: Arc<dyn ReadAt>,
        transfer: Transfer,
        /// Read-ahead GETs in flight in every reader of the input (remote_chunks.rs).
        flights: Arc<AtomicUsize>,
    },
}

impl Origin {
    /// `location` opened: a local path as is, a URL through the byte layer with `storage`
    /// (its first bytes fetched: a missing object or bucket fails here, naming the URL).
    /// `flights` is shared by the files of one input: their read-ahead GETs together stay
    /// within `max_concurrency`.
    pub(crate) fn open(
        location: &str,
        storage: &StorageOptions,
        flights: &Arc<AtomicUsize>,
    ) -> tensorsmith::Result<Origin> {
        if tensorsmith::bytes::scheme_name(location).is_none() {
            return Ok(Origin::Local(PathBuf::from(location)));
        }
        if !tensorsmith::bytes::is_url(location) {
            let scheme = tensorsmith::bytes::scheme_name(location).unwrap_or_default();
            return Err(
                tensorsmith::Error::new(tensorsmith::ErrorKind::Unsupported(format!(
                    "unsupported URL scheme \"{scheme}\" (dataset input is local files or s3://, \
                 s3a://, az://, abfs(s)://, gs://, hf:// or http(s):// URLs)"
                )))
                .in_file(Path::new(&tensorsmith::bytes::redact_url(location))),
            );
        }
        let file = tensorsmith::bytes::open_url(location, storage, FIRST_BYTES)?;
        Ok(Origin::Remote {
            file: Arc::from(file),
            transfer: storage.transfer(),
            flights: Arc::clone(flights),
        })
    }

    pub(crate) fn is_local(&self) -> bool {
        matches!(self, Origin::Local(_))
    }

    /// A reader of its own: a new handle of a local file (its position is its own), a new
    /// block cache over the remote object.
    pub(crate) fn source(&self) -> io::Result<InputSource> {
        self.source_within(Vec::new())
    }

    /// A reader of its own that will read only `ranges` (a task's column chunks: a remote
    /// reader reads ahead only inside them).
    pub(crate) fn source_within(&self, ranges: Vec<Range<u64>>) -> io::Result<InputSource> {
        Ok(match self {
            Origin::Local(p) => InputSource::Local(File::open(p)?),
            Origin::Remote {
                file,
                transfer,
                flights,
            } => InputSource::Remote(RemoteChunks::within(
                Arc::clone(file),
                transfer.part_size,
                transfer.max_concurrency,
                Arc::clone(flights),
                ranges,
            )),
        })
    }

    /// A reader for a few small reads (the magic, a Parquet footer): a local file, or the
    /// remote object read by exactly the ranges asked (its first bytes already fetched).
    pub(crate) fn probe(&self) -> io::Result<InputSource> {
        Ok(match self {
            Origin::Local(p) => InputSource::Local(File::open(p)?),
            Origin::Remote { file, .. } => InputSource::Exact(ExactReads {
                file: Arc::clone(file),
                window: Mutex::new((0, Bytes::new())),
            }),
        })
    }
}

/// One reader's view of an input file.
#[derive(Debug)]
pub(crate) enum InputSource {
    Local(File),
    Remote(RemoteChunks),
    /// Small reads, each one request unless the last one's window holds it: a footer, the
    /// page headers and levels a page plan scans.
    Exact(ExactReads),
}

/// The least a read of [`InputSource::Exact`] fetches: a page header and the levels after it.
const WINDOW: u64 = 64 << 10;

/// Reads by small ranges: each fetches at least [`WINDOW`] bytes, and the last window
/// fetched serves the reads inside it.
#[derive(Debug)]
pub(crate) struct ExactReads {
    file: Arc<dyn ReadAt>,
    /// (start, bytes) of the last fetch.
    window: Mutex<(u64, Bytes)>,
}

impl ExactReads {
    fn bytes(&self, start: u64, n: usize) -> tensorsmith::Result<Bytes> {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let (at, held) = (w.0, &w.1);
        if start >= at && start - at + n as u64 <= held.len() as u64 {
            let lo = (start - at) as usize;
            return Ok(held.slice(lo..lo + n));
        }
        let len = self.file.len();
        let end = start.saturating_add(n as u64);
        // Past the end: the byte layer's error, naming the file.
        let fetch_end = if end > len {
            end
        } else {
            end.max(start.saturating_add(WINDOW)).min(len)
        };
        let b = Bytes::from(self.file.read(start..fetch_end)?.into_owned());
        *w = (start, b.clone());
        Ok(b.slice(..n))
    }
}

/// A byte-layer error as the Parquet reader carries it.
fn pq(e: tensorsmith::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl InputSource {
    /// Fills `buf` from `offset` (as `FileExt::read_exact_at`).
    pub(crate) fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self {
            InputSource::Local(f) => f.read_exact_at(buf, offset),
            InputSource::Remote(r) => {
                ReadAt::read_exact_at(r, offset, buf).map_err(io::Error::other)
            }
            InputSource::Exact(f) => {
                let b = f.bytes(offset, buf.len()).map_err(io::Error::other)?;
                buf.copy_from_slice(&b);
                Ok(())
            }
        }
    }

    /// Bytes `range` as a piece of a shard: copied by the kernel from a local file, from the
    /// block cache for a remote one.
    pub(crate) fn piece(&self, range: Range<u64>) -> Piece<'_> {
        match self {
            InputSource::Local(f) => Piece::Range(f, range),
            InputSource::Remote(r) => Piece::At(r, range),
            InputSource::Exact(f) => Piece::At(f.file.as_ref(), range),
        }
    }

    /// Frees what this reader holds (a remote file's cached blocks) once nothing more will be
    /// read through it; a later read fetches again.
    pub(crate) fn release(&self) {
        if let InputSource::Remote(r) = self {
            r.release();
        }
    }

    /// A sequential reader from the start (Arrow IPC input).
    pub(crate) fn into_read(self) -> io::Result<SourceRead> {
        match self {
            InputSource::Local(f) => Ok(SourceRead::Local(BufReader::new(f))),
            InputSource::Remote(r) => Ok(SourceRead::Remote(r.reader_at(0))),
            InputSource::Exact(f) => Ok(SourceRead::Exact(ExactRead {
                file: f.file,
                pos: 0,
            })),
        }
    }
}

impl Length for InputSource {
    fn len(&self) -> u64 {
        match self {
            InputSource::Local(f) => Length::len(f),
            InputSource::Remote(r) => ReadAt::len(r),
            InputSource::Exact(f) => f.file.len(),
        }
    }
}

impl ChunkReader for InputSource {
    type T = SourceRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<SourceRead> {
        match self {
            InputSource::Local(f) => Ok(SourceRead::Local(f.get_read(start)?)),
            InputSource::Remote(r) => Ok(SourceRead::Remote(r.reader_at(start))),
            InputSource::Exact(f) => Ok(SourceRead::Exact(ExactRead {
                file: Arc::clone(&f.file),
                pos: start,
            })),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            InputSource::Local(f) => f.get_bytes(start, length),
            InputSource::Remote(r) => r.bytes(start, length).map_err(pq),
            InputSource::Exact(f) => f.bytes(start, length).map_err(pq),
        }
    }
}

/// A sequential reader of an input file.
pub(crate) enum SourceRead {
    Local(BufReader<File>),
    Remote(ChunkCursor),
    Exact(ExactRead),
}

/// Sequential reads of a remote object, each one request (at most `EXACT_READ` bytes).
pub(crate) struct ExactRead {
    file: Arc<dyn ReadAt>,
    pos: u64,
}

/// The most an [`ExactRead`] asks for at once.
const EXACT_READ: usize = 64 << 10;

impl Read for ExactRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len().min(EXACT_READ) as u64).min(self.file.len().saturating_sub(self.pos));
        if n == 0 {
            return Ok(0);
        }
        let b = self
            .file
            .read(self.pos..self.pos + n)
            .map_err(io::Error::other)?;
        buf[..n as usize].copy_from_slice(&b);
        self.pos += n;
        Ok(n as usize)
    }
}

impl Read for SourceRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            SourceRead::Local(r) => r.read(buf),
            SourceRead::Remote(r) => r.read(buf),
            SourceRead::Exact(r) => r.read(buf),
        }
    }
}

impl Seek for SourceRead {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        match self {
            SourceRead::Local(r) => r.seek(to),
            SourceRead::Remote(r) => r.seek(to),
            SourceRead::Exact(r) => {
                let pos = match to {
                    SeekFrom::Start(p) => Some(p),
                    SeekFrom::End(d) => r.file.len().checked_add_signed(d),
                    SeekFrom::Current(d) => r.pos.checked_add_signed(d),
                };
                r.pos = pos.ok_or_else(|| io::Error::other("seek before the start"))?;
                Ok(r.pos)
            }
        }
    }
}
