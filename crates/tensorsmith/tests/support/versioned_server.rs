//! A small HTTP/1.1 server for tests, on 127.0.0.1, that serves one file (at any path) in two
//! versions, to test reads of a file replaced on the server during a read: version 1 until
//! `swap_after` requests have arrived (or `swap()` is called), version 2 after. Which
//! validators it sends (`ETag` strong or weak, `Last-Modified`), whether it answers Range
//! (206) and whether it honours preconditions (`If-Match`, `If-Unmodified-Since` → 412,
//! `If-Range` → 200 with the whole body) are set per server. It records the precondition
//! headers it receives. Shared by the library's and the CLI's remote-file tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The `ETag` the server sends: none, `"vN"` or `W/"vN"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tag {
    None,
    Strong,
    Weak,
}

#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub etag: Tag,
    pub last_modified: bool,
    /// Honour `If-Match`, `If-Unmodified-Since` (412) and `If-Range` (200, whole body).
    pub preconditions: bool,
    /// Answer Range with 206; else 200 with the whole body.
    pub ranges: bool,
    /// Version 2 ignores Range (200, whole body) even where version 1 answered it.
    pub v2_ignores_range: bool,
    /// Requests served from version 1 before version 2 is served; `None`: only `swap()`.
    pub swap_after: Option<usize>,
}

impl Default for Options {
    /// Strong ETag and Last-Modified, preconditions honoured, ranges, no swap.
    fn default() -> Self {
        Options {
            etag: Tag::Strong,
            last_modified: true,
            preconditions: true,
            ranges: true,
            v2_ignores_range: false,
            swap_after: None,
        }
    }
}

pub struct VersionedServer {
    base: String,
    pub requests: Arc<AtomicUsize>,
    swapped: Arc<AtomicBool>,
    /// Precondition headers received, names lower-cased, in arrival order (`if-match: "v1"`).
    pub preconditions: Arc<Mutex<Vec<String>>>,
}

/// The `Last-Modified` of version `n` (1 or 2).
pub fn last_modified(n: usize) -> String {
    format!("Mon, 0{n} Jan 2024 00:00:00 GMT")
}

/// The `ETag` of version `n` as the server sends it with `tag`.
pub fn etag(n: usize, tag: Tag) -> Option<String> {
    match tag {
        Tag::None => None,
        Tag::Strong => Some(format!("\"v{n}\"")),
        Tag::Weak => Some(format!("W/\"v{n}\"")),
    }
}

impl VersionedServer {
    pub fn start(v1: Vec<u8>, v2: Vec<u8>, opts: Options) -> VersionedServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let swapped = Arc::new(AtomicBool::new(false));
        let preconditions = Arc::new(Mutex::new(Vec::new()));
        let versions = Arc::new([v1, v2]);
        let (r, sw, pre) = (requests.clone(), swapped.clone(), preconditions.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (versions, r, sw, pre) = (versions.clone(), r.clone(), sw.clone(), pre.clone());
                std::thread::spawn(move || serve(stream, &versions, opts, &r, &sw, &pre));
            }
        });
        VersionedServer {
            base,
            requests,
            swapped,
            preconditions,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Serves version 2 from now on.
    pub fn swap(&self) {
        self.swapped.store(true, Ordering::SeqCst);
    }

    pub fn preconditions(&self) -> Vec<String> {
        self.preconditions.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: std::net::TcpStream,
    versions: &[Vec<u8>; 2],
    opts: Options,
    requests: &AtomicUsize,
    swapped: &AtomicBool,
    seen: &Mutex<Vec<String>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let (mut range, mut if_match, mut if_unmodified, mut if_range) = (None, None, None, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        let h = h.trim().to_owned();
        let Some((name, value)) = h.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
        match name.as_str() {
            "range" => {
                let v = value.strip_prefix("bytes=").unwrap();
                let (a, b) = v.split_once('-').unwrap();
                range = Some((a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()));
            }
            "if-match" => if_match = Some(value.clone()),
            "if-unmodified-since" => if_unmodified = Some(value.clone()),
            "if-range" => if_range = Some(value.clone()),
            _ => continue,
        }
        if name != "range" {
            seen.lock().unwrap().push(format!("{name}: {value}"));
        }
    }
    let index = requests.fetch_add(1, Ordering::SeqCst);
    let n = if swapped.load(Ordering::SeqCst) || opts.swap_after.is_some_and(|k| index >= k) {
        2
    } else {
        1
    };
    let body = &versions[n - 1];
    let tag = etag(n, opts.etag);
    let lm = opts.last_modified.then(|| last_modified(n));
    let mut validators = String::new();
    if let Some(t) = &tag {
        validators += &format!("ETag: {t}\r\n");
    }
    if let Some(lm) = &lm {
        validators += &format!("Last-Modified: {lm}\r\n");
    }
    if opts.preconditions {
        // Strong comparison for If-Match: a weak or absent tag never matches (RFC 9110).
        let strong = tag.as_ref().filter(|t| !t.starts_with("W/"));
        let failed = if_match.is_some_and(|v| strong != Some(&v))
            || if_unmodified.is_some_and(|v| lm.as_ref() != Some(&v));
        if failed {
            let h = format!("HTTP/1.1 412 Precondition Failed\r\n{validators}Content-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(h.as_bytes());
            return;
        }
        if if_range.is_some_and(|v| strong != Some(&v) && lm.as_ref() != Some(&v)) {
            range = None;
        }
    }
    let total = body.len() as u64;
    let (head, part) = match range {
        Some((a, b)) if opts.ranges && !(n == 2 && opts.v2_ignores_range) => {
            if a >= total {
                let h = format!("HTTP/1.1 416 Range Not Satisfiable\r\n{validators}Content-Range: bytes */{total}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = stream.write_all(h.as_bytes());
                return;
            }
            let end = b.min(total - 1);
            (
                format!("HTTP/1.1 206 Partial Content\r\n{validators}Content-Range: bytes {a}-{end}/{total}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", end + 1 - a),
                &body[a as usize..=end as usize],
            )
        }
        _ => (
            format!("HTTP/1.1 200 OK\r\n{validators}Content-Length: {total}\r\nConnection: close\r\n\r\n"),
            &body[..],
        ),
    };
    let _ = stream.write_all(head.as_bytes());
    for chunk in part.chunks(64 << 10) {
        if stream.write_all(chunk).is_err() {
            break;
        }
    }
}
