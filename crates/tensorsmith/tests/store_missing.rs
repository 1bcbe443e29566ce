//! A missing bucket is told from a missing object even when the store's 404 carries no error
//! code (some servers, and answers whose body is lost): the open lists the key, and a listing
//! answers 404 only for a missing bucket. Against a server on 127.0.0.1 that answers S3's
//! requests as each test scripts (`support/faulty_server.rs`): a ranged GET is the open, an
//! unranged one the listing.

mod support;

use support::faulty_server::{Fault, FaultyServer, Seen};
use tensorsmith::bytes::{open_url, StorageOptions};
use tensorsmith::error::ErrorKind;

/// An empty listing of the key: what a bucket without the object answers.
const EMPTY_LISTING: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\
<Name>nob</Name><Prefix>m.safetensors</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>\
<Delimiter>/</Delimiter><IsTruncated>false</IsTruncated></ListBucketResult>";

/// The error of opening `s3://nob/m.safetensors` on `server`.
fn open_error(server: &FaultyServer) -> tensorsmith::error::Error {
    let mut o = StorageOptions::new();
    for (k, v) in [
        ("endpoint_url", server.url("").as_str()),
        ("key", "AKIDEXAMPLE"),
        ("secret", "not-a-secret"),
        ("region", "us-east-1"),
        ("max_attempts", "1"),
    ] {
        o.set(k, v).unwrap();
    }
    match open_url("s3://nob/m.safetensors", &o, 1024) {
        Ok(_) => panic!("opened a missing object"),
        Err(e) => e,
    }
}

fn is_open(r: &Seen) -> bool {
    r.range.is_some()
}

/// A 404 whose body names no error code.
const BARE_404: Fault = Fault::Status(404, None, "");

#[test]
fn a_bare_404_listing_is_a_missing_bucket() {
    let s = FaultyServer::start(EMPTY_LISTING.into(), Box::new(|_| Some(BARE_404)));
    let e = open_error(&s);
    assert!(
        matches!(e.kind(), ErrorKind::NoSuchBucket(b) if b == "nob"),
        "{e}"
    );
}

#[test]
fn a_listing_that_lists_is_a_missing_object() {
    let s = FaultyServer::start(
        EMPTY_LISTING.into(),
        Box::new(|r| is_open(r).then_some(BARE_404)),
    );
    let e = open_error(&s);
    assert!(
        matches!(e.kind(), ErrorKind::RemoteNotFound(m) if m == "no object 'm.safetensors' in bucket 'nob'"),
        "{e}"
    );
}

#[test]
fn a_listing_whose_body_is_lost_is_asked_again() {
    // The open: a bare 404. The first listing: its headers, then the connection closed; the
    // second: a bare 404, so the bucket is missing.
    let listed = std::sync::atomic::AtomicUsize::new(0);
    let s = FaultyServer::start(
        EMPTY_LISTING.into(),
        Box::new(move |r| {
            if is_open(r) {
                return Some(BARE_404);
            }
            match listed.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => Some(Fault::DropAfter(0)),
                _ => Some(BARE_404),
            }
        }),
    );
    let e = open_error(&s);
    assert!(
        matches!(e.kind(), ErrorKind::NoSuchBucket(b) if b == "nob"),
        "{e}"
    );
}
