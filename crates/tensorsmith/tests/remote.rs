//! Remote files over HTTP range requests, against a small HTTP/1.1 server started by the
//! tests on 127.0.0.1: headers are read with one or two requests, not the whole file; servers
//! that ignore Range still work; HTTP and format errors name the URL. A file replaced on the
//! server during a read (`support/versioned_server.rs`) is an error, never a mix of versions.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use support::http_server::Server;
use support::versioned_server::{self as versioned, Options, Tag, VersionedServer};
use tensorsmith::bytes::{HttpFile, ReadAt};
use tensorsmith::dtype::DType;
use tensorsmith::format::FileFormat;
use tensorsmith::gguf::{self};
use tensorsmith::index::TensorIndex;
use tensorsmith::safetensors::{self, Writer};
use tensorsmith::ErrorKind;
use tensorsmith::OpenOptions;

/// A remote safetensors header through the byte layer: the first 64 KiB fetched at open.
fn safetensors_remote(
    url: &str,
    opts: &OpenOptions,
) -> tensorsmith::Result<(TensorIndex, HttpFile)> {
    let f = HttpFile::open(url, 64 << 10)?;
    let index = safetensors::Safetensors
        .read_index(&f, opts)
        .map_err(|e| e.in_file(std::path::Path::new(url)))?;
    Ok((index, f))
}

/// A remote GGUF header through the byte layer: the first MiB fetched at open.
fn gguf_remote(url: &str, opts: &OpenOptions) -> tensorsmith::Result<(gguf::GgufHeader, HttpFile)> {
    let f = HttpFile::open(url, 1 << 20)?;
    let h = gguf::read_header(&f, opts).map_err(|e| e.in_file(std::path::Path::new(url)))?;
    Ok((h, f))
}

fn safetensors_file(tensors: usize, bytes_each: usize) -> Vec<u8> {
    safetensors_filled(tensors, bytes_each, 0)
}

