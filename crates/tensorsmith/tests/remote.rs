//! Remote files over HTTP range requests, against a small HTTP/1.1 server started by the
//! tests on 127.0.0.1: headers are read with one or two requests, not the whole file; servers
//! that ignore Range still work; HTTP and format errors name the URL.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use support::http_server::Server;
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
