//! Files over HTTP(S), read by range requests: only the bytes a reader asks for travel, so
//! the header of a 10 GB model costs a request or two. The first bytes, fetched when the file
//! is opened, are kept and serve every read that falls inside them. Servers that ignore
//! `Range` (answering 200 with the whole body, as `python -m http.server` does) still work:
//! reads inside the first bytes cost nothing more, and the first read past them downloads the
//! body once, as a stream, into an unlinked temporary file that serves every later read (a
//! range per read would fetch the whole body again each time).
//!
//! The version opened is pinned ([`Pinned`]: the first response's strong `ETag`, else its
//! `Last-Modified`, and the length) and sent with every later request as a precondition
//! (`If-Match` or `If-Unmodified-Since`); every later response, a whole-body download
//! included, is checked against it too, for servers that ignore preconditions. A file
//! replaced during a read is [`ErrorKind::ChangedDuringRead`], never a mix of two versions.
//! Errors name the URL without credentials ([`redact_url`]).
//!
//! Where the requests go is a [`Target`]: a plain URL, or an object store's or the Hub's
//! (`s3.rs`, `hf.rs`), which signs each request's URL, adds a token, and words the errors of
//! its store. A target's `Authorization` header is sent to its own host only: a redirect to
//! another host (the Hub's CDN) drops it.

use super::{check_range, redact_url, Pinned, ReadAt};
use crate::error::{Error, ErrorKind, Result};
use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Where an [`HttpFile`]'s requests go, and what its failures mean.
pub(crate) trait Target: Send + Sync + std::fmt::Debug {
    /// The name errors and messages show: never a credential or a signature.
    fn name(&self) -> &str;

    /// The URL of the next request (signed now, for a store that signs URLs).
    fn url(&self) -> String;

    /// The `Authorization` header's value for the target's own host, if any.
    fn authorization(&self) -> Option<String> {
        None
    }

    /// The error for a response of status `status` (not 200, 206, 412, 416), given its
    /// `X-Error-Code` header and the start of its body.
    fn status_error(&self, status: u16, error_code: Option<&str>, body: &str) -> ErrorKind {
        let _ = body;
        other_status(status, error_code.unwrap_or(""))
    }

    /// The endpoint a store's requests go to (without credentials), named when it does not
    /// answer; `None` for a plain URL, whose name says it.
    fn endpoint(&self) -> Option<&str> {
        None
    }

    /// The error for a request that got no response (`msg` has no URL in it).
    fn transport_error(&self, e: &ureq::Error, msg: String) -> ErrorKind {
        match self.endpoint() {
            Some(endpoint) if is_unreachable(e) => {
                ErrorKind::Unreachable(format!("{endpoint} ({msg})"))
            }
            _ => ErrorKind::Http(msg),
        }
    }
}

/// A status no store names more precisely, with the store's error code when it sent one.
pub(crate) fn other_status(status: u16, code: &str) -> ErrorKind {
    match code {
        "" => ErrorKind::Http(format!("HTTP status {status}")),
        c => ErrorKind::Http(format!("HTTP status {status} ({c})")),
    }
}

/// Whether a request failed for want of a connection: refused, unknown host, timed out.
pub(crate) fn is_unreachable(e: &ureq::Error) -> bool {
    matches!(
        e,
        ureq::Error::Io(_)
            | ureq::Error::HostNotFound
            | ureq::Error::ConnectionFailed
            | ureq::Error::Timeout(_)
    )
}

