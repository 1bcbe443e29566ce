//! `tensorsmith::bytes::ObjectClient` on S3 against a real S3-compatible server (moto in server mode,
//! from the repository's `.venv`; required, not skipped): every call, conditional writes
//! answered 412 as S3 answers them, multipart uploads streamed from a file, listings across
//! pages, stale uploads listed and aborted, retries through a front that throttles (503
//! `SlowDown`) or drops connections, and errors that name the URL and never a secret.

#[path = "object_store/moto.rs"]
mod moto;

use moto::{Moto, KEY, SECRET};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tensorsmith::bytes::{ObjectClient, PutCondition, StorageOptions};
use tensorsmith::ErrorKind;

fn options(endpoint: &str, extra: &[(&str, &str)]) -> StorageOptions {
    let mut o = StorageOptions::new();
    o.set("key", KEY).unwrap();
    o.set("secret", SECRET).unwrap();
    o.set("endpoint_url", endpoint).unwrap();
    for (k, v) in extra {
        o.set(k, v).unwrap();
    }
    o
}

fn client(endpoint: &str, url: &str) -> (ObjectClient, String) {
    ObjectClient::for_url(url, &options(endpoint, &[])).unwrap()
}

/// The ETag of `key` now.
fn etag(c: &ObjectClient, key: &str) -> String {
    c.get_tagged(key).unwrap().unwrap().1
}

#[test]
fn every_call_against_moto() {
    let m = Moto::start();
    m.bucket("bkt");
    let o = options(&m.endpoint, &[("part_size", "5MiB")]);
    let (c, key) = ObjectClient::for_url("s3a://bkt/dir/a&b <1>.json", &o).unwrap();
    assert_eq!(key, "dir/a&b <1>.json");
    assert_eq!(c.key_url(&key), "s3://bkt/dir/a&b <1>.json");

    assert_eq!(c.get(&key).unwrap(), None);
    c.put(&key, b"one", PutCondition::IfNoneMatch).unwrap();
    let (body, e1) = c.get_tagged(&key).unwrap().unwrap();
    assert_eq!(body, b"one");

    // Create-only refused where the key exists; If-Match refused on a stale ETag.
    let e = c.put(&key, b"two", PutCondition::IfNoneMatch).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PreconditionFailed(_)), "{e}");
    assert!(e.to_string().contains("s3://bkt/dir/a&b <1>.json"), "{e}");
    c.put(&key, b"two", PutCondition::IfMatch(e1.clone()))
        .unwrap();
    let e2 = etag(&c, &key);
    let e = c
        .put(&key, b"three", PutCondition::IfMatch(e1.clone()))
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PreconditionFailed(_)), "{e}");
    assert_eq!(c.get(&key).unwrap().unwrap(), b"two");
    // If-Match where there is no object: the version read is gone, refused as changed.
    let e = c
        .put("none", b"x", PutCondition::IfMatch(e1.clone()))
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PreconditionFailed(_)), "{e}");
    let meta = c.list("dir/").unwrap();
    assert_eq!((meta[0].size, meta[0].etag.as_str()), (3, e2.as_str()));

    // A listing over pages (moto pages at 1000 keys) with keys that need escaping.
    let many: Vec<String> = (0..1005).map(|i| format!("many/{i:05}&x")).collect();
    m.py(&format!(
        "for k in {many:?}: s3.put_object(Bucket='bkt', Key=k, Body=b'xy')"
    ));
    let listed = c.list("many/").unwrap();
    assert_eq!(
        listed.iter().map(|o| o.key.clone()).collect::<Vec<_>>(),
        many
    );
    assert!(listed
        .iter()
        .all(|o| o.size == 2 && o.etag.starts_with('"') && !o.last_modified.is_empty()));
    assert_eq!(c.list("nothing/").unwrap(), vec![]);

    c.delete(&key).unwrap();
    c.delete(&key).unwrap();
    assert_eq!(c.get(&key).unwrap(), None);

    // Stale uploads (a writer killed after its first part): listed, aborted, gone; an
    // upload aborted twice is no error.
    let mut u = c.upload("up/x", PutCondition::Always).unwrap();
    u.write_all(&vec![7u8; (5 << 20) + 1]).unwrap();
    std::mem::forget(u);
    let ups = c.list_uploads("up/").unwrap();
    assert_eq!(ups.len(), 1);
    assert_eq!(ups[0].key.as_str(), "up/x");
    let id = ups[0].upload_id.clone();
    assert!(!ups[0].initiated.is_empty());
    c.abort_upload("up/x", &id).unwrap();
    c.abort_upload("up/x", &id).unwrap();
    assert!(c.list_uploads("up/").unwrap().is_empty());
    assert_eq!(c.get("up/x").unwrap(), None);
}