/// Tensor `i` filled with `i + fill`: files of one layout whose values differ by `fill`.
fn safetensors_filled(tensors: usize, bytes_each: usize, fill: u8) -> Vec<u8> {
    let mut w = Writer::new();
    for i in 0..tensors {
        w.add(
            &format!("model.layers.{i}.weight"),
            DType::U8,
            &[bytes_each as u64],
            vec![(i as u8).wrapping_add(fill); bytes_each],
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
    let opts = OpenOptions::new();

    let (index, remote) = safetensors_remote(&server.url("/small.safetensors"), &opts).unwrap();
    assert_eq!(index, safetensors::parse_bytes(&small, &opts).unwrap());
    assert_eq!((remote.requests(), server.take_requests()), (1, 1));
    assert_eq!(remote.len(), small.len() as u64);
    assert!(
        server.sent.swap(0, Ordering::SeqCst) <= 64 << 10,
        "more than the first read sent"
    );

    let (index, remote) = safetensors_remote(&server.url("/big.safetensors"), &opts).unwrap();
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
    let opts = OpenOptions::new();
    let (h, remote) = gguf_remote(&server.url("/small.gguf"), &opts).unwrap();
    assert_eq!(h, gguf::parse_bytes(&small, &opts).unwrap());
    assert_eq!(remote.requests(), 1);

    let (h, remote) = gguf_remote(&server.url("/vocab.gguf"), &opts).unwrap();
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
    let (index, _) =
        safetensors_remote(&server.url("/norange/m.safetensors"), &OpenOptions::new()).unwrap();
    assert_eq!(index.tensors.len(), 4);
    // The client hung up after the header; the server got at most a few socket buffers out.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let sent = server.sent.load(Ordering::SeqCst);
    assert!(sent < 16 << 20, "{sent} bytes sent for a header");
}

#[test]
fn a_server_that_ignores_range_sends_the_body_once_for_every_read() {
    let file = safetensors_file(16, 2 << 20); // 32 MiB in 16 tensors
    let server = Server::start(HashMap::from([(
        "/m.safetensors".to_string(),
        file.clone(),
    )]));
    let model =
        tensorsmith::open(&server.url("/norange/m.safetensors"), &OpenOptions::new()).unwrap();
    // Every tensor, in parallel and out of order, as `hash --content` reads them.
    use rayon::prelude::*;
    let names: Vec<&str> = model.index.tensors.iter().rev().map(|t| &*t.name).collect();
    let got: Vec<Vec<u8>> = names
        .par_iter()
        .map(|n| {
            let t = model.index.get(n).unwrap();
            model.tensor_bytes(t).unwrap().into_owned()
        })
        .collect();
    let local = safetensors::Safetensors
        .read_index(&file.as_slice(), &OpenOptions::new())
        .unwrap();
    for (n, bytes) in names.iter().zip(&got) {
        let t = local.get(n).unwrap();
        let r = &t.parts[0].range;
        assert_eq!(&bytes[..], &file[r.start as usize..r.end as usize], "{n}");
    }
    // The open (its first bytes, then hung up), then the whole body once.
    assert_eq!(server.requests.load(Ordering::SeqCst), 2);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let sent = server.sent.load(Ordering::SeqCst);
    assert!(
        sent < file.len() + (16 << 20),
        "{sent} bytes sent for a {} file",
        file.len()
    );
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
    let opts = OpenOptions::new();

    let url = server.url("/missing.safetensors");
    let e = safetensors_remote(&url, &opts).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Http(m) if m.contains("404")),
        "{e}"
    );
    assert!(e.to_string().contains(&url), "{e}");

    let url = server.url("/cut.safetensors");
    let e = safetensors_remote(&url, &opts).unwrap_err();
    assert!(e.is_invalid_input() && e.to_string().contains(&url), "{e}");

    let url = server.url("/empty.safetensors");
    let e = safetensors_remote(&url, &opts).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::FileTooSmall { len: 0 }),
        "{e}"
    );

    let url = server.url("/cut.gguf");
    let e = gguf_remote(&url, &OpenOptions::new()).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Gguf(_)) && e.to_string().contains(&url),
        "{e}"
    );

    let e = safetensors_remote("http://127.0.0.1:1/x.safetensors", &opts).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Http(_)), "{e}");
}

// --- a file replaced on the server during a read

/// Two versions of one layout, 16 tensors of 1 MiB: past the first read at open, so every
/// tensor costs a range request.
fn two_versions() -> (Vec<u8>, Vec<u8>) {
    (
        safetensors_filled(16, 1 << 20, 0),
        safetensors_filled(16, 1 << 20, 100),
    )
}

/// Every tensor's bytes, one after another.
fn read_every_tensor(url: &str) -> tensorsmith::Result<Vec<Vec<u8>>> {
    let model = tensorsmith::open(url, &OpenOptions::new())?;
    model
        .index
        .tensors
        .iter()
        .map(|t| model.tensor_bytes(t).map(|b| b.into_owned()))
        .collect()
}

/// `e` is ChangedDuringRead of `what`, from `pinned` to a `now` containing `now`, naming `url`.
#[track_caller]
fn assert_changed(e: &tensorsmith::Error, url: &str, what: &str, pinned: &str, now: &str) {
    let ErrorKind::ChangedDuringRead {
        what: w,
        pinned: p,
        now: n,
        ..
    } = e.kind()
    else {
        panic!("not ChangedDuringRead: {e}");
    };
    assert_eq!((*w, p.as_str()), (what, pinned), "{e}");
    assert!(n.contains(now), "{e}");
    assert!(e.to_string().contains(url), "{e}");
}

/// The open's request, then one read of version 1, then version 2.
fn swapping(opts: Options) -> VersionedServer {
    let (v1, v2) = two_versions();
    VersionedServer::start(
        v1,
        v2,
        Options {
            swap_after: Some(2),
            ..opts
        },
    )
}

