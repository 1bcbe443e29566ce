//! Remote reads that meet failures, against a server on 127.0.0.1 that injects them
//! (`support/faulty_server.rs`): throttling (503 SlowDown, 429 with Retry-After) is retried
//! with backoff and the read succeeds; a connection dropped mid-body is resumed from the first
//! missing byte, of the version first seen; a stalled server fails within the timeout; when
//! the attempts run out, or on a 4xx, the error names the URL, the attempts and the failure.
//! Large reads and copies go as parallel ranged GETs and come back byte for byte.

mod support;

use std::ops::Range;
use std::time::{Duration, Instant};
use support::faulty_server::{Fault, FaultyServer, Seen, ETAG};
use tensorsmith::bytes::{HttpFile, ReadAt, Transfer};

const MIB: u64 = 1 << 20;

/// `n` bytes that differ from part to part and within one.
fn body(n: usize) -> Vec<u8> {
    (0..n as u64)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

fn transfer(attempts: u32, conc: usize, part: u64, timeout_s: f64) -> Transfer {
    Transfer {
        max_attempts: attempts,
        max_concurrency: conc,
        part_size: part,
        timeout: Duration::from_secs_f64(timeout_s),
        ..Transfer::default()
    }
}

fn starts_at(r: &Seen, at: u64) -> bool {
    r.range.is_some_and(|(a, _)| a == at)
}

#[test]
fn throttling_is_retried_with_backoff_and_retry_after() {
    // The open: three 503 SlowDown, then served. Then a read past the prefix: two 429 with
    // Retry-After: 1, then served.
    let data = body(3 << 20);
    let server = FaultyServer::start(
        data.clone(),
        Box::new(|r| match r.index {
            0..=2 => Some(Fault::Status(503, None, "SlowDown")),
            4 | 5 => Some(Fault::Status(429, Some(1), "TooManyRequests")),
            _ => None,
        }),
    );
    let url = server.url("/m.safetensors");
    let f = HttpFile::open_with(&url, 1024, &transfer(5, 4, 5 * MIB, 60.0)).unwrap();
    assert_eq!(f.len(), data.len() as u64);
    assert_eq!(f.requests(), 4);
    let t = Instant::now();
    let got = f.read(2000..3 * MIB).unwrap();
    assert!(got[..] == data[2000..], "the bytes read are the file's");
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(f.requests(), 7);
    assert_eq!(server.requests(), 7);
}

#[test]
fn a_connection_dropped_mid_body_is_resumed_from_the_missing_bytes() {
    // 12 MiB past the first 1024 bytes (fetched at open) in 5 MiB parts, 2 at once: the
    // second part breaks after 1 MiB + 123 bytes, the first time; the open's request breaks
    // too (restarted whole).
    let data = body(12 << 20);
    let cut = 1024 + 5 * MIB;
    // The first request for the part at `cut`, whichever of the parallel parts comes first.
    let dropped = std::sync::atomic::AtomicBool::new(false);
    let server = FaultyServer::start(
        data.clone(),
        Box::new(move |r| {
            if r.index == 0 {
                return Some(Fault::DropAfter(100));
            }
            (starts_at(r, cut) && !dropped.swap(true, std::sync::atomic::Ordering::SeqCst))
                .then_some(Fault::DropAfter((MIB + 123) as usize))
        }),
    );
    let url = server.url("/m.bin");
    let f = HttpFile::open_with(&url, 1024, &transfer(3, 2, 5 * MIB, 60.0)).unwrap();
    let mut out = Vec::new();
    f.copy_to(0..data.len() as u64, &mut out).unwrap();
    assert!(out == data, "the copy is the file, byte for byte");
    let seen = server.seen();
    let resumed: Vec<&Seen> = seen
        .iter()
        .filter(|r| starts_at(r, cut + MIB + 123))
        .collect();
    assert_eq!(resumed.len(), 1, "{seen:?}");
    assert_eq!(resumed[0].range, Some((cut + MIB + 123, cut + 5 * MIB - 1)));
    assert_eq!(
        resumed[0].if_match.as_deref(),
        Some(ETAG),
        "the pinned version"
    );
    // Open (twice), 3 parts, one resume.
    assert_eq!(server.requests(), 6, "{seen:?}");
    // A large read is the same parts, into one buffer.
    assert!(f.read(1..data.len() as u64).unwrap()[..] == data[1..]);
}

#[test]
fn a_connection_closed_before_the_answer_is_retried() {
    let data = body(1 << 20);
    let server = FaultyServer::start(
        data.clone(),
        Box::new(|r| (r.index == 1).then_some(Fault::Close)),
    );
    let f = HttpFile::open_with(&server.url("/m"), 16, &transfer(5, 4, 5 * MIB, 60.0)).unwrap();
    assert!(f.read(16..MIB).unwrap()[..] == data[16..]);
}

#[test]
fn a_stalled_server_fails_within_the_timeout_naming_url_and_timeout() {
    let server = FaultyServer::start(
        body(1 << 20),
        Box::new(|r| (r.index >= 1).then_some(Fault::Stall(Duration::from_secs(30)))),
    );
    let url = server.url("/stall.safetensors");
    let f = HttpFile::open_with(&url, 16, &transfer(5, 4, 5 * MIB, 1.5)).unwrap();
    let t = Instant::now();
    let e = f.read(16..MIB).unwrap_err().to_string();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        e.contains(&url) && e.contains("1.5 s") && e.contains("timeout"),
        "{e}"
    );
}

#[test]
fn exhausted_attempts_say_how_many_and_the_last_failure() {
    let server = FaultyServer::start(
        body(1024),
        Box::new(|_| Some(Fault::Status(503, None, "SlowDown"))),
    );
    let url = server.url("/busy.safetensors");
    let e = HttpFile::open_with(&url, 16, &transfer(3, 4, 5 * MIB, 60.0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&url) && e.contains("503") && e.contains("gave up after 3 attempts"),
        "{e}"
    );
    assert_eq!(server.requests(), 3);
}

#[test]
fn client_errors_are_not_retried() {
    let server = FaultyServer::start(
        body(1024),
        Box::new(|_| Some(Fault::Status(403, None, "AccessDenied"))),
    );
    let e = HttpFile::open_with(&server.url("/x"), 16, &transfer(5, 4, 5 * MIB, 60.0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("403") && !e.contains("attempts"), "{e}");
    assert_eq!(server.requests(), 1);
}

#[test]
fn parallel_parts_cover_odd_ranges() {
    let data = body((11 << 20) + 17);
    let server = FaultyServer::start(data.clone(), Box::new(|_| None));
    let f = HttpFile::open_with(&server.url("/m"), 4096, &transfer(1, 3, 5 * MIB, 60.0)).unwrap();
    let ranges: [Range<u64>; 4] = [
        0..data.len() as u64,
        100..4000,
        4000..(10 << 20) + 1,
        (5 << 20) - 1..data.len() as u64,
    ];
    for r in ranges {
        let mut out = Vec::new();
        f.copy_to(r.clone(), &mut out).unwrap();
        assert!(out[..] == data[r.start as usize..r.end as usize], "{r:?}");
    }
    // The first 4096 bytes, fetched at open, are not asked for again.
    let seen = server.seen();
    assert!(
        seen.iter().skip(1).all(|r| r.range.unwrap().0 >= 4096),
        "{seen:?}"
    );
}
