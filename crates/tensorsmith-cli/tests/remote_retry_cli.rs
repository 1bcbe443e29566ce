//! `convert URL out` and `inspect URL` over servers on 127.0.0.1 that fail on purpose
//! (`faulty_server.rs`, `versioned_server.rs`), with the transfer settings given as
//! `--storage-option`: throttling and dropped connections are retried and the output is the
//! local convert's, byte for byte; the parts are as large and as many at once as asked; an
//! object replaced between two parallel parts exits 3 with nothing written; attempts that run
//! out and a server that stalls fail with the URL, the attempts or the timeout.

#[path = "../../tensorsmith/tests/support/faulty_server.rs"]
mod faulty_server;
#[path = "../../tensorsmith/tests/support/versioned_server.rs"]
mod versioned_server;

use faulty_server::{Fault, FaultyServer};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;
use versioned_server::{Options, VersionedServer};

const MIB: u64 = 1 << 20;

/// A model with one 16 MiB tensor (four 5 MiB parts) and a small one, values from `fill`.
fn model(fill: u8) -> Vec<u8> {
    let mut w = Writer::new();
    let big: Vec<u8> = (0..16 << 20)
        .map(|i: u32| (i.wrapping_mul(2654435761) >> 11) as u8 ^ fill)
        .collect();
    w.add("big", DType::U8, &[16 << 20], big).unwrap();
    w.add("small", DType::U8, &[1000], vec![fill; 1000])
        .unwrap();
    w.to_bytes().unwrap()
}

fn tensorsmith(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

const PARTS: [&str; 4] = [
    "--storage-option",
    "part_size=5MiB",
    "--storage-option",
    "max_concurrency=4",
];

fn convert(url: &str, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["convert", url, out.to_str().unwrap()];
    args.extend(PARTS);
    args.extend(extra);
    tensorsmith(&args)
}

#[test]
fn throttled_and_dropped_reads_are_retried_and_the_output_is_the_local_one() {
    let data = model(0);
    let dir = tempfile::tempdir().unwrap();
    let local_in = dir.path().join("in.safetensors");
    std::fs::write(&local_in, &data).unwrap();
    let local_out = dir.path().join("local.safetensors");
    let o = tensorsmith(&[
        "convert",
        local_in.to_str().unwrap(),
        local_out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The open is throttled twice; then the first request of the big tensor's first three
    // parts (from byte 256 KiB, past the first read at open): 503, a connection dropped 1 MiB
    // into the body (resumed from there), 429.
    let faulted = std::sync::Mutex::new(std::collections::HashSet::new());
    let server = FaultyServer::start(
        data.clone(),
        Box::new(move |r| {
            if r.index < 2 {
                return Some(Fault::Status(503, None, "SlowDown"));
            }
            // The part this request is the first of, if any.
            let part = r
                .range
                .and_then(|(a, _)| a.checked_sub(256 * 1024))
                .filter(|o| r.if_match.is_some() && o % (5 * MIB) == 0)
                .filter(|o| faulted.lock().unwrap().insert(*o))
                .map(|o| o / (5 * MIB));
            match part {
                Some(0) => Some(Fault::Status(503, None, "SlowDown")),
                Some(1) => Some(Fault::DropAfter(MIB as usize)),
                Some(2) => Some(Fault::Status(429, Some(0), "TooManyRequests")),
                _ => None,
            }
        }),
    );
    let out = dir.path().join("remote.safetensors");
    let o = convert(&server.url("/m.safetensors"), &out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&local_out).unwrap());
    // The storage options reached the reader: parts of 5 MiB after the first 256 KiB read
    // at open (the ranges asked for say the size), each faulted once.
    let seen = server.seen();
    let sizes: Vec<u64> = seen
        .iter()
        .skip(3)
        .filter_map(|r| r.range.map(|(a, b)| b + 1 - a))
        .collect();
    assert!(sizes.iter().all(|&s| s <= 5 * MIB), "{seen:?}");
    assert!(
        sizes.iter().filter(|&&s| s == 5 * MIB).count() >= 3,
        "{seen:?}"
    );
    assert!(seen
        .iter()
        .any(|r| r.range.is_some_and(|(a, _)| a == 256 * 1024 + 6 * MIB)));
}

#[test]
fn an_object_replaced_between_two_parallel_parts_exits_3() {
    // Version 2 from the third request on: the open, one part, then the rest refused.
    let server = VersionedServer::start(
        model(0),
        model(1),
        Options {
            swap_after: Some(2),
            ..Options::default()
        },
    );
    let url = server.url("/m.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let o = convert(&url, &dir.path().join("out.safetensors"), &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&url) && err.contains("changed during the read"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn attempts_that_run_out_say_how_many() {
    let server = FaultyServer::start(
        model(0),
        Box::new(|_| Some(Fault::Status(503, None, "SlowDown"))),
    );
    let url = server.url("/busy.safetensors");
    let o = tensorsmith(&["inspect", &url, "--storage-option", "max_attempts=2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&url) && err.contains("503") && err.contains("gave up after 2 attempts"),
        "{err}"
    );
    assert_eq!(server.requests(), 2);
}

#[test]
fn a_server_that_stops_answering_fails_within_the_timeout() {
    let server = FaultyServer::start(
        model(0),
        Box::new(|r| (r.index >= 1).then_some(Fault::Stall(Duration::from_secs(60)))),
    );
    let url = server.url("/stalls.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let o = convert(
        &url,
        &dir.path().join("out.safetensors"),
        &["--storage-option", "timeout=1"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(
        err.contains(&url) && err.contains("within 1 s") && err.contains("timeout"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
