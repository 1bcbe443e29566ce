//! `hf://` reading against two local HTTP servers standing in for the Hub: the "endpoint"
//! (`HF_ENDPOINT=http://127.0.0.1:P`) answers `/{repo}/resolve/{rev}/{path}` with a 302 to
//! the "CDN" on another host name (`localhost:Q`), which serves the bytes with ETag, Range and
//! `X-Linked-Size`. Both record the headers they get: the token reaches the endpoint, never
//! the CDN. Revisions, datasets, a missing file (404), a gated repo (401) and a write to
//! `hf://` are checked.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

/// One request as a server saw it: its path and its headers (names lower-cased).
type Seen = Arc<Mutex<Vec<(String, HashMap<String, String>)>>>;

type Handler = Box<dyn Fn(&str, &HashMap<String, String>) -> (String, Vec<u8>) + Send + Sync>;

/// A server on `host` (a name for 127.0.0.1) answering every request with `handler`'s status
/// line plus headers, and body; each connection serves one request.
fn serve(host: &str, handler: Handler) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{host}:{}", listener.local_addr().unwrap().port());
    let seen: Seen = Arc::default();
    let s = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some((path, headers)) = read_request(&stream) else {
                continue;
            };
            s.lock().unwrap().push((path.clone(), headers.clone()));
            let (head, body) = handler(&path, &headers);
            let _ = write!(
                stream,
                "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
        }
    });
    (base, seen)
}

fn read_request(stream: &TcpStream) -> Option<(String, HashMap<String, String>)> {
    let mut r = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    Some((path, headers))
}

