//! The byte layer: one positioned-read trait, [`ReadAt`], through which every format parses
//! and every operation reads. It is implemented by a local file ([`LocalFile`]: a memory map
//! with zero-copy views, or `pread`), an HTTP(S) file read by range requests ([`HttpFile`],
//! behind the `remote` feature; `gs://` and `hf://` URLs too, through it), an S3
//! object or Azure blob read through `object_store` ([`StoreFile`]) and bytes in memory
//! (`&[u8]`, `Vec<u8>`). Remote readers pin the version they open ([`Pinned`]) and name URLs without credentials ([`redact_url`]).

#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
mod azure;
mod chunks;
mod counting;
mod direct;
mod gather;
mod gcs;
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
mod hf;
#[cfg(feature = "remote")]
mod http;
mod local;
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
mod redact;
#[cfg(feature = "remote")]
mod resumed_get;
#[cfg(feature = "remote")]
mod retried;
#[cfg(feature = "remote")]
mod retry;
#[cfg(feature = "remote")]
mod runtime;
mod s3;
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
mod storage_options;
mod store;
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
#[cfg(feature = "remote")]
mod url_path;
mod url_scheme;
mod validator;

pub use chunks::for_each_chunk;
pub use counting::{Counted, ReadCounter};
pub use direct::{resident_fraction, DirectFile};
pub use gather::{read_plan, read_plans, PartRead};
#[cfg(feature = "remote")]
pub use gcs::client::GcsClient;
#[cfg(feature = "remote")]
pub use hf::hf_repo_name;
#[cfg(feature = "remote")]
pub use http::HttpFile;
pub use local::{Backend, LocalFile};
pub use redact::redact_url;
pub use storage_options::{
    storage_option_names, StorageKey, StorageOption, StorageOptions, Transfer,
};
#[cfg(feature = "remote")]
pub use store::file::StoreFile;
#[cfg(feature = "remote")]
pub use store::object_client::{ObjectClient, ObjectMeta, PutCondition, UploadMeta};
#[cfg(feature = "remote")]
pub use store::part_upload::ObjectUpload;
#[cfg(feature = "remote")]
pub use store::upload::StoreUpload;
#[cfg(feature = "remote")]
pub use url_scheme::{create_upload, fetch_whole, open_url};
pub use url_scheme::{
    is_http_url, is_url, refuse_remote, refuse_write, scheme_name, url_scheme, UrlScheme,
};
pub use validator::{Pinned, Validator};

use crate::error::{ErrorKind, Result};
use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;

/// Random access to a file's bytes. Reads of ranges past the end are errors
/// ([`ErrorKind::Truncated`]), never short reads.
pub trait ReadAt: Send + Sync + std::fmt::Debug {
    /// The file's length in bytes.
    fn len(&self) -> u64;

    /// Whether the file has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of `range`: borrowed where the bytes are already in memory (a map, a
    /// buffer, a fetched prefix), read into a new buffer otherwise.
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>>;

    /// The whole file as one slice, when it is in memory (mapped or a buffer): parsers that
    /// need the whole header at once use it instead of copying.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }

    /// The open local file behind these bytes, for kernel-side copies (`copy_file_range`);
    /// `None` for remote files and memory.
    fn local_file(&self) -> Option<&std::fs::File> {
        None
    }

    /// How many reads of this source should be in flight at once to keep it busy: a remote
    /// file's `max_concurrency`; `None` (the default) for local files and memory, where the
    /// caller picks by its cores.
    fn parallel_reads(&self) -> Option<usize> {
        None
    }

    /// Fills `buf` from `offset`.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = checked_end(offset, buf.len(), self.len())?;
        buf.copy_from_slice(&self.read(offset..end)?);
        Ok(())
    }

    /// Writes the bytes of `range` to `out` through a bounded buffer.
    fn copy_to(&self, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
        check_range(&range, self.len())?;
        copy_chunked(range, out, |off, buf| self.read_exact_at(off, buf))
    }
}

/// `range` lies within a file of `len` bytes.
pub(crate) fn check_range(range: &Range<u64>, len: u64) -> Result<()> {
    if range.start > range.end || range.end > len {
        return Err(ErrorKind::Truncated {
            needed: range.end,
            available: len,
        }
        .into());
    }
    Ok(())
}

/// The end of `n` bytes read at `offset` in a file of `len` bytes, checked.
pub(crate) fn checked_end(offset: u64, n: usize, len: u64) -> Result<u64> {
    let end = offset.checked_add(n as u64).ok_or(ErrorKind::Truncated {
        needed: u64::MAX,
        available: len,
    })?;
    check_range(&(offset..end), len)?;
    Ok(end)
}

impl ReadAt for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        check_range(&range, ReadAt::len(self))?;
        Ok(Cow::Borrowed(
            &self[range.start as usize..range.end as usize],
        ))
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl ReadAt for Vec<u8> {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        check_range(&range, <[u8]>::len(self) as u64)?;
        Ok(Cow::Borrowed(
            &self[range.start as usize..range.end as usize],
        ))
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

/// Chunk size for streaming copies: bounded memory whatever the size.
const COPY_CHUNK: usize = 8 << 20;

/// Writes the bytes of `range`, read by `read(offset, buf)`, to `out` through one buffer of
/// at most `COPY_CHUNK` bytes.
pub(crate) fn copy_chunked(
    range: Range<u64>,
    out: &mut dyn Write,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let total = range.end - range.start;
    let mut buf = vec![0u8; (total as usize).min(COPY_CHUNK)];
    let mut off = range.start;
    while off < range.end {
        let n = ((range.end - off) as usize).min(buf.len());
        read(off, &mut buf[..n])?;
        out.write_all(&buf[..n])?;
        off += n as u64;
    }
    Ok(())
}

/// The first bytes of a file that is not what it was taken for, in hex and as text, with what
/// they look like when they are a well-known magic (errors for files of the wrong kind).
pub fn describe_start(b: &[u8]) -> String {
    let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    let text: String = b
        .iter()
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                c as char
            } else {
                '.'
            }
        })
        .collect();
    let kind = match b {
        [0x89, b'P', b'N', b'G', ..] => " (a PNG image)",
        [0xff, 0xd8, 0xff, ..] => " (a JPEG image)",
        [b'P', b'K', 3, 4, ..] => " (a ZIP archive: PyTorch's .pt/.bin files are ZIP archives)",
        [0x80, 2..=5, ..] => " (a Python pickle: PyTorch's legacy format)",
        [0x89, b'H', b'D', b'F', ..] => " (an HDF5 file)",
        _ if b
            .iter()
            .all(|&c| c == b'\n' || c == b'\t' || c == b'\r' || (0x20..0x7f).contains(&c)) =>
        {
            " (text)"
        }
        _ => "",
    };
    format!("{} \"{text}\"{kind}", hex.join(" "))
}