#[test]
fn files_stream_up_in_one_put_or_in_parts() {
    let m = Moto::start();
    m.bucket("bkt");
    let d = tempfile::tempdir().unwrap();
    let o = options(
        &m.endpoint,
        &[("part_size", "5MiB"), ("max_concurrency", "3")],
    );
    let (c, _) = ObjectClient::for_url("s3://bkt/x", &o).unwrap();
    for (name, len) in [("small", 1000usize), ("big", (12 << 20) + 12345)] {
        let path = d.path().join(name);
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        c.put_file(name, &f, PutCondition::Always).unwrap();
        let (got, etag) = c.get_tagged(name).unwrap().unwrap();
        assert!(got == data, "{name}");
        // A multipart ETag says how many parts: "<md5>-3".
        assert_eq!(etag.ends_with("-3\""), name == "big", "{etag}");
        // Created only if absent, whatever the size: refused, the first left whole.
        let f = std::fs::File::open(&path).unwrap();
        let e = c.put_file(name, &f, PutCondition::IfNoneMatch).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::PreconditionFailed(_)), "{e}");
        assert!(c.get(name).unwrap().unwrap() == data, "{name}");
        let f = std::fs::File::open(&path).unwrap();
        let fresh = format!("{name}-new");
        c.put_file(&fresh, &f, PutCondition::IfNoneMatch).unwrap();
        assert!(c.get(&fresh).unwrap().unwrap() == data, "{name}");
    }
    // The refused uploads left neither an upload nor a staging object behind.
    assert!(c.list_uploads("").unwrap().is_empty());
    let names: Vec<String> = c.list("").unwrap().into_iter().map(|o| o.key).collect();
    assert_eq!(names, ["big", "big-new", "small", "small-new"]);
}

/// A front for `upstream` that fails the first `fail` connections: answers 503 `SlowDown`, or
/// (`drop`) closes the connection without an answer; later ones are forwarded.
struct Flaky {
    endpoint: String,
    seen: Arc<AtomicUsize>,
}

impl Flaky {
    fn start(upstream: &str, fail: usize, drop: bool) -> Flaky {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let upstream = upstream.clone();
                std::thread::spawn(move || {
                    if n >= fail {
                        let Ok(up) = TcpStream::connect(&upstream) else {
                            return;
                        };
                        let (mut a, mut b) = (conn.try_clone().unwrap(), up.try_clone().unwrap());
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut a, &mut b);
                            let _ = b.shutdown(std::net::Shutdown::Write);
                        });
                        let (mut up, mut conn) = (up, conn);
                        let _ = std::io::copy(&mut up, &mut conn);
                        return;
                    }
                    // Read the request (head and a body of Content-Length), then fail it.
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 65536];
                    let mut need = None;
                    while need.is_none_or(|n| buf.len() < n) {
                        let Ok(k) = conn.read(&mut chunk) else { return };
                        if k == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..k]);
                        if need.is_none() {
                            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                                let len = head
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .and_then(|v| v.trim().parse::<usize>().ok())
                                    .unwrap_or(0);
                                need = Some(end + 4 + len);
                            }
                        }
                    }
                    if !drop {
                        let body = "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>";
                        let _ = write!(
                            conn,
                            "HTTP/1.1 503 Slow Down\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                });
            }
        });
        Flaky { endpoint, seen }
    }
}