/// A CDN answer for `bytes`: 206 for a Range, 200 otherwise, with an ETag.
fn ranged(bytes: &[u8], headers: &HashMap<String, String>) -> (String, Vec<u8>) {
    let etag = format!("\"{:x}\"", bytes.len() * 7919);
    let Some((a, b)) = headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
    else {
        return (format!("HTTP/1.1 200 OK\r\nETag: {etag}"), bytes.to_vec());
    };
    let a: usize = a.parse().unwrap();
    let b: usize = b.parse::<usize>().unwrap().min(bytes.len() - 1);
    (
        format!(
            "HTTP/1.1 206 Partial Content\r\nETag: {etag}\r\nContent-Range: bytes {a}-{b}/{}",
            bytes.len()
        ),
        bytes[a..=b].to_vec(),
    )
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tensorsmith(endpoint: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tensorsmith"));
    for (k, _) in std::env::vars() {
        if k.starts_with("HF_") || k.starts_with("AWS_") {
            c.env_remove(k);
        }
    }
    c.env("HF_ENDPOINT", endpoint).env("HOME", "/nonexistent");
    if let Some(t) = token {
        c.env("HF_TOKEN", t);
    }
    c.args(args).output().unwrap()
}

fn stdout_ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn hash_of(o: &Output) -> String {
    stdout_ok(o).split_whitespace().next().unwrap().to_owned()
}

const TOKEN: &str = "hf_testTokenNeverForTheCdn";

#[test]
fn hf_urls_read_through_the_hub_and_its_cdn() {
    let st = std::fs::read(repo_root().join("tests/data/safetensors/dtype_bfloat16.safetensors"))
        .unwrap();
    let gguf = std::fs::read(repo_root().join("tests/data/gguf/every_type.gguf")).unwrap();
    let blobs: HashMap<&str, Vec<u8>> = HashMap::from([("/blobs/st", st), ("/blobs/gguf", gguf)]);
    let blobs = Arc::new(blobs);
    let b = blobs.clone();
    let (cdn, cdn_seen) = serve(
        "localhost",
        Box::new(
            move |path, h| match b.get(path.split('?').next().unwrap()) {
                Some(bytes) => ranged(bytes, h),
                None => ("HTTP/1.1 404 Not Found".into(), Vec::new()),
            },
        ),
    );
    let sizes: HashMap<&str, usize> = blobs.iter().map(|(k, v)| (*k, v.len())).collect();
    let redirect = move |blob: &str| {
        (
            format!(
                "HTTP/1.1 302 Found\r\nLocation: {cdn}{blob}?X-Amz-Signature=cdnsig\r\nX-Linked-Size: {}",
                sizes[blob]
            ),
            Vec::new(),
        )
    };
    let (hub, hub_seen) = serve(
        "127.0.0.1",
        Box::new(move |path, _| match path {
            "/org/model/resolve/main/m.safetensors" | "/org/model/resolve/v1.0/m.safetensors" => {
                redirect("/blobs/st")
            }
            "/datasets/org/ds/resolve/refs%2Fpr%2F1/sub%20dir/m.gguf" => redirect("/blobs/gguf"),
            p if p.starts_with("/org/gated/") => (
                "HTTP/1.1 401 Unauthorized\r\nX-Error-Code: GatedRepo".into(),
                Vec::new(),
            ),
            _ => (
                "HTTP/1.1 404 Not Found\r\nX-Error-Code: EntryNotFound".into(),
                Vec::new(),
            ),
        }),
    );
    let local = |p: &str| {
        hash_of(&tensorsmith(
            &hub,
            None,
            &["hash", repo_root().join(p).to_str().unwrap()],
        ))
    };
    let st_hash = local("tests/data/safetensors/dtype_bfloat16.safetensors");
    let gguf_hash = local("tests/data/gguf/every_type.gguf");

    for url in [
        "hf://org/model/m.safetensors",
        "hf://org/model@v1.0/m.safetensors",
    ] {
        assert_eq!(
            hash_of(&tensorsmith(&hub, Some(TOKEN), &["hash", url])),
            st_hash,
            "{url}"
        );
    }
    for url in [
        "hf://datasets/org/ds@refs/pr/1/sub dir/m.gguf",
        "hf://datasets/org/ds@refs%2Fpr%2F1/sub dir/m.gguf",
    ] {
        assert_eq!(
            hash_of(&tensorsmith(&hub, Some(TOKEN), &["hash", url])),
            gguf_hash,
            "{url}"
        );
    }
    let hub_seen = hub_seen.lock().unwrap().clone();
    let cdn_seen = cdn_seen.lock().unwrap().clone();
    assert!(!hub_seen.is_empty() && !cdn_seen.is_empty());
    for (path, h) in &hub_seen {
        assert_eq!(
            h.get("authorization").map(String::as_str),
            Some(&*format!("Bearer {TOKEN}")),
            "{path}"
        );
    }
    for (path, h) in &cdn_seen {
        assert!(
            !h.contains_key("authorization"),
            "the token reached the CDN: {path}"
        );
        assert!(h.contains_key("range"), "{path}");
    }

    // Failures, named by the hf:// URL, without the token.
    let o = tensorsmith(
        &hub,
        Some(TOKEN),
        &["inspect", "hf://org/model/missing.safetensors"],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        e.contains("hf://org/model/missing.safetensors: not found: file 'missing.safetensors' in repo org/model at revision 'main'"),
        "{e}"
    );
    let o = tensorsmith(&hub, None, &["inspect", "hf://org/gated/m.safetensors"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("access denied: repo org/gated is gated") && e.contains("no token was sent"),
        "{e}"
    );
    let o = tensorsmith(
        &hub,
        Some(TOKEN),
        &["inspect", "hf://org/gated/m.safetensors"],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("repo org/gated is gated") && !e.contains(TOKEN),
        "{e}"
    );

    let src = repo_root().join("tests/data/safetensors/dtype_bfloat16.safetensors");
    let o = tensorsmith(
        &hub,
        Some(TOKEN),
        &[
            "convert",
            src.to_str().unwrap(),
            "hf://org/model/out.safetensors",
        ],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(e.contains("hf:// is read only"), "{e}");
    assert!(!Path::new("hf:").exists());
}

/// A safetensors file of one F32 tensor of `n` values.
fn big_safetensors(n: usize) -> Vec<u8> {
    let header = format!(
        r#"{{"w":{{"dtype":"F32","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
        n * 4
    );
    let mut header = header.into_bytes();
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend((0..n as u32).flat_map(|i| (i as f32 * 0.5).to_le_bytes()));
    out
}

#[test]
fn ranges_go_straight_to_the_cdn_and_an_expired_cdn_url_is_resolved_again() {
    let big = Arc::new(big_safetensors(3 << 20)); // 12 MiB: three 5 MiB parts and more
    let dir = tempfile::tempdir().unwrap();
    let b = big.clone();
    let used_once = Arc::new(Mutex::new(false));
    let once = used_once.clone();
    // The CDN serves `sig=once` for one request only, as an expired signature would.
    let (cdn, cdn_seen) = serve(
        "localhost",
        Box::new(move |path, h| {
            if path.ends_with("sig=once") && std::mem::replace(&mut *once.lock().unwrap(), true) {
                return ("HTTP/1.1 403 Forbidden".into(), Vec::new());
            }
            ranged(&b, h)
        }),
    );
    let resolves = Arc::new(Mutex::new(0));
    let r = resolves.clone();
    let (hub, hub_seen) = serve(
        "127.0.0.1",
        Box::new(move |path, _| {
            let sig = match path {
                "/org/big/resolve/main/m.safetensors" => "fresh",
                "/org/big/resolve/main/expiring.safetensors" => {
                    let mut n = r.lock().unwrap();
                    *n += 1;
                    if *n == 1 {
                        "once"
                    } else {
                        "fresh"
                    }
                }
                _ => return ("HTTP/1.1 404 Not Found".into(), Vec::new()),
            };
            (
                format!("HTTP/1.1 302 Found\r\nLocation: {cdn}/blobs/big?sig={sig}"),
                Vec::new(),
            )
        }),
    );
    // A copy reads every byte (the hash reads only headers).
    let got = |url: &str| {
        let out = dir.path().join("out.safetensors");
        let out = out.to_str().unwrap();
        let args = ["convert", url, out, "--storage-option", "part_size=5MiB"];
        stdout_ok(&tensorsmith(&hub, Some(TOKEN), &args));
        std::fs::read(out).unwrap() == *big
    };
    assert!(got("hf://org/big/m.safetensors"));
    let hub_n = hub_seen.lock().unwrap().len();
    let cdn_n = cdn_seen.lock().unwrap().len();
    assert_eq!(hub_n, 1, "one resolve, then the CDN directly");
    assert!(cdn_n >= 3, "{cdn_n} CDN requests");
    assert!(got("hf://org/big/expiring.safetensors"));
    // Resolved again once the CDN URL expired: by each of the (at most 3) parallel parts
    // that found it expired before a new one was in place, never once per range after.
    let n = *resolves.lock().unwrap();
    assert!((2..=4).contains(&n), "{n} resolves");
    for (path, h) in cdn_seen.lock().unwrap().iter() {
        assert!(
            !h.contains_key("authorization"),
            "the token reached the CDN: {path}"
        );
    }
}