/// The message of a request that got no response, with any URL it quotes (the signed one, a
/// redirect's) without credentials.
pub(crate) fn transport_message(e: &ureq::Error) -> String {
    e.to_string()
        .split(' ')
        .map(|w| match w.contains("://") {
            true => redact_url(w),
            false => w.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A plain `http(s)://` URL, which may carry credentials (userinfo, a signed query): sent as
/// given, named without them.
struct PlainUrl {
    url: String,
    name: String,
}

impl std::fmt::Debug for PlainUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlainUrl({:?})", self.name)
    }
}

impl Target for PlainUrl {
    fn name(&self) -> &str {
        &self.name
    }
    fn url(&self) -> String {
        self.url.clone()
    }
}

/// A remote file of known length.
#[derive(Debug)]
pub struct HttpFile {
    agent: ureq::Agent,
    target: Box<dyn Target>,
    /// The target's name (no credentials), for errors.
    url: String,
    len: u64,
    /// The first bytes of the file, fetched at open.
    prefix: Vec<u8>,
    /// Whether the server answers Range requests (206); learnt at open.
    ranges: bool,
    /// Without ranges: the whole body, downloaded once at the first read past `prefix`.
    spool: Mutex<Option<File>>,
    requests: AtomicU32,
    /// The version opened; `None` only while the first request is made.
    pin: Option<Pinned>,
}

/// One response to a GET: the file's total length, the bytes, the status, the validators.
struct Reply {
    total: u64,
    bytes: Vec<u8>,
    status: u16,
    etag: Option<String>,
    last_modified: Option<String>,
}

/// Timeout of each request, connection to last byte.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Timeout of a connection (an endpoint that does not answer fails in this time).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn http_err(url: &str, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Http(msg.into())).in_file(Path::new(&redact_url(url)))
}

fn changed_err(url: &str, kind: ErrorKind) -> Error {
    Error::new(kind).in_file(Path::new(&redact_url(url)))
}

/// A response header as text.
fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

impl HttpFile {
    /// Opens `url`, learning its length and reading its first `first` bytes (fewer if the file
    /// is shorter) in one request; reads inside them are served from memory.
    pub fn open(url: &str, first: u64) -> Result<HttpFile> {
        HttpFile::open_target(
            Box::new(PlainUrl {
                url: url.to_owned(),
                name: redact_url(url),
            }),
            first,
        )
    }

