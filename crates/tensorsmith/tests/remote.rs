//! Remote files over HTTP range requests, against a small HTTP/1.1 server started by the
//! tests on 127.0.0.1: headers are read with one or two requests, not the whole file; servers
//! that ignore Range still work; HTTP and format errors name the URL.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tensorsmith::dtype::DType;
use tensorsmith::gguf::{self, GgufOptions};
use tensorsmith::safetensors::{self, ReadOptions, Writer};
use tensorsmith::ErrorKind;

/// Serves `files` by path. Paths under `/norange/` ignore Range headers (200, whole body).
/// Counts requests and the body bytes sent.
struct Server {
    base: String,
    requests: Arc<AtomicUsize>,
    sent: Arc<AtomicUsize>,
}

impl Server {
    fn start(files: HashMap<String, Vec<u8>>) -> Server {
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

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn take_requests(&self) -> usize {
        self.requests.swap(0, Ordering::SeqCst)
    }
}

fn safetensors_file(tensors: usize, bytes_each: usize) -> Vec<u8> {
    let mut w = Writer::new();
    for i in 0..tensors {
        w.add(
            &format!("model.layers.{i}.weight"),
            DType::U8,
            &[bytes_each as u64],
            vec![i as u8; bytes_each],
        )
        .unwrap();
    }
    w.to_bytes().unwrap()
}

fn gguf_vector(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/gguf")
            .join(name),
    )
    .unwrap()
}

#[test]
fn safetensors_headers_take_one_request_or_two() {
    let small = safetensors_file(10, 1 << 20); // small header, 10 MiB of data
    let big = safetensors_file(3000, 16); // header over 64 KiB
    let server = Server::start(HashMap::from([
        ("/small.safetensors".to_string(), small.clone()),
        ("/big.safetensors".to_string(), big.clone()),
    ]));
    let opts = ReadOptions::default();

    let (index, remote) =
        safetensors::open_remote(&server.url("/small.safetensors"), &opts).unwrap();
    assert_eq!(index, safetensors::parse_bytes(&small, &opts).unwrap());
    assert_eq!((remote.requests(), server.take_requests()), (1, 1));
    assert_eq!(remote.len(), small.len() as u64);
    assert!(
        server.sent.swap(0, Ordering::SeqCst) <= 64 << 10,
        "more than the first read sent"
    );

    let (index, remote) = safetensors::open_remote(&server.url("/big.safetensors"), &opts).unwrap();
    assert_eq!(index, safetensors::parse_bytes(&big, &opts).unwrap());
    assert_eq!((remote.requests(), server.take_requests()), (2, 2));
    // Tensor bytes on demand.
    let t = index.get("model.layers.7.weight").unwrap();
    assert_eq!(remote.read(t.data_range()).unwrap(), vec![7u8; 16]);
}

#[test]
fn gguf_headers_are_read_by_growing_ranges() {
    let vocab = gguf_vector("vocab_150k.gguf");
    let small = gguf_vector("every_type.gguf");
    let server = Server::start(HashMap::from([
        ("/vocab.gguf".to_string(), vocab.clone()),
        ("/small.gguf".to_string(), small.clone()),
    ]));
    let opts = GgufOptions::default();
    let (h, remote) = gguf::open_remote(&server.url("/small.gguf"), &opts).unwrap();
    assert_eq!(h, gguf::parse_bytes(&small, &opts).unwrap());
    assert_eq!(remote.requests(), 1);

    let (h, remote) = gguf::open_remote(&server.url("/vocab.gguf"), &opts).unwrap();
    assert_eq!(h, gguf::parse_bytes(&vocab, &opts).unwrap());
    // 3.3 MB of header: 1 MiB, then up to 2 MiB, then the rest: a handful of requests.
    assert!(
        (2..=4).contains(&remote.requests()),
        "{} requests",
        remote.requests()
    );
}

#[test]
fn servers_that_ignore_range_send_only_what_is_read() {
    let file = safetensors_file(4, 8 << 20); // 32 MiB
    let server = Server::start(HashMap::from([(
        "/m.safetensors".to_string(),
        file.clone(),
    )]));
    let (index, _) = safetensors::open_remote(
        &server.url("/norange/m.safetensors"),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(index.tensors.len(), 4);
    // The client hung up after the header; the server got at most a few socket buffers out.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let sent = server.sent.load(Ordering::SeqCst);
    assert!(sent < 16 << 20, "{sent} bytes sent for a header");
}

#[test]
fn http_and_format_errors_name_the_url() {
    let mut truncated = safetensors_file(2, 100);
    truncated.truncate(truncated.len() - 1);
    let server = Server::start(HashMap::from([
        ("/cut.safetensors".to_string(), truncated),
        ("/empty.safetensors".to_string(), vec![]),
        (
            "/cut.gguf".to_string(),
            gguf_vector("every_type.gguf")[..100].to_vec(),
        ),
    ]));
    let opts = ReadOptions::default();

    let url = server.url("/missing.safetensors");
    let e = safetensors::open_remote(&url, &opts).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Http(m) if m.contains("404")),
        "{e}"
    );
    assert!(e.to_string().contains(&url), "{e}");

    let url = server.url("/cut.safetensors");
    let e = safetensors::open_remote(&url, &opts).unwrap_err();
    assert!(e.is_invalid_input() && e.to_string().contains(&url), "{e}");

    let url = server.url("/empty.safetensors");
    let e = safetensors::open_remote(&url, &opts).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::FileTooSmall { len: 0 }),
        "{e}"
    );

    let url = server.url("/cut.gguf");
    let e = gguf::open_remote(&url, &GgufOptions::default()).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Gguf(_)) && e.to_string().contains(&url),
        "{e}"
    );

    let e = safetensors::open_remote("http://127.0.0.1:1/x.safetensors", &opts).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Http(_)), "{e}");
}
