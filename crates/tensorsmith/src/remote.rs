//! Files over HTTP(S), read by range requests: only the bytes a reader asks for travel, so
//! the header of a 10 GB model costs a request or two. Servers that ignore `Range` (answering
//! 200 with the whole body) still work: only the needed prefix of the body is read before the
//! connection is dropped.

use crate::error::{Error, ErrorKind, Result};
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Whether `s` names a remote file (`http://` or `https://`).
pub fn is_url(s: &str) -> bool {
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// A remote file of known length.
#[derive(Debug)]
pub struct RemoteFile {
    agent: ureq::Agent,
    url: String,
    len: u64,
    requests: AtomicU32,
}

/// Timeout of each request, connection to last byte.
const TIMEOUT: Duration = Duration::from_secs(60);

fn http_err(url: &str, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Http(msg.into())).in_file(Path::new(url))
}

impl RemoteFile {
    /// Opens `url`, learning its length and reading its first `first` bytes (fewer if the file
    /// is shorter) in one request.
    pub fn open(url: &str, first: u64) -> Result<(RemoteFile, Vec<u8>)> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        let f = RemoteFile {
            agent,
            url: url.to_owned(),
            len: 0,
            requests: AtomicU32::new(0),
        };
        let (total, bytes) = f.get(0..first.max(1), true)?;
        let f = RemoteFile { len: total, ..f };
        let keep = first.min(total) as usize;
        let mut bytes = bytes;
        bytes.truncate(keep);
        Ok((f, bytes))
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// HTTP requests made so far.
    pub fn requests(&self) -> u32 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The bytes of `range`, which must lie within the file.
    pub fn read(&self, range: Range<u64>) -> Result<Vec<u8>> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::new(ErrorKind::Truncated {
                needed: range.end,
                available: self.len,
            })
            .in_file(Path::new(&self.url)));
        }
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let want = range.end - range.start;
        let (_, bytes) = self.get(range, false)?;
        if bytes.len() as u64 != want {
            return Err(http_err(
                &self.url,
                format!("server sent {} bytes for a range of {want}", bytes.len()),
            ));
        }
        Ok(bytes)
    }

    /// One GET of `range`. Returns the file's total length and the bytes of the range (or as
    /// many as the file has, when `may_be_short`).
    fn get(&self, range: Range<u64>, may_be_short: bool) -> Result<(u64, Vec<u8>)> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let url = &self.url;
        let mut resp = self
            .agent
            .get(url)
            .header("Range", format!("bytes={}-{}", range.start, range.end - 1))
            .call()
            .map_err(|e| http_err(url, e.to_string()))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
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
                return Ok((total, Vec::new()));
            }
            s => {
                return Err(http_err(url, format!("HTTP status {s}")));
            }
        };
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
        Ok((total, bytes))
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
        assert_eq!(parse_content_range("bytes 0-99/1234"), Some((0, 1234)));
        assert_eq!(parse_content_range("bytes 10-10/11"), Some((10, 11)));
        assert_eq!(parse_content_range("bytes */5"), None);
        assert!(is_url("https://example.com/m.safetensors"));
        assert!(is_url("HTTP://x"));
        assert!(!is_url("model.safetensors"));
        assert!(!is_url("http"));
    }
}