    /// Opens the file `target` names, as [`HttpFile::open`] does a URL.
    pub(crate) fn open_target(target: Box<dyn Target>, first: u64) -> Result<HttpFile> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .http_status_as_error(false)
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost)
            .build()
            .into();
        let f = HttpFile {
            agent,
            url: target.name().to_owned(),
            target,
            len: 0,
            prefix: Vec::new(),
            ranges: true,
            spool: Mutex::new(None),
            requests: AtomicU32::new(0),
            pin: None,
        };
        let mut first_reply = f.get(0..first.max(1), true)?;
        first_reply
            .bytes
            .truncate(first.min(first_reply.total) as usize);
        let pin = Pinned::new(
            first_reply.etag.as_deref(),
            first_reply.last_modified.as_deref(),
            first_reply.total,
        );
        Ok(HttpFile {
            len: first_reply.total,
            prefix: first_reply.bytes,
            ranges: first_reply.status != 200,
            pin: Some(pin),
            ..f
        })
    }

    /// The version pinned at open: its validator (if the server sent one) and length.
    pub fn pinned(&self) -> Option<&Pinned> {
        self.pin.as_ref()
    }

    /// A GET of the URL, with the pinned version's precondition once the file is open.
    fn request(&self) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
        let mut req = self.agent.get(self.target.url());
        if let Some(auth) = self.target.authorization() {
            req = req.header("Authorization", auth);
        }
        match self.pin.as_ref().and_then(Pinned::precondition) {
            Some((name, value)) => req.header(name, value),
            None => req,
        }
    }

    /// A request that got no response, named without the URL it was sent to.
    fn transport_err(&self, e: ureq::Error) -> Error {
        let msg = transport_message(&e);
        Error::new(self.target.transport_error(&e, msg)).in_file(Path::new(&self.url))
    }

    /// A response of a status that brings no bytes, worded by the target.
    fn status_err(&self, resp: &mut ureq::http::Response<ureq::Body>) -> Error {
        let status = resp.status().as_u16();
        let code = header(resp, "x-error-code");
        let mut body = Vec::new();
        let _ = resp
            .body_mut()
            .as_reader()
            .take(4096)
            .read_to_end(&mut body);
        let body = String::from_utf8_lossy(&body);
        Error::new(self.target.status_error(status, code.as_deref(), &body))
            .in_file(Path::new(&self.url))
    }

    /// Checks a later response against the pinned version: 412 (a precondition failed) or
    /// other validators or another length are [`ErrorKind::ChangedDuringRead`].
    fn check_version(
        &self,
        resp: &ureq::http::Response<ureq::Body>,
        len: Option<u64>,
    ) -> Result<()> {
        let Some(pin) = &self.pin else {
            return Ok(());
        };
        if resp.status().as_u16() == 412 {
            return Err(changed_err(&self.url, pin.refused()));
        }
        pin.check(
            header(resp, "etag").as_deref(),
            header(resp, "last-modified").as_deref(),
            len.unwrap_or(pin.len()),
        )
        .map_err(|k| changed_err(&self.url, k))
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// HTTP requests made so far.
    pub fn requests(&self) -> u32 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Whether the server answers range requests (else the body is downloaded once).
    pub fn serves_ranges(&self) -> bool {
        self.ranges
    }

    /// `range` from the whole body, downloaded once (for servers that ignore Range). Readers
    /// that arrive during the download wait for it rather than start their own.
    fn read_spooled(&self, range: Range<u64>) -> Result<Vec<u8>> {
        let mut slot = self.spool.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(self.download()?);
        }
        let file = slot.as_ref().expect("just set");
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        std::os::unix::fs::FileExt::read_exact_at(file, &mut buf, range.start)
            .map_err(|e| http_err(&self.url, format!("reading the downloaded body: {e}")))?;
        Ok(buf)
    }

    /// The whole body in an unlinked temporary file, streamed (bounded memory), its length
    /// checked against the one learnt at open.
    fn download(&self) -> Result<File> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let url = &self.url;
        let mut resp = self.request().call().map_err(|e| self.transport_err(e))?;
        let status = resp.status().as_u16();
        if status != 200 && status != 412 {
            return Err(self.status_err(&mut resp));
        }
        let length = header(&resp, "content-length").and_then(|v| v.parse().ok());
        self.check_version(&resp, length)?;
        let mut file = tempfile::tempfile()
            .map_err(|e| http_err(url, format!("a temporary file for the body: {e}")))?;
        let got = std::io::copy(&mut resp.body_mut().as_reader(), &mut file)
            .map_err(|e| http_err(url, e.to_string()))?;
        if got != self.len {
            // A body without Content-Length that turned out another length: another version.
            self.check_version(&resp, Some(got))?;
            return Err(http_err(
                url,
                format!(
                    "the body has {got} bytes, the file had {} when opened",
                    self.len
                ),
            ));
        }
        Ok(file)
    }

    /// The bytes of `range`, which must lie within the file, in one request.
    fn fetch(&self, range: Range<u64>) -> Result<Vec<u8>> {
        check_range(&range, self.len).map_err(|e| e.in_file(Path::new(&redact_url(&self.url))))?;
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let want = range.end - range.start;
        if !self.ranges {
            return self.read_spooled(range);
        }
        let bytes = self.get(range, false)?.bytes;
        if bytes.len() as u64 != want {
            return Err(http_err(
                &self.url,
                format!("server sent {} bytes for a range of {want}", bytes.len()),
            ));
        }
        Ok(bytes)
    }

    /// One GET of `range`: the file's total length, the bytes of the range (or as many as
    /// the file has, when `may_be_short`), the status (200: Range ignored) and the
    /// validators. Once the file is open, the response must be of the pinned version.
    fn get(&self, range: Range<u64>, may_be_short: bool) -> Result<Reply> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let url = &self.url;
        let mut resp = self
            .request()
            .header("Range", format!("bytes={}-{}", range.start, range.end - 1))
            .call()
            .map_err(|e| self.transport_err(e))?;
        let status = resp.status().as_u16();
        if status == 412 {
            self.check_version(&resp, None)?;
        }
        let header = |name: &str| header(&resp, name);
        let (total, skip) = match status {
            206 => {
                let cr = header("content-range")
                    .ok_or_else(|| http_err(url, "206 response without Content-Range"))?;
                let (start, total) = parse_content_range(&cr)
                    .ok_or_else(|| http_err(url, format!("bad Content-Range '{cr}'")))?;
                if start != range.start {
                    return Err(http_err(
                        url,
                        format!("asked for byte {}, got {cr}", range.start),
                    ));
                }
                (total, 0)
            }
            200 => {
                // The server ignored Range: the body is the whole file.
                let total = header("content-length")
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| {
                        http_err(url, "server ignores Range and sends no Content-Length")
                    })?;
                (total, range.start)
            }
            416 => {
                // Nothing to send: the file is shorter than the range's start (empty, for 0-).
                let total = header("content-range")
                    .and_then(|cr| cr.strip_prefix("bytes */").and_then(|t| t.parse().ok()))
                    .unwrap_or(0);
                self.check_version(&resp, Some(total))?;
                return Ok(Reply {
                    total,
                    bytes: Vec::new(),
                    status,
                    etag: header("etag"),
                    last_modified: header("last-modified"),
                });
            }
            _ => {
                return Err(self.status_err(&mut resp));
            }
        };
        // A 206 of another version, or a 200 (Range ignored, or If-Range failed) whose body
        // is another version, is refused before a byte of it is used.
        self.check_version(&resp, Some(total))?;
        let (etag, last_modified) = (header("etag"), header("last-modified"));
        let want = range.end.min(total).saturating_sub(range.start);
        if !may_be_short && range.end > total {
            return Err(http_err(
                url,
                format!("range ends at {} but the file has {total} bytes", range.end),
            ));
        }
        let mut reader = resp.body_mut().as_reader();
        if skip > 0 {
            std::io::copy(&mut (&mut reader).take(skip), &mut std::io::sink())
                .map_err(|e| http_err(url, e.to_string()))?;
        }
        let mut bytes = Vec::with_capacity(want.min(64 << 20) as usize);
        reader
            .take(want)
            .read_to_end(&mut bytes)
            .map_err(|e| http_err(url, e.to_string()))?;
        if (bytes.len() as u64) < want {
            return Err(http_err(
                url,
                format!("body ended after {} of {want} bytes", bytes.len()),
            ));
        }
        Ok(Reply {
            total,
            bytes,
            status,
            etag,
            last_modified,
        })
    }
}

impl ReadAt for HttpFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        if range.start <= range.end && range.end <= self.prefix.len() as u64 {
            return Ok(Cow::Borrowed(
                &self.prefix[range.start as usize..range.end as usize],
            ));
        }
        self.fetch(range).map(Cow::Owned)
    }
}

/// `bytes START-END/TOTAL` → (START, TOTAL).
fn parse_content_range(v: &str) -> Option<(u64, u64)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (span, total) = rest.split_once('/')?;
    let (start, _end) = span.split_once('-')?;
    Some((start.trim().parse().ok()?, total.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_and_urls() {
        use crate::bytes::is_url;
        assert_eq!(parse_content_range("bytes 0-99/1234"), Some((0, 1234)));
        assert_eq!(parse_content_range("bytes 10-10/11"), Some((10, 11)));
        assert_eq!(parse_content_range("bytes */5"), None);
        assert!(is_url("https://example.com/m.safetensors"));
        assert!(is_url("HTTP://x"));
        assert!(!is_url("model.safetensors"));
        assert!(!is_url("http"));
    }
}