#[test]
fn retries_throttling_and_dropped_connections_then_fails_clearly() {
    let m = Moto::start();
    m.bucket("bkt");
    for drop in [false, true] {
        let f = Flaky::start(&m.endpoint, 3, drop);
        let o = options(&f.endpoint, &[("max_attempts", "4")]);
        let (c, key) = ObjectClient::for_url("s3://bkt/k", &o).unwrap();
        c.put(&key, b"after three failures", PutCondition::Always)
            .unwrap();
        assert_eq!(f.seen.load(Ordering::SeqCst), 4);
        assert_eq!(c.get(&key).unwrap().unwrap(), b"after three failures");

        let f = Flaky::start(&m.endpoint, 100, drop);
        let o = options(&f.endpoint, &[("max_attempts", "2")]);
        let (c, key) = ObjectClient::for_url("s3://bkt/k", &o).unwrap();
        let e = c.get(&key).unwrap_err().to_string();
        assert_eq!(f.seen.load(Ordering::SeqCst), 2, "{e}");
        assert!(e.starts_with("s3://bkt/k: "), "{e}");
        assert!(!e.contains(SECRET) && !e.contains("Signature"), "{e}");
        if !drop {
            assert!(e.contains("503") && e.contains("SlowDown"), "{e}");
        }
    }
}

#[test]
fn errors_name_the_url_and_the_cause() {
    let m = Moto::start();
    m.bucket("bkt");
    let (c, key) = client(&m.endpoint, "s3://nobucket/k.json");
    for e in [
        c.put(&key, b"x", PutCondition::Always).unwrap_err(),
        c.get(&key).unwrap_err(),
        c.list("").unwrap_err(),
    ] {
        assert!(matches!(e.kind(), ErrorKind::NoSuchBucket(_)), "{e}");
        assert!(e.to_string().starts_with("s3://nobucket/"), "{e}");
    }
    let port = moto::free_port();
    let o = options(
        &format!("http://127.0.0.1:{port}"),
        &[("max_attempts", "2")],
    );
    let (c, key) = ObjectClient::for_url("s3://bkt/k.json", &o).unwrap();
    let e = c.put(&key, b"x", PutCondition::Always).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Unreachable(_)), "{e}");
    let s = e.to_string();
    assert!(
        s.contains("s3://bkt/k.json") && s.contains(&format!("127.0.0.1:{port}")),
        "{s}"
    );
    assert!(!s.contains(SECRET), "{s}");
}

#[test]
fn streamed_uploads_appear_only_when_committed() {
    use std::io::Write as _;
    use tensorsmith::bytes::ObjectUpload as _;
    let m = Moto::start();
    m.bucket("bkt");
    let o = options(
        &m.endpoint,
        &[("part_size", "5MiB"), ("max_concurrency", "2")],
    );
    let (c, _) = ObjectClient::for_url("s3://bkt/x", &o).unwrap();
    let data: Vec<u8> = (0..(12 << 20) + 7).map(|i| (i % 253) as u8).collect();

    // Dropped without a commit, after two parts went up: aborted, nothing left.
    let mut u = c.upload("s.bin", PutCondition::IfNoneMatch).unwrap();
    u.write_all(&data).unwrap();
    assert_eq!(c.list_uploads("").unwrap().len(), 1);
    drop(u);
    assert!(c.list_uploads("").unwrap().is_empty());
    assert_eq!(c.get("s.bin").unwrap(), None);

    // Committed: the whole object, in three parts; the part being filled can be cut back.
    let mut u = c.upload("s.bin", PutCondition::IfNoneMatch).unwrap();
    u.write_all(&data).unwrap();
    u.write_all(b"cut back").unwrap();
    u.rewind_to(data.len() as u64).unwrap();
    assert!(
        u.rewind_to(1 << 20).is_err(),
        "a part already sent cannot be cut back"
    );
    u.commit().unwrap();
    let (got, etag) = c.get_tagged("s.bin").unwrap().unwrap();
    assert!(got == data);
    assert!(
        etag.ends_with("-1\""),
        "copied if absent, in one part: {etag}"
    );

    // Create-only, where the object exists: refused at completion, and aborted.
    let mut u = c.upload("s.bin", PutCondition::IfNoneMatch).unwrap();
    u.write_all(&data).unwrap();
    let e = u.commit().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PreconditionFailed(_)), "{e}");
    assert!(c.list_uploads("").unwrap().is_empty());
    // Below one part: one PutObject, conditional too.
    let u = c.upload("s.bin", PutCondition::IfNoneMatch).unwrap();
    assert!(matches!(
        u.commit().unwrap_err().kind(),
        ErrorKind::PreconditionFailed(_)
    ));
    let mut u = c.upload("small.bin", PutCondition::IfNoneMatch).unwrap();
    u.write_all(b"small").unwrap();
    u.commit().unwrap();
    assert_eq!(c.get("small.bin").unwrap().unwrap(), b"small");
}