#[test]
fn a_file_swapped_mid_convert_fails_and_writes_nothing() {
    let server = swapping(Options::default());
    let url = server.url("/m.safetensors");
    let model = tensorsmith::open(&url, &OpenOptions::new()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    let opts = tensorsmith::ops::convert::ConvertOptions::new();
    let e = tensorsmith::ops::convert::convert(&model, &out, &opts).unwrap_err();
    assert_changed(&e, &url, "ETag", "\"v1\"", "412");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "output left"
    );
}

#[test]
fn an_etag_is_pinned_and_sent_as_if_match() {
    let server = swapping(Options {
        last_modified: false,
        ..Options::default()
    });
    let url = server.url("/m.safetensors");
    let e = read_every_tensor(&url).unwrap_err();
    assert_changed(&e, &url, "ETag", "\"v1\"", "412");
    let sent = server.preconditions();
    assert!(
        !sent.is_empty() && sent.iter().all(|h| h == "if-match: \"v1\""),
        "{sent:?}"
    );
}

#[test]
fn last_modified_is_pinned_when_there_is_no_strong_etag() {
    for etag in [Tag::None, Tag::Weak] {
        let server = swapping(Options {
            etag,
            ..Options::default()
        });
        let url = server.url("/m.safetensors");
        let e = read_every_tensor(&url).unwrap_err();
        let (v1, v2) = (versioned::last_modified(1), versioned::last_modified(2));
        assert_changed(&e, &url, "Last-Modified", &v1, "412");
        let sent = server.preconditions();
        let want = format!("if-unmodified-since: {v1}");
        assert!(sent.iter().all(|h| *h == want), "{sent:?}");
        // A server that ignores the precondition: the Last-Modified it sends is compared.
        let server = swapping(Options {
            etag,
            preconditions: false,
            ..Options::default()
        });
        let url = server.url("/m.safetensors");
        let e = read_every_tensor(&url).unwrap_err();
        assert_changed(&e, &url, "Last-Modified", &v1, &v2);
    }
}

#[test]
fn a_weak_etag_alone_is_compared_but_not_sent() {
    let server = swapping(Options {
        etag: Tag::Weak,
        last_modified: false,
        ..Options::default()
    });
    let url = server.url("/m.safetensors");
    let e = read_every_tensor(&url).unwrap_err();
    assert_changed(&e, &url, "ETag", "W/\"v1\"", "W/\"v2\"");
    assert_eq!(server.preconditions(), Vec::<String>::new());
}

#[test]
fn without_validators_reads_work_and_only_the_length_is_checked() {
    // Nothing tells two versions of one length apart: no check is possible, reads work.
    let (v1, _) = two_versions();
    let server = VersionedServer::start(
        v1.clone(),
        v1.clone(),
        Options {
            etag: Tag::None,
            last_modified: false,
            ..Options::default()
        },
    );
    let url = server.url("/m.safetensors");
    let got = read_every_tensor(&url).unwrap();
    assert_eq!(got.concat(), v1[v1.len() - (16 << 20)..]);
    assert_eq!(server.preconditions(), Vec::<String>::new());
    let f = HttpFile::open(&url, 1024).unwrap();
    assert_eq!(f.pinned().unwrap().validator(), None);
}

#[test]
fn a_server_that_answers_412_to_if_match_is_an_error() {
    let server = swapping(Options::default());
    let url = server.url("/m.safetensors");
    let e = read_every_tensor(&url).unwrap_err();
    assert_changed(
        &e,
        &url,
        "ETag",
        "\"v1\"",
        "412 Precondition Failed to If-Match",
    );
}

#[test]
fn a_server_that_ignores_preconditions_is_caught_by_the_etag_it_sends() {
    let server = swapping(Options {
        preconditions: false,
        ..Options::default()
    });
    let url = server.url("/m.safetensors");
    let e = read_every_tensor(&url).unwrap_err();
    assert_changed(&e, &url, "ETag", "\"v1\"", "\"v2\"");
    assert!(!server.preconditions().is_empty(), "If-Match was sent");
}

