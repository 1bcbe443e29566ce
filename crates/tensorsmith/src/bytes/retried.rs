//! One HTTP request of a Cloud Storage upload or blob call, retried per the
//! transfer settings and the one retry policy (retry.rs: the statuses, error codes and
//! transport failures every store client retries, the same backoff), for the clients that
//! have no request layer of their own. The URL is made afresh for each attempt (a SAS signed
//! now); errors name the object's URL, never the request's.

use crate::bytes::http::{is_unreachable, transport_message};
use crate::bytes::retry::{retryable_transport, Backoff};
use crate::bytes::storage_options::Transfer;
use crate::bytes::store::error::error_code;
use crate::error::{Error, ErrorKind, Result};
use std::io::Read;
use std::path::Path;

/// Whether a status (with the store's error code) is worth another attempt.
fn retryable_status(status: u16, code: &str) -> bool {
    crate::bytes::retry::retryable_status(status) || crate::bytes::retry::retryable_code(code)
}

/// A response: status, `Location` and body: as text (the first MiB: other replies
/// are acknowledgements, listings and error bodies), and whole as bytes for a `GET`.
pub(crate) struct Reply {
    pub status: u16,
    pub location: Option<String>,
    /// Cloud Storage's `x-goog-generation`: the object's version, what its conditions name.
    pub generation: Option<String>,
    pub body: String,
    /// The whole body of a `GET` (empty for other methods).
    pub bytes: Vec<u8>,
}

/// The methods uploads and the blob clients use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Method {
    Get,
    Put,
    Post,
    Delete,
}

/// An agent for uploads with the transfer settings. Redirects are not followed: a resumable
/// upload answers its chunks with 308 (Resume Incomplete), which is no redirect.
pub(crate) fn agent(transfer: &Transfer) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(transfer.timeout))
        .timeout_connect(Some(transfer.connect_timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .max_idle_connections_per_host(transfer.max_concurrency.max(3))
        .build()
        .into()
}

/// Sends `method url()` with `headers` and `body`, retried; `name` (the object's URL) and
/// `endpoint` (redacted) word the error when no response came.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send(
    agent: &ureq::Agent,
    transfer: &Transfer,
    method: Method,
    url: &dyn Fn() -> String,
    headers: &[(&str, String)],
    body: &[u8],
    name: &str,
    endpoint: &str,
) -> Result<Reply> {
    let mut backoff = Backoff::per_request(transfer);
    loop {
        match send_once(agent, method, &url(), headers, body) {
            Ok(r)
                if retryable_status(r.status, error_code(&r.body).unwrap_or(""))
                    && backoff.wait(None) => {}
            Ok(r) => return Ok(r),
            Err(e) if retryable_transport(&e, true) && backoff.wait(None) => {}
            Err(e) => {
                let msg = match (transport_message(&e), backoff.attempts()) {
                    (m, 1) => m,
                    (m, n) => format!("{m} (after {n} attempts)"),
                };
                let kind = match is_unreachable(&e) {
                    true => ErrorKind::Unreachable(format!("{endpoint} ({msg})")),
                    false => ErrorKind::Http(msg),
                };
                return Err(Error::new(kind).in_file(Path::new(name)));
            }
        }
    }
}

fn send_once(
    agent: &ureq::Agent,
    method: Method,
    url: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::result::Result<Reply, ureq::Error> {
    let resp = match method {
        Method::Get => {
            let mut r = agent.get(url);
            for (k, v) in headers {
                r = r.header(*k, v);
            }
            r.call()
        }
        Method::Delete => {
            let mut r = agent.delete(url);
            for (k, v) in headers {
                r = r.header(*k, v);
            }
            r.call()
        }
        Method::Put | Method::Post => {
            let mut r = match method {
                Method::Put => agent.put(url),
                _ => agent.post(url),
            };
            for (k, v) in headers {
                r = r.header(*k, v);
            }
            match body.is_empty() {
                true => r.header("content-length", "0").send_empty(),
                false => r.send(body),
            }
        }
    };
    let mut resp = resp?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let location = header("location");
    let generation = header("x-goog-generation");
    let status = resp.status().as_u16();
    let mut bytes = Vec::new();
    let reader = resp.body_mut().as_reader();
    match method {
        // A body cut short is a failure (retried), never a shorter object.
        Method::Get => {
            reader
                .take(u64::MAX)
                .read_to_end(&mut bytes)
                .map_err(ureq::Error::Io)?;
        }
        _ => {
            let _ = reader.take(1 << 20).read_to_end(&mut bytes);
        }
    }
    let body = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 20)]).into_owned();
    if method != Method::Get {
        bytes = Vec::new();
    }
    Ok(Reply {
        status,
        location,
        generation,
        body,
        bytes,
    })
}
