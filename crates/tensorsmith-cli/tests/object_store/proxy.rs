//! A TCP forwarder on 127.0.0.1 in front of a test server: counts the bytes the server sends
//! back, keeps what clients send (request lines, to check which credentials signed them), and
//! can run a hook before forwarding the Nth request (to replace an object mid-read).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

type Hook = Box<dyn Fn() + Send + Sync>;

pub struct Proxy {
    pub endpoint: String,
    /// Bytes sent back by the server, headers included.
    pub down: Arc<AtomicUsize>,
    /// Requests seen (counted by their request lines).
    pub requests: Arc<AtomicUsize>,
    sent: Arc<Mutex<Vec<u8>>>,
}

impl Proxy {
    pub fn start(upstream: &str) -> Proxy {
        Proxy::start_with_hook(upstream, 0, Box::new(|| ()))
    }

    /// A forwarder that runs `hook` before forwarding request number `at` (1-based).
    pub fn start_with_hook(upstream: &str, at: usize, hook: Hook) -> Proxy {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let down = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let hook = Arc::new(hook);
        let (d, r, s) = (down.clone(), requests.clone(), sent.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let (d, r, s, hook) = (d.clone(), r.clone(), s.clone(), hook.clone());
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n) = c_in.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let chunk = &buf[..n];
                        for _ in 0..count_requests(chunk) {
                            if r.fetch_add(1, Ordering::SeqCst) + 1 == at {
                                hook();
                            }
                        }
                        s.lock().unwrap().extend_from_slice(chunk);
                        if s_out.write_all(chunk).is_err() {
                            break;
                        }
                    }
                    let _ = s_out.shutdown(Shutdown::Write);
                });
                let (mut s_in, mut c_out) = (server, client);
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n) = s_in.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        d.fetch_add(n, Ordering::SeqCst);
                        if c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(Shutdown::Write);
                });
            }
        });
        Proxy {
            endpoint,
            down,
            requests,
            sent,
        }
    }

    /// Everything clients sent, as text.
    pub fn sent_text(&self) -> String {
        String::from_utf8_lossy(&self.sent.lock().unwrap()).into_owned()
    }
}

fn count_requests(chunk: &[u8]) -> usize {
    chunk
        .windows(4)
        .filter(|w| *w == b"GET " || *w == b"PUT " || *w == b"HEAD")
        .count()
}