#[test]
fn a_new_length_in_content_range_is_caught() {
    let (v1, _) = two_versions();
    let mut v2 = v1.clone();
    v2.extend_from_slice(&[0; 16]);
    let server = VersionedServer::start(
        v1.clone(),
        v2,
        Options {
            etag: Tag::None,
            last_modified: false,
            swap_after: Some(1),
            ..Options::default()
        },
    );
    let url = server.url("/m.safetensors");
    let f = HttpFile::open(&url, 1024).unwrap();
    let n = v1.len() as u64;
    let e = f.read(n - 4096..n).unwrap_err();
    let (pinned, now) = (format!("{n} bytes"), format!("{} bytes", n + 16));
    assert_changed(&e, &url, "length", &pinned, &now);
}

#[test]
fn an_unchanged_file_reads_in_parallel_as_the_local_file() {
    use rayon::prelude::*;
    let file = safetensors_file(32, 256 << 10);
    let server = VersionedServer::start(file.clone(), Vec::new(), Options::default());
    let url = server.url("/m.safetensors");
    let model = tensorsmith::open(&url, &OpenOptions::new()).unwrap();
    let got: Vec<Vec<u8>> = model
        .index
        .tensors
        .par_iter()
        .map(|t| model.tensor_bytes(t).unwrap().into_owned())
        .collect();
    assert_eq!(got.concat(), file[file.len() - (32 << 18)..]);
    let requests = server.requests.load(Ordering::SeqCst);
    assert!(requests > 16, "{requests} requests");
    // Every request after the open's carried the pinned ETag.
    assert_eq!(server.preconditions().len(), requests - 1);
}

#[test]
fn a_whole_body_where_a_range_was_asked_is_used_only_if_of_the_version_opened() {
    let v2_ignores_range = Options {
        preconditions: false,
        v2_ignores_range: true,
        swap_after: Some(2),
        ..Options::default()
    };
    let (v1, v2) = two_versions();
    let server = VersionedServer::start(v1.clone(), v2, v2_ignores_range);
    let url = server.url("/m.safetensors");
    let e = read_every_tensor(&url).unwrap_err();
    assert_changed(&e, &url, "ETag", "\"v1\"", "\"v2\"");
    // The same version (nothing tells them apart) sent whole: the range is cut from it.
    let server = VersionedServer::start(
        v1.clone(),
        v1.clone(),
        Options {
            etag: Tag::None,
            last_modified: false,
            ..v2_ignores_range
        },
    );
    let got = read_every_tensor(&server.url("/m.safetensors")).unwrap();
    assert_eq!(got.concat(), v1[v1.len() - (16 << 20)..]);
}

#[test]
fn a_server_without_range_is_checked_on_its_whole_body_download() {
    for preconditions in [true, false] {
        let (v1, v2) = two_versions();
        let server = VersionedServer::start(
            v1,
            v2,
            Options {
                ranges: false,
                preconditions,
                swap_after: Some(1),
                ..Options::default()
            },
        );
        let url = server.url("/m.safetensors");
        let e = read_every_tensor(&url).unwrap_err();
        let now = if preconditions { "412" } else { "\"v2\"" };
        assert_changed(&e, &url, "ETag", "\"v1\"", now);
    }
    // Unchanged: one download serves every read.
    let (v1, _) = two_versions();
    let server = VersionedServer::start(
        v1.clone(),
        Vec::new(),
        Options {
            ranges: false,
            ..Options::default()
        },
    );
    let got = read_every_tensor(&server.url("/m.safetensors")).unwrap();
    assert_eq!(got.concat(), v1[v1.len() - (16 << 20)..]);
    assert_eq!(server.requests.load(Ordering::SeqCst), 2);
}

#[test]
fn errors_name_the_url_without_credentials() {
    let server = swapping(Options::default());
    let url = server.url("/m.safetensors");
    let secret = url.replace("http://", "http://user:hunter2@") + "?token=t0ken";
    let e = read_every_tensor(&secret).unwrap_err();
    assert_changed(&e, &url, "ETag", "\"v1\"", "412");
    let text = e.to_string();
    assert!(
        !text.contains("hunter2") && !text.contains("t0ken"),
        "{text}"
    );
}
