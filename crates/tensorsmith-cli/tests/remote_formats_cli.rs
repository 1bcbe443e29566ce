//! Every format over HTTP: zTensor v0.1, v1.1 and v2 (raw and zstd, with digests) and GGUF,
//! served by a local test server on 127.0.0.1, give the same answers as the local file for
//! inspect, validate, hash, hash --content, diff --values, verify and convert; and the
//! header-only commands fetch only the header, not the tensor data.

#[path = "../../tensorsmith/tests/support/http_server.rs"]
mod http_server;

use http_server::Server;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::Ordering;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

/// A safetensors file with 4 MiB of pseudo-random F32 (so zstd cannot shrink it away) and two
/// small tensors, written byte by byte as the format defines it.
fn source_safetensors(dir: &Path) -> PathBuf {
    let big: Vec<u8> = (0u32..1 << 20)
        .flat_map(|i| {
            let x = i.wrapping_mul(2_654_435_761).rotate_left(7) as f32 / u32::MAX as f32;
            x.to_le_bytes()
        })
        .collect();
    let small: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let ints: Vec<u8> = [7i32, -9, 11]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let (b, s) = (big.len(), small.len());
    let header = format!(
        "{{\"big\":{{\"dtype\":\"F32\",\"shape\":[1024,1024],\"data_offsets\":[0,{b}]}},\
         \"ints\":{{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[{},{}]}},\
         \"small\":{{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[{b},{}]}}}}",
        b + s,
        b + s + ints.len(),
        b + s
    );
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&big);
    bytes.extend_from_slice(&small);
    bytes.extend_from_slice(&ints);
    let path = dir.join("source.safetensors");
    std::fs::write(&path, bytes).unwrap();
    path
}

/// `convert SOURCE OUT` with extra arguments; the output's path.
fn convert(src: &Path, out: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec!["convert", src.to_str().unwrap(), out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out.to_path_buf()
}

/// The files to serve: every zTensor version raw and zstd (with digests), and GGUF vectors.
fn files(dir: &Path) -> Vec<(String, PathBuf)> {
    let src = source_safetensors(dir);
    let mut v = Vec::new();
    for (ver, digest) in [("0.1", "crc32c"), ("1.1", "sha256"), ("2", "xxh3")] {
        for compress in [None, Some("zstd")] {
            let name = format!("v{ver}_{}.zt", compress.unwrap_or("raw"));
            let mut extra = vec!["--zt-version", ver, "--digest", digest];
            if let Some(c) = compress {
                extra.extend(["--compress", c]);
            }
            v.push((name.clone(), convert(&src, &dir.join(&name), &extra)));
        }
    }
    let gguf = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gguf");
    for name in ["every_type.gguf", "alignment64.gguf"] {
        v.push((name.to_string(), gguf.join(name)));
    }
    v.push(("source.safetensors".to_string(), src));
    v
}

fn serve(files: &[(String, PathBuf)]) -> Server {
    Server::start(
        files
            .iter()
            .map(|(n, p)| (format!("/{n}"), std::fs::read(p).unwrap()))
            .collect::<HashMap<_, _>>(),
    )
}

/// Stdout and exit code of a command on `target`, with `target` itself replaced by `X`.
fn answer(args: &[&str], target: &str) -> (Option<i32>, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.push(target);
    let o = run(&all);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).replace(target, "X"),
    )
}

#[test]
fn every_format_answers_the_same_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let server = serve(&files);
    let commands: [&[&str]; 6] = [
        &["inspect", "--json"],
        &["inspect"],
        &["validate"],
        &["hash"],
        &["hash", "--content"],
        &["verify"],
    ];
    for (name, path) in &files {
        let url = server.url(&format!("/{name}"));
        let local = path.to_str().unwrap();
        for args in commands {
            let here = answer(args, local);
            let there = answer(args, &url);
            assert_eq!(here.0, Some(0), "{name} {args:?}: {}", here.1);
            assert_eq!(there, here, "{name} {args:?}");
        }
        // Values compared across the network, both ways round.
        for (a, b) in [(local, url.as_str()), (url.as_str(), local)] {
            let o = run(&["diff", "--values", a, b]);
            assert_eq!(
                o.status.code(),
                Some(0),
                "{name}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        // Converted from the URL and from the file: the same bytes.
        if name.ends_with(".zt") || name == "source.safetensors" {
            for out in ["out.safetensors", "out.zt"] {
                let from_url = dir.path().join(format!("url_{name}_{out}"));
                let from_file = dir.path().join(format!("file_{name}_{out}"));
                convert(Path::new(&url), &from_url, &[]);
                convert(path, &from_file, &[]);
                assert_eq!(
                    std::fs::read(&from_url).unwrap(),
                    std::fs::read(&from_file).unwrap(),
                    "{name} -> {out}"
                );
            }
        }
    }
}

#[test]
fn header_commands_fetch_only_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let server = serve(&files);
    for (name, path) in files.iter().filter(|(n, _)| n.ends_with(".zt")) {
        let url = server.url(&format!("/{name}"));
        let len = std::fs::metadata(path).unwrap().len() as usize;
        assert!(len > 3 << 20, "{name}: {len} bytes");
        for args in [&["inspect"][..], &["validate"], &["hash"]] {
            server.sent.store(0, Ordering::SeqCst);
            let (code, out) = answer(args, &url);
            assert_eq!(code, Some(0), "{name} {args:?}: {out}");
            let sent = server.sent.load(Ordering::SeqCst);
            // The first read (256 KiB) and the manifest; never the megabytes of data.
            assert!(
                sent < 512 << 10,
                "{name} {args:?}: {sent} of {len} bytes sent"
            );
        }
        // Reading values needs the data, once: not the whole file twice over.
        for args in [&["hash", "--content"][..], &["verify"]] {
            server.sent.store(0, Ordering::SeqCst);
            let (code, _) = answer(args, &url);
            assert_eq!(code, Some(0), "{name} {args:?}");
            let sent = server.sent.load(Ordering::SeqCst);
            assert!(
                sent >= len - (512 << 10) && sent <= len + (512 << 10),
                "{name} {args:?}: {sent} of {len} bytes sent"
            );
        }
    }
}

#[test]
fn a_flipped_byte_is_caught_over_http_too() {
    let dir = tempfile::tempdir().unwrap();
    let src = source_safetensors(dir.path());
    let zt = convert(
        &src,
        &dir.path().join("d.zt"),
        &["--zt-version", "2", "--digest", "xxh3"],
    );
    let mut bytes = std::fs::read(&zt).unwrap();
    bytes[100_000] ^= 0x40; // inside the data of "big"
    let server = Server::start(HashMap::from([("/d.zt".to_string(), bytes)]));
    let o = run(&["verify", &server.url("/d.zt")]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("digest mismatch") && out.contains("'big'"),
        "{out}"
    );
}
