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
//! How requests are made is the file's [`Transfer`] (from the storage options): every GET is
//! retried as `retry.rs` says (5xx, 429, a broken connection; backoff with jitter or the
//! server's `Retry-After`; all attempts of one GET within `timeout`), a body cut short is
//! resumed from its first missing byte with the pinned version's precondition (so a changed
//! object is still refused, never mixed), and a read larger than `part_size`, or a streaming
//! copy (a download), goes as parallel ranged GETs (`parts.rs`).
//!
//! Where the requests go is a [`Target`]: a plain URL, or an object store's or the Hub's
//! (`s3.rs`, `hf.rs`), which signs each request's URL, adds a token, and words the errors of
//! its store. A target's `Authorization` header is sent to its own host only: a redirect to
//! another host (the Hub's CDN) drops it.

use crate::bytes::retry::{self, Backoff};
use crate::bytes::storage_options::Transfer;
use crate::bytes::store::parts;
use crate::bytes::{check_range, redact_url, Pinned, ReadAt};
use crate::error::{Error, ErrorKind, Result};
use std::borrow::Cow;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use ureq::ResponseExt;

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

    /// Whether the URL a request was redirected to is asked directly by the next requests
    /// (the Hub's CDN, a release page's storage): one request each instead of two. Not for
    /// URLs signed per request, whose redirects are signed for one request too.
    fn keeps_redirects(&self) -> bool {
        false
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

/// The host and port of `url` (parsed as ureq parses it), for telling whether a redirect
/// left the target's host; `None` for what is not a URL.
fn host_of(url: &str) -> Option<(String, Option<u16>)> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    Some((uri.host()?.to_ascii_lowercase(), uri.port_u16()))
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
    fn keeps_redirects(&self) -> bool {
        true
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
    /// Attempts of requests made so far (a retried request counts each attempt).
    requests: AtomicU32,
    /// Body bytes received so far.
    received: AtomicU64,
    /// The version opened; `None` only while the first request is made.
    pin: Option<Pinned>,
    /// Parts, concurrency, attempts and timeouts of this file's requests.
    transfer: Transfer,
    /// Where the target's requests were last redirected (a target that keeps redirects):
    /// asked directly while it answers; forgotten, and the target asked again, when it
    /// refuses (a CDN's signed URL expires).
    via: Mutex<Option<String>>,
}

/// One response to the first GET: the file's total length, the bytes, the status, the
/// validators.
struct Reply {
    total: u64,
    bytes: Vec<u8>,
    status: u16,
    etag: Option<String>,
    last_modified: Option<String>,
}

/// A failed attempt: worth another (`Retry`, after what the server asked for) or final.
enum Failed {
    Retry(Box<Error>, Option<Duration>),
    Final(Box<Error>),
}

impl From<Error> for Failed {
    fn from(e: Error) -> Failed {
        Failed::Final(Box::new(e))
    }
}

/// A failure worth another attempt, after `after` if the server asked for a wait.
fn again(e: Error, after: Option<Duration>) -> Failed {
    Failed::Retry(Box::new(e), after)
}

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

/// Whether a read's request that got no response is worth another attempt (not a timeout:
/// the read's `timeout` bounds its attempts together).
fn retryable_transport(e: &ureq::Error) -> bool {
    retry::retryable_transport(e, false)
}

/// Reads `reader` into `dst` until `dst` is full or the body ends; the bytes read, and the
/// error that stopped it early, if any.
fn fill(reader: &mut impl Read, dst: &mut [u8]) -> (usize, Option<std::io::Error>) {
    let mut n = 0;
    while n < dst.len() {
        match reader.read(&mut dst[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (n, Some(e)),
        }
    }
    (n, None)
}

impl HttpFile {
    /// Opens `url`, learning its length and reading its first `first` bytes (fewer if the file
    /// is shorter) in one request; reads inside them are served from memory. Default
    /// transfer settings.
    pub fn open(url: &str, first: u64) -> Result<HttpFile> {
        HttpFile::open_with(url, first, &Transfer::default())
    }

    /// [`HttpFile::open`] with these transfer settings (parts, concurrency, attempts,
    /// timeouts).
    pub fn open_with(url: &str, first: u64, transfer: &Transfer) -> Result<HttpFile> {
        HttpFile::open_target(
            Box::new(PlainUrl {
                url: url.to_owned(),
                name: redact_url(url),
            }),
            first,
            transfer,
        )
    }

    /// Opens the file `target` names, as [`HttpFile::open_with`] does a URL.
    pub(crate) fn open_target(
        target: Box<dyn Target>,
        first: u64,
        transfer: &Transfer,
    ) -> Result<HttpFile> {
        let idle = transfer.max_concurrency + 1;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(transfer.timeout))
            .timeout_connect(Some(transfer.connect_timeout))
            .max_idle_connections(idle.max(10))
            .max_idle_connections_per_host(idle)
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
            received: AtomicU64::new(0),
            pin: None,
            transfer: *transfer,
            via: Mutex::new(None),
        };
        let first_reply = f.get_first(first.max(1))?;
        let pin = Pinned::new(
            first_reply.etag.as_deref(),
            first_reply.last_modified.as_deref(),
            first_reply.total,
        );
        let mut prefix = first_reply.bytes;
        prefix.truncate(first.min(first_reply.total) as usize);
        Ok(HttpFile {
            len: first_reply.total,
            prefix,
            ranges: first_reply.status != 200,
            pin: Some(pin),
            ..f
        })
    }

    /// The version pinned at open: its validator (if the server sent one) and length.
    pub fn pinned(&self) -> Option<&Pinned> {
        self.pin.as_ref()
    }

    /// The transfer settings reads use.
    pub fn transfer(&self) -> &Transfer {
        &self.transfer
    }

    /// A GET of the URL (or of where it was redirected, `via`), with the pinned version's
    /// precondition once the file is open, that must end within `time`. The target's
    /// `Authorization` goes to its own host only.
    fn request(
        &self,
        time: Duration,
        via: Option<&str>,
    ) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
        let own = self.target.url();
        let url = via.unwrap_or(&own);
        let mut req = self
            .agent
            .get(url)
            .config()
            .timeout_global(Some(time))
            .build();
        if let Some(auth) = self.target.authorization() {
            if via.is_none_or(|v| host_of(v).is_some() && host_of(v) == host_of(&own)) {
                req = req.header("Authorization", auth);
            }
        }
        match self.pin.as_ref().and_then(Pinned::precondition) {
            Some((name, value)) => req.header(name, value),
            None => req,
        }
    }

    /// A request that got no response (or a body cut short), named without the URL it was
    /// sent to; a timeout says which.
    #[inline(never)]
    fn transport_err(&self, e: ureq::Error) -> Error {
        let msg = match &e {
            ureq::Error::Timeout(t) => {
                let (what, d) = match t {
                    ureq::Timeout::Connect | ureq::Timeout::Resolve => {
                        ("connect_timeout", self.transfer.connect_timeout)
                    }
                    _ => ("timeout", self.transfer.timeout),
                };
                format!(
                    "no answer within {} s (the {what} storage option; {e})",
                    d.as_secs_f64()
                )
            }
            // Any URL the message quotes (the signed one, a redirect's) without credentials.
            _ => transport_message(&e),
        };
        Error::new(self.target.transport_error(&e, msg)).in_file(Path::new(&self.url))
    }

    /// A failure to read a body: retried when the connection broke, final otherwise.
    #[inline(never)]
    fn body_failed(&self, e: std::io::Error, got: usize, want: u64) -> Failed {
        let e = ureq::Error::from(e);
        let retry = retryable_transport(&e);
        let err = match e {
            ureq::Error::Timeout(_) => self.transport_err(e),
            e => http_err(
                &self.url,
                format!("body ended after {got} of {want} bytes ({e})"),
            ),
        };
        match retry {
            true => again(err, None),
            false => err.into(),
        }
    }

    /// A response of a status that brings no bytes, worded by the target.
    #[inline(never)]
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
    #[inline(never)]
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

    /// The file's URL, credentials removed (as errors name it).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// HTTP requests made so far, each attempt of a retried one counted.
    pub fn requests(&self) -> u32 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Body bytes received so far (the prefix, ranges, a whole-body download).
    pub fn bytes_received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
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
    /// checked against the one learnt at open; a failed attempt starts over.
    fn download(&self) -> Result<File> {
        let mut file = tempfile::tempfile()
            .map_err(|e| http_err(&self.url, format!("a temporary file for the body: {e}")))?;
        self.with_retries(&mut |time| {
            file.set_len(0)
                .and_then(|()| file.rewind())
                .map_err(|e| http_err(&self.url, format!("a temporary file for the body: {e}")))?;
            self.download_once(&mut file, time)
        })?;
        Ok(file)
    }

    fn download_once(&self, file: &mut File, time: Duration) -> Result<(), Failed> {
        let url = &self.url;
        let mut resp = self.send(None, time)?;
        let length = header(&resp, "content-length").and_then(|v| v.parse().ok());
        if resp.status().as_u16() != 200 {
            return Err(self.status_err(&mut resp).into());
        }
        self.check_version(&resp, length)?;
        let mut got = 0u64;
        let mut reader = resp.body_mut().as_reader();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let (n, err) = fill(&mut reader, &mut buf);
            self.received.fetch_add(n as u64, Ordering::Relaxed);
            file.write_all(&buf[..n])
                .map_err(|e| http_err(url, format!("a temporary file for the body: {e}")))?;
            got += n as u64;
            if let Some(e) = err {
                return Err(self.body_failed(e, got as usize, self.len));
            }
            if n < buf.len() {
                break;
            }
        }
        if got != self.len {
            // A body without Content-Length that turned out another length: another version.
            self.check_version(&resp, Some(got))?;
            return Err(Failed::from(http_err(
                url,
                format!(
                    "the body has {got} bytes, the file had {} when opened",
                    self.len
                ),
            )));
        }
        Ok(())
    }

    /// `attempt(time left)` until it succeeds, fails for good, or its attempts or time run
    /// out (the retry policy: `retry.rs`); the final error says how many attempts were made.
    /// (Not generic, to keep one copy of the loop in the binaries.)
    fn with_retries(&self, attempt: &mut dyn FnMut(Duration) -> Result<(), Failed>) -> Result<()> {
        let mut backoff = Backoff::new(&self.transfer);
        loop {
            let time = backoff.remaining();
            if time.is_zero() {
                return Err(self.transport_err(ureq::Error::Timeout(ureq::Timeout::Global)));
            }
            match attempt(time) {
                Ok(()) => return Ok(()),
                Err(Failed::Final(e)) => return Err(*e),
                Err(Failed::Retry(e, after)) => {
                    if !backoff.wait(after) {
                        let kind = retry::gave_up(e.kind(), backoff.attempts());
                        return Err(Error::new(kind).in_file(Path::new(&self.url)));
                    }
                }
            }
        }
    }

    /// One attempt of a GET (of `range`, if given): the response of a status that brings
    /// bytes (200, 206, 416), or why not. A 412 is the pinned version refused.
    #[inline(never)]
    fn send(
        &self,
        range: Option<Range<u64>>,
        time: Duration,
    ) -> Result<ureq::http::Response<ureq::Body>, Failed> {
        self.send_as(range, time, true)
    }

    /// [`HttpFile::send`]; `redirected`: to where the target last redirected, if known.
    fn send_as(
        &self,
        range: Option<Range<u64>>,
        time: Duration,
        redirected: bool,
    ) -> Result<ureq::http::Response<ureq::Body>, Failed> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let via = match redirected {
            true => self.via.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            false => None,
        };
        let mut req = self.request(time, via.as_deref());
        if let Some(r) = &range {
            req = req.header("Range", format!("bytes={}-{}", r.start, r.end - 1));
        }
        let mut resp = match req.call() {
            Ok(resp) => resp,
            Err(e) => {
                let retry = retryable_transport(&e);
                let err = self.transport_err(e);
                return Err(match retry {
                    true => again(err, None),
                    false => err.into(),
                });
            }
        };
        let status = resp.status().as_u16();
        if via.is_some() && matches!(status, 400 | 401 | 403 | 404 | 410) {
            // The redirect's URL no longer answers (expired): forgotten (unless another
            // request has put a newer one in its place) and the target asked again, once.
            let mut known = self.via.lock().unwrap_or_else(|p| p.into_inner());
            if *known == via {
                *known = None;
            }
            drop(known);
            return self.send_as(range, time, false);
        }
        if via.is_none() && self.target.keeps_redirects() && matches!(status, 200 | 206) {
            let at = resp.get_uri().to_string();
            if at != self.target.url() {
                *self.via.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
            }
        }
        match status {
            200 | 206 | 416 => Ok(resp),
            412 => {
                self.check_version(&resp, None)?;
                Err(self.status_err(&mut resp).into())
            }
            s if retry::retryable_status(s) => {
                let after = retry::retry_after(header(&resp, "retry-after").as_deref());
                Err(again(self.status_err(&mut resp), after))
            }
            _ => Err(self.status_err(&mut resp).into()),
        }
    }

    /// The file's total length and the bytes to skip before `range.start` in a response to
    /// a GET of `range` (206; or 200, Range ignored: the whole file), checked against the
    /// pinned version. `None` for a 416 (nothing at `range.start`), with the total.
    #[inline(never)]
    fn span(
        &self,
        resp: &ureq::http::Response<ureq::Body>,
        range: &Range<u64>,
    ) -> Result<(u64, Option<u64>)> {
        let url = &self.url;
        let header = |name: &str| header(resp, name);
        match resp.status().as_u16() {
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
                self.check_version(resp, Some(total))?;
                Ok((total, Some(0)))
            }
            200 => {
                // The server ignored Range: the body is the whole file.
                let total = header("content-length")
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| {
                        http_err(url, "server ignores Range and sends no Content-Length")
                    })?;
                // A 200 (Range ignored, or If-Range failed) whose body is another version
                // is refused before a byte of it is used.
                self.check_version(resp, Some(total))?;
                Ok((total, Some(range.start)))
            }
            _ => {
                // 416: the file is shorter than the range's start (empty, for 0-).
                let total = header("content-range")
                    .and_then(|cr| cr.strip_prefix("bytes */").and_then(|t| t.parse().ok()))
                    .unwrap_or(0);
                self.check_version(resp, Some(total))?;
                Ok((total, None))
            }
        }
    }

    /// The first GET, at open: the file's length, its first `first` bytes (fewer if it is
    /// shorter), the status (200: Range ignored) and the validators to pin. A failed attempt
    /// starts over (nothing is pinned yet to resume against).
    fn get_first(&self, first: u64) -> Result<Reply> {
        let range = 0..first;
        let mut reply = None;
        self.with_retries(&mut |time| {
            let mut resp = self.send(Some(range.clone()), time)?;
            let (total, skip) = self.span(&resp, &range)?;
            let (etag, last_modified) = (header(&resp, "etag"), header(&resp, "last-modified"));
            let status = resp.status().as_u16();
            let want = first.min(total);
            let mut bytes = vec![0u8; want as usize];
            if skip.is_some() {
                let (n, err) = fill(&mut resp.body_mut().as_reader(), &mut bytes);
                self.received.fetch_add(n as u64, Ordering::Relaxed);
                if let Some(e) = err {
                    return Err(self.body_failed(e, n, want));
                }
                if (n as u64) < want {
                    return Err(again(
                        http_err(&self.url, format!("body ended after {n} of {want} bytes")),
                        None,
                    ));
                }
            }
            reply = Some(Reply {
                total,
                bytes,
                status,
                etag,
                last_modified,
            });
            Ok(())
        })?;
        Ok(reply.expect("set by the attempt that succeeded"))
    }

    /// The bytes of `range` (within the file, past the open) into `dst`, of its length, by
    /// ranged GETs of the pinned version: retried on their own, a connection that breaks
    /// mid-body resumed from the first byte still missing.
    #[inline(never)]
    fn get_into(&self, range: Range<u64>, dst: &mut [u8]) -> Result<()> {
        let mut filled = 0usize;
        self.with_retries(&mut |time| {
            let rest = range.start + filled as u64..range.end;
            let mut resp = self.send(Some(rest.clone()), time)?;
            let (total, skip) = self.span(&resp, &rest)?;
            if rest.end > total || skip.is_none() {
                return Err(Failed::from(http_err(
                    &self.url,
                    format!("range ends at {} but the file has {total} bytes", rest.end),
                )));
            }
            let mut reader = resp.body_mut().as_reader();
            if let Some(skip @ 1..) = skip {
                std::io::copy(&mut (&mut reader).take(skip), &mut std::io::sink())
                    .map_err(|e| self.body_failed(e, 0, rest.end - rest.start))?;
            }
            let (n, err) = fill(&mut reader, &mut dst[filled..]);
            self.received.fetch_add(n as u64, Ordering::Relaxed);
            filled += n;
            if let Some(e) = err {
                return Err(self.body_failed(e, filled, range.end - range.start));
            }
            if filled < dst.len() {
                return Err(again(
                    http_err(
                        &self.url,
                        format!(
                            "body ended after {filled} of {} bytes",
                            range.end - range.start
                        ),
                    ),
                    None,
                ));
            }
            Ok(())
        })
    }

    /// The bytes of `range`, which must lie within the file: parts fetched in parallel when
    /// it is larger than a part.
    /// [`HttpFile::get_into`] a reused buffer, resized to the range (a [`parts::Fetch`]).
    fn get_part(&self, range: Range<u64>, mut buf: Vec<u8>) -> Result<Vec<u8>> {
        buf.resize((range.end - range.start) as usize, 0);
        self.get_into(range, &mut buf).map(|()| buf)
    }

    fn fetch(&self, range: Range<u64>) -> Result<Vec<u8>> {
        check_range(&range, self.len).map_err(|e| e.in_file(Path::new(&redact_url(&self.url))))?;
        if range.is_empty() {
            return Ok(Vec::new());
        }
        if !self.ranges {
            return self.read_spooled(range);
        }
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        if range.end - range.start <= self.transfer.part_size {
            self.get_into(range, &mut buf)?;
        } else {
            let fetch = |r, b| self.get_part(r, b);
            parts::copy_parallel(range, &mut &mut buf[..], &self.transfer, &fetch)?;
        }
        Ok(buf)
    }
}

impl ReadAt for HttpFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn parallel_reads(&self) -> Option<usize> {
        Some(self.transfer.max_concurrency)
    }

    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        if range.start <= range.end && range.end <= self.prefix.len() as u64 {
            return Ok(Cow::Borrowed(
                &self.prefix[range.start as usize..range.end as usize],
            ));
        }
        self.fetch(range).map(Cow::Owned)
    }

    /// The bytes of `range` streamed to `out` in order: what the prefix holds from memory,
    /// the rest as parallel ranged GETs (memory bounded by `max_concurrency × part_size`).
    fn copy_to(&self, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
        check_range(&range, self.len).map_err(|e| e.in_file(Path::new(&self.url)))?;
        // The first byte the prefix does not hold.
        let held = (self.prefix.len() as u64).clamp(range.start, range.end);
        if range.start < held {
            out.write_all(&self.prefix[range.start as usize..held as usize])?;
        }
        let rest = held..range.end;
        if rest.is_empty() {
            return Ok(());
        }
        if !self.ranges {
            return crate::bytes::copy_chunked(rest, out, |off, buf| self.read_exact_at(off, buf));
        }
        parts::copy_parallel(rest, out, &self.transfer, &|r, b| self.get_part(r, b))
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
