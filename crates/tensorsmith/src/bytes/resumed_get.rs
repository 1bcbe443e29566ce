//! One GET of a range of an object whose body survives a dropped connection: a body cut
//! short after its headers (which `object_store`'s retries do not cover: they retry a
//! request, not a body already streaming) goes on from where it stopped with a ranged GET
//! pinned to the ETag (`If-Match`: an object replaced meanwhile is refused, not mixed), up to
//! `attempts` cuts. Shared by `StoreFile`'s ranged parts and `StoreClient::get_into`.

use crate::error::{Error, ErrorKind};
use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, ObjectStore};
use std::future::Future;
use std::ops::Range;
use std::path::Path;

/// What the first response said and how many bytes were handed on.
pub(crate) struct Streamed {
    /// The object's size as the first response gave it.
    pub size: u64,
    /// The first response's ETag.
    pub etag: Option<String>,
    /// Bytes handed to the sink (more than the range when a server sent more).
    pub got: u64,
}

/// Why it stopped: the last error, and how many bodies were cut before it.
pub(crate) struct Failed {
    pub error: object_store::Error,
    pub cuts: u32,
    /// The error broke a body (else a request failed).
    pub body: bool,
    pub at: u64,
}

impl Failed {
    /// A body cut on every attempt worded as such, naming `name`; `None` for a failed
    /// request (the caller words the store's error).
    pub(crate) fn cut_short(&self, len: u64, name: &str) -> Option<Error> {
        self.body.then(|| {
            Error::new(ErrorKind::Http(format!(
                "the body was cut short {} times (the last at {} of {len} bytes): {}",
                self.cuts, self.at, self.error
            )))
            .in_file(Path::new(name))
        })
    }
}

/// GETs `range` of `path` (the whole object, unranged, when `range` is `0..size`), handing
/// each chunk to `sink` (`false`: stop, the reader went away). `etag` pins every request
/// (`None`: the first response's pins the resumed ones). A first response whose object is
/// not `size` bytes long is handed back before its body is read.
pub(crate) async fn get_resumed<F, Fut>(
    store: &dyn ObjectStore,
    path: &StorePath,
    range: Range<u64>,
    size: u64,
    mut etag: Option<String>,
    attempts: u32,
    mut sink: F,
) -> Result<Streamed, Failed>
where
    F: FnMut(bytes::Bytes) -> Fut,
    Fut: Future<Output = bool>,
{
    use futures_util::StreamExt;
    let whole = range.start == 0 && range.end == size;
    let (mut at, mut cuts, mut first) = (0u64, 0u32, None);
    loop {
        let from = range.start + at;
        let opts = GetOptions {
            range: (!(whole && at == 0)).then_some(GetRange::Bounded(from..range.end)),
            if_match: etag.clone(),
            ..GetOptions::default()
        };
        let r = match store.get_opts(path, opts).await {
            Ok(r) => r,
            Err(error) => {
                return Err(Failed {
                    error,
                    cuts,
                    body: false,
                    at,
                })
            }
        };
        let (got_size, got_etag) = first
            .get_or_insert_with(|| (r.meta.size, r.meta.e_tag.clone()))
            .clone();
        if got_size != size {
            return Ok(Streamed {
                size: got_size,
                etag: got_etag,
                got: 0,
            });
        }
        etag = etag.or(got_etag.clone());
        let mut body = r.into_stream();
        let mut broke = None;
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(c) => {
                    at += c.len() as u64;
                    if !sink(c).await {
                        return Ok(Streamed {
                            size,
                            etag: got_etag,
                            got: at,
                        });
                    }
                }
                Err(e) => {
                    broke = Some(e);
                    break;
                }
            }
        }
        match broke {
            None => {
                return Ok(Streamed {
                    size,
                    etag: got_etag,
                    got: at,
                })
            }
            Some(error) => {
                cuts += 1;
                if cuts >= attempts.max(1) || range.start + at >= range.end {
                    return Err(Failed {
                        error,
                        cuts,
                        body: true,
                        at,
                    });
                }
            }
        }
    }
}
