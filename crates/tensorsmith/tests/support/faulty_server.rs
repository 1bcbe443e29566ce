//! A small HTTP/1.1 server for tests, on 127.0.0.1, that serves one file (at any path) with
//! Range (206), a strong `ETag` and `If-Match` (412), and fails the requests a script picks:
//! a status (503 with S3's `SlowDown` body, 429 with `Retry-After`…), a connection dropped
//! after some body bytes, a connection closed before any answer, or a stall (the request read,
//! nothing sent). It records every request's range and `If-Match`, so tests can check that a
//! retried read asks only for the bytes still missing, of the version first seen. Shared by
//! the library's and the CLI's retry tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const ETAG: &str = "\"v1\"";

/// What one request gets instead of its bytes.
#[derive(Clone, Debug)]
pub enum Fault {
    /// This status, with `Retry-After: N` when given, and an S3-style error body naming
    /// the code.
    Status(u16, Option<u64>, &'static str),
    /// The headers and this many body bytes, then the connection closed.
    DropAfter(usize),
    /// The connection closed before any answer.
    Close,
    /// The request read, then nothing sent for this long.
    Stall(Duration),
}

/// One request as the server saw it: its number (0-based, in arrival order), its range
/// (first and last byte) and its `If-Match`.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub index: usize,
    pub range: Option<(u64, u64)>,
    pub if_match: Option<String>,
}

/// Picks the fault, if any, for a request.
pub type Script = Box<dyn Fn(&Seen) -> Option<Fault> + Send + Sync>;

pub struct FaultyServer {
    base: String,
    pub requests: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl FaultyServer {
    pub fn start(body: Vec<u8>, script: Script) -> FaultyServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (body, script) = (Arc::new(body), Arc::new(script));
        let (r, s) = (requests.clone(), seen.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (body, script, r, s) = (body.clone(), script.clone(), r.clone(), s.clone());
                std::thread::spawn(move || serve(stream, &body, &script, &r, &s));
            }
        });
        FaultyServer {
            base,
            requests,
            seen,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serves the requests of one connection (keep-alive) until it closes or a fault ends it.
fn serve(
    stream: TcpStream,
    body: &[u8],
    script: &Script,
    requests: &AtomicUsize,
    seen: &Mutex<Vec<Seen>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut range, mut if_match) = (None, None);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                break;
            }
            let Some((name, value)) = h.trim().split_once(':') else {
                continue;
            };
            let value = value.trim().to_owned();
            match name.trim().to_ascii_lowercase().as_str() {
                "range" => {
                    let (a, b) = value
                        .strip_prefix("bytes=")
                        .unwrap()
                        .split_once('-')
                        .unwrap();
                    range = Some((a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()));
                }
                "if-match" => if_match = Some(value),
                _ => {}
            }
        }
        let req = Seen {
            index: requests.fetch_add(1, Ordering::SeqCst),
            range,
            if_match,
        };
        seen.lock().unwrap().push(req.clone());
        let total = body.len() as u64;
        let (a, b) = range.unwrap_or((0, total.saturating_sub(1)));
        let b = b.min(total.saturating_sub(1));
        let part = &body[a as usize..=b as usize];
        let head = format!(
            "HTTP/1.1 206 Partial Content\r\nETag: {ETAG}\r\nContent-Range: bytes {a}-{b}/{total}\r\nContent-Length: {}\r\n\r\n",
            part.len()
        );
        match script(&req) {
            None if req.if_match.as_ref().is_some_and(|m| m != ETAG) => {
                let _ =
                    out.write_all(b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n");
            }
            None => {
                let _ = out.write_all(head.as_bytes());
                if out.write_all(part).is_err() {
                    return;
                }
            }
            Some(Fault::Status(status, retry_after, code)) => {
                let text = format!("<Error><Code>{code}</Code></Error>");
                let after = retry_after.map_or(String::new(), |s| format!("Retry-After: {s}\r\n"));
                let h = format!(
                    "HTTP/1.1 {status} {code}\r\n{after}Content-Length: {}\r\n\r\n{text}",
                    text.len()
                );
                let _ = out.write_all(h.as_bytes());
            }
            Some(Fault::DropAfter(n)) => {
                let _ = out.write_all(head.as_bytes());
                let _ = out.write_all(&part[..n.min(part.len())]);
                let _ = out.flush();
                let _ = out.shutdown(Shutdown::Both);
                return;
            }
            Some(Fault::Close) => {
                let _ = out.shutdown(Shutdown::Both);
                return;
            }
            Some(Fault::Stall(d)) => {
                std::thread::sleep(d);
                return;
            }
        }
    }
}
