//! When a failed request to a store is tried again, and after how long: the one retry policy
//! of remote reads (http.rs) and writes (retried.rs), apart from any client so
//! that every client of a store follows it.
//!
//! - Retried: 5xx statuses other than 501 and 505 (S3's `503 SlowDown` among them), `429 Too
//!   Many Requests`, a store's error codes that mean "busy" whatever the status (S3's `400
//!   RequestTimeout`, Azure's `ServerBusy`), and failures of the connection itself: refused,
//!   reset, closed before the response or in the middle of the body. Not retried: every other
//!   4xx (the request itself is wrong, or the object is not there: trying again changes
//!   nothing). A timeout is retried by writes, whose `timeout` bounds each request, and not by
//!   reads, whose `timeout` bounds a request's attempts together ([`Backoff::new`] against
//!   [`Backoff::per_request`]).
//! - Backoff: exponential with full jitter, as AWS's SDKs do: before attempt `n + 1`, a random
//!   wait in `[0, min(CAP, BASE × 2^(n-1))]`, so clients throttled together do not come back
//!   together. A server's `Retry-After` (in seconds) is honoured instead, capped at [`CAP`].
//! - Bounded: at most `max_attempts` attempts, and never past the request's deadline; the
//!   final error says how many attempts were made ([`gave_up`]).

use crate::bytes::storage_options::Transfer;
use crate::error::ErrorKind;
use std::time::{Duration, Instant};

/// The first backoff's upper bound.
pub const BASE: Duration = Duration::from_millis(200);
/// No wait between two attempts is longer (boto3's maximum backoff).
pub const CAP: Duration = Duration::from_secs(20);

/// Whether a response of `status` is worth trying again: 5xx (but 501 Not Implemented and
/// 505 HTTP Version Not Supported, which do not pass) and 429.
pub fn retryable_status(status: u16) -> bool {
    status == 429 || ((500..600).contains(&status) && status != 501 && status != 505)
}

/// Whether a store's error code says "try again" whatever the status: throttling and
/// transient server trouble (S3's `SlowDown`, `InternalError`, `RequestTimeout`,
/// `ServiceUnavailable`; Azure's `ServerBusy`, `OperationTimedOut`, `InternalError`).
pub fn retryable_code(code: &str) -> bool {
    matches!(
        code,
        "SlowDown"
            | "InternalError"
            | "RequestTimeout"
            | "ServiceUnavailable"
            | "ServerBusy"
            | "OperationTimedOut"
    )
}

/// Whether a request that got no response is worth another attempt: the connection was
/// refused, reset or closed, or the response was garbled; a timeout only with `timeouts`
/// (writes); never an unknown host or a TLS failure.
pub fn retryable_transport(e: &ureq::Error, timeouts: bool) -> bool {
    match e {
        ureq::Error::Io(io) => {
            retryable_io(io) || (timeouts && io.kind() == std::io::ErrorKind::TimedOut)
        }
        ureq::Error::ConnectionFailed | ureq::Error::Protocol(_) => true,
        ureq::Error::Timeout(_) => timeouts,
        _ => false,
    }
}

/// Whether an I/O failure of a connection (no response, or a body cut short) is worth
/// trying again: refused, reset, aborted, closed early, a broken pipe. Timeouts are not.
pub fn retryable_io(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
            | K::BrokenPipe
            | K::UnexpectedEof
            | K::Interrupted
    )
}

/// A `Retry-After` header's wait: whole seconds (an HTTP date is not read: the backoff
/// applies then), capped at [`CAP`].
pub fn retry_after(value: Option<&str>) -> Option<Duration> {
    let secs: u64 = value?.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(CAP))
}

/// The attempts of one request: how many are left and how long to wait before each.
#[derive(Debug)]
pub struct Backoff {
    made: u32,
    max_attempts: u32,
    /// When every attempt must have ended (reads); `None`: each request has its own
    /// timeout (writes).
    deadline: Option<Instant>,
}

impl Backoff {
    /// The first attempt starts now; all of them must end within `transfer.timeout`.
    pub fn new(transfer: &Transfer) -> Backoff {
        Backoff {
            made: 1,
            max_attempts: transfer.max_attempts.max(1),
            deadline: Some(Instant::now() + transfer.timeout),
        }
    }

    /// The first attempt starts now; each may take `transfer.timeout` (the agent's own
    /// timeout), with no bound on them together but their number.
    pub fn per_request(transfer: &Transfer) -> Backoff {
        Backoff {
            made: 1,
            max_attempts: transfer.max_attempts.max(1),
            deadline: None,
        }
    }

