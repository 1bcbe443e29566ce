//! A small HTTP/1.1 server for tests, on 127.0.0.1: serves files from memory with Range
//! support (206, 416), or without it under `/norange/`, and 404 for anything else.
//! Shared by the library's and the CLI's remote-file tests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Serves `files` by path. Paths under `/norange/` ignore Range headers (200, whole body).
/// Counts requests and the body bytes sent.
pub struct Server {
    pub base: String,
    pub requests: Arc<AtomicUsize>,
    pub sent: Arc<AtomicUsize>,
}

impl Server {
    pub fn start(files: HashMap<String, Vec<u8>>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(AtomicUsize::new(0));
        let files = Arc::new(Mutex::new(files));
        let (r, s) = (requests.clone(), sent.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (files, r, s) = (files.clone(), r.clone(), s.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let mut range = None;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                            break;
                        }
                        if let Some(v) = h.to_ascii_lowercase().strip_prefix("range: bytes=") {
                            let (a, b) = v.trim().split_once('-').unwrap();
                            range = Some((a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()));
                        }
                    }
                    r.fetch_add(1, Ordering::SeqCst);
                    let key = path.trim_start_matches("/norange");
                    let body = files.lock().unwrap().get(key).cloned();
                    let Some(body) = body else {
                        let _ = stream.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        return;
                    };
                    let total = body.len() as u64;
                    let (head, part) = match range {
                        Some((a, b)) if !path.starts_with("/norange/") => {
                            if a >= total {
                                let h = format!("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{total}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                                let _ = stream.write_all(h.as_bytes());
                                return;
                            }
                            let end = b.min(total - 1);
                            (
                                format!("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{end}/{total}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", end + 1 - a),
                                body[a as usize..=end as usize].to_vec(),
                            )
                        }
                        _ => (
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {total}\r\nConnection: close\r\n\r\n"),
                            body,
                        ),
                    };
                    let _ = stream.write_all(head.as_bytes());
                    // Sent in pieces, so a client that stops reading stops the transfer.
                    for chunk in part.chunks(64 << 10) {
                        if stream.write_all(chunk).is_err() {
                            break;
                        }
                        s.fetch_add(chunk.len(), Ordering::SeqCst);
                    }
                });
            }
        });
        Server {
            base,
            requests,
            sent,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn take_requests(&self) -> usize {
        self.requests.swap(0, Ordering::SeqCst)
    }
}