    /// Attempts made so far (the current one included).
    pub fn attempts(&self) -> u32 {
        self.made
    }

    /// Time left before the deadline, for the current attempt's own timeout (no deadline:
    /// unbounded).
    pub fn remaining(&self) -> Duration {
        self.deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        })
    }

    /// After a retryable failure: how long to wait before the next attempt (`retry_after`:
    /// what the server asked for), counting that attempt as made; `None` when no attempt
    /// is left, or when the wait would pass the deadline.
    pub fn next_delay(&mut self, retry_after: Option<Duration>) -> Option<Duration> {
        if self.made >= self.max_attempts {
            return None;
        }
        let delay = retry_after.unwrap_or_else(|| jitter(ceiling(self.made)));
        if delay >= self.remaining() {
            return None;
        }
        self.made += 1;
        Some(delay)
    }

    /// [`Backoff::next_delay`], waited out: `false` when there is no next attempt.
    pub fn wait(&mut self, retry_after: Option<Duration>) -> bool {
        match self.next_delay(retry_after) {
            Some(d) => {
                std::thread::sleep(d);
                true
            }
            None => false,
        }
    }
}

/// The longest wait after failed attempt `n` (1-based): `BASE × 2^(n-1)`, capped.
fn ceiling(n: u32) -> Duration {
    BASE.saturating_mul(1u32 << (n - 1).min(16)).min(CAP)
}

/// A uniformly random duration in `[0, max]`: the clock's nanoseconds and a process-wide
/// counter mixed by SplitMix64 (jitter needs no better randomness).
fn jitter(max: Duration) -> Duration {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut z = nanos ^ calls.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    max.mul_f64((z >> 11) as f64 / (1u64 << 53) as f64)
}

/// The final error of a request whose attempts ran out: the last failure, saying how many
/// attempts were made (an endpoint that could not be reached stays so; any other failure
/// is an HTTP one).
pub fn gave_up(last: &ErrorKind, attempts: u32) -> ErrorKind {
    let s = match attempts {
        1 => "",
        _ => "s",
    };
    let note = |m: &dyn std::fmt::Display| format!("{m} (gave up after {attempts} attempt{s})");
    match last {
        ErrorKind::Http(m) => ErrorKind::Http(note(m)),
        ErrorKind::Unreachable(m) => ErrorKind::Unreachable(note(m)),
        other => ErrorKind::Http(note(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_retried() {
        for s in [500, 502, 503, 504, 429, 599] {
            assert!(retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 412, 416, 501, 505] {
            assert!(!retryable_status(s), "{s}");
        }
        let io = |k| std::io::Error::new(k, "x");
        assert!(retryable_io(&io(std::io::ErrorKind::ConnectionReset)));
        assert!(retryable_io(&io(std::io::ErrorKind::UnexpectedEof)));
        assert!(!retryable_io(&io(std::io::ErrorKind::TimedOut)));
        assert_eq!(retry_after(Some(" 3 ")), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(Some("86400")), Some(CAP));
        assert_eq!(retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert!(retryable_code("SlowDown") && retryable_code("ServerBusy"));
        assert!(!retryable_code("NoSuchKey") && !retryable_code(""));
        let timeout = ureq::Error::Timeout(ureq::Timeout::Global);
        assert!(retryable_transport(&timeout, true) && !retryable_transport(&timeout, false));
        assert!(retryable_transport(&ureq::Error::ConnectionFailed, false));
        assert!(!retryable_transport(&ureq::Error::HostNotFound, true));
    }

    #[test]
    fn backoff_is_bounded_by_attempts_and_deadline() {
        let t = Transfer {
            max_attempts: 4,
            timeout: Duration::from_secs(3600),
            ..Transfer::default()
        };
        let mut b = Backoff::new(&t);
        let mut delays = vec![];
        while let Some(d) = b.next_delay(None) {
            delays.push(d);
        }
        assert_eq!(b.attempts(), 4);
        assert_eq!(delays.len(), 3);
        for (i, d) in delays.iter().enumerate() {
            assert!(*d <= BASE * (1 << i), "{i}: {d:?}");
        }
        assert_eq!(ceiling(30), CAP);
        // A wait the deadline does not leave time for is not made.
        let t = Transfer {
            timeout: Duration::from_millis(50),
            ..t
        };
        let mut b = Backoff::new(&t);
        assert_eq!(b.next_delay(Some(Duration::from_secs(1))), None);
        assert_eq!(b.attempts(), 1);
        let e = gave_up(&ErrorKind::Http("HTTP status 503".into()), 5).to_string();
        assert!(e.contains("503") && e.contains("5 attempts"), "{e}");
    }
}
