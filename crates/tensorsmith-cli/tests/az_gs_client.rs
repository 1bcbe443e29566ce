//! `tensorsmith::bytes::ObjectClient` and `GcsClient` against Azurite and fake-gcs-server:
//! the conditional create answers "exists" the second time (Azure's 409 `BlobAlreadyExists`,
//! GCS's 412 to `ifGenerationMatch=0`: `ErrorKind::PreconditionFailed`) and leaves the first
//! bytes (and so does an Azure file's, committed by Put Block List or Put Blob); get of a
//! missing object is `None`; put replaces; put_file streams a file of several parts; list by
//! prefix with sizes and times, over pages of 2; delete, twice; a replace conditional on the
//! version read (Azure's ETag, GCS's generation) refused once another write came between.

#[path = "object_store/emulators.rs"]
mod emulators;
#[path = "object_store/moto.rs"]
mod moto;

use emulators::{Azurite, FakeGcs};
use tensorsmith::bytes::{GcsClient, ObjectClient, ObjectMeta, PutCondition, StorageOptions};
use tensorsmith::error::{ErrorKind, Result};

/// What both clients do, for one test body.
trait Client {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    fn put(&self, key: &str, bytes: &[u8], cond: PutCondition) -> Result<()>;
    fn put_file(&self, key: &str, from: &std::fs::File) -> Result<()>;
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>>;
    fn delete(&self, key: &str) -> Result<()>;
}

macro_rules! client {
    ($t:ty, $put_file:expr) => {
        impl Client for $t {
            fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
                <$t>::get(self, key)
            }
            fn put(&self, key: &str, bytes: &[u8], cond: PutCondition) -> Result<()> {
                <$t>::put(self, key, bytes, cond)
            }
            fn put_file(&self, key: &str, from: &std::fs::File) -> Result<()> {
                $put_file(self, key, from)
            }
            fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
                <$t>::list(self, prefix)
            }
            fn delete(&self, key: &str) -> Result<()> {
                <$t>::delete(self, key)
            }
        }
    };
}
client!(ObjectClient, |c: &ObjectClient, k, f| c.put_file(
    k,
    f,
    PutCondition::Always
));
client!(GcsClient, |c: &GcsClient, k, f| c.put_file(k, f));

fn exercise(c: &dyn Client, shown: &str) {
    assert_eq!(c.get("d/v/1.json").unwrap(), None);
    c.put("d/v/1.json", b"first", PutCondition::IfNoneMatch)
        .unwrap();
    let e = c
        .put("d/v/1.json", b"second", PutCondition::IfNoneMatch)
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PreconditionFailed(_)), "{e}");
    assert!(
        e.to_string().contains(&format!("{shown}/d/v/1.json")),
        "{e}"
    );
    assert_eq!(c.get("d/v/1.json").unwrap().as_deref(), Some(&b"first"[..]));
    c.put("d/m.json", b"one", PutCondition::Always).unwrap();
    c.put("d/m.json", b"two!", PutCondition::Always).unwrap();
    assert_eq!(c.get("d/m.json").unwrap().as_deref(), Some(&b"two!"[..]));
    // A file of three parts (5 MiB each, the smallest part size).
    let mut f = tempfile::tempfile().unwrap();
    let big: Vec<u8> = (0..(11u32 << 20)).map(|i| (i % 251) as u8).collect();
    std::io::Write::write_all(&mut f, &big).unwrap();
    std::io::Seek::rewind(&mut f).unwrap();
    c.put_file("d/big.bin", &f).unwrap();
    assert_eq!(c.get("d/big.bin").unwrap().unwrap(), big);
    c.put("other/x", b"x", PutCondition::Always).unwrap();
    // Listed over pages of 2 (the client is made with that page size).
    for i in 0..5 {
        c.put(&format!("p/{i}"), b"p", PutCondition::Always)
            .unwrap();
    }
    let l = c.list("p/").unwrap();
    let keys: Vec<&str> = l.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["p/0", "p/1", "p/2", "p/3", "p/4"]);
    let l = c.list("d/").unwrap();
    let keys: Vec<&str> = l.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["d/big.bin", "d/m.json", "d/v/1.json"]);
    assert_eq!(l[0].size, big.len() as u64);
    assert!(l.iter().all(|o| !o.last_modified.is_empty()), "{l:?}");
    c.delete("d/m.json").unwrap();
    c.delete("d/m.json").unwrap();
    assert_eq!(c.get("d/m.json").unwrap(), None);
    assert_eq!(c.list("d/m").unwrap(), []);
}

fn opts(pairs: &[(&str, &str)]) -> StorageOptions {
    let mut o = StorageOptions::new();
    for (k, v) in pairs {
        o.set(k, v).unwrap();
    }
    o.set("part_size", "5MiB").unwrap();
    o
}

#[test]
fn azure_client_creates_once_and_lists() {
    let a = Azurite::start();
    a.container("cont", false);
    let o = opts(&[("connection_string", &a.connection_string())]);
    let (c, key) = ObjectClient::for_url("az://cont/d", &o).unwrap();
    assert_eq!(key, "d");
    exercise(&c, "az://cont");
    // A file created only if absent: the second commit (Put Block List of 3 blocks, or one
    // Put Blob) finds the name taken and leaves the first.
    for (key, len) in [("f/big", 11u32 << 20), ("f/small", 1000)] {
        let first: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let second: Vec<u8> = (0..len).map(|i| (i % 7) as u8).collect();
        let file = |bytes: &[u8]| {
            let mut f = tempfile::tempfile().unwrap();
            std::io::Write::write_all(&mut f, bytes).unwrap();
            std::io::Seek::rewind(&mut f).unwrap();
            f
        };
        c.put_file(key, &file(&first), PutCondition::IfNoneMatch)
            .unwrap();
        let e = c
            .put_file(key, &file(&second), PutCondition::IfNoneMatch)
            .unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::PreconditionFailed(_)),
            "{key}: {e}"
        );
        assert_eq!(c.get(key).unwrap().unwrap(), first, "{key}");
    }
    // Replaced only if unchanged: If-Match the ETag read.
    c.put("r/m.json", b"v1", PutCondition::Always).unwrap();
    let (_, etag) = c.get_tagged("r/m.json").unwrap().unwrap();
    c.put("r/m.json", b"v2", PutCondition::IfMatch(etag.clone()))
        .unwrap();
    let e = c
        .put("r/m.json", b"stale", PutCondition::IfMatch(etag))
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PreconditionFailed(_)), "{e}");
    assert_eq!(c.get("r/m.json").unwrap().as_deref(), Some(&b"v2"[..]));
    let (missing, _) = ObjectClient::for_url("az://nocont/d", &o).unwrap();
    let e = missing.get("d/x").unwrap_err().to_string();
    assert!(e.contains("no container 'nocont'"), "{e}");
}

#[test]
fn gcs_client_creates_once_and_lists() {
    let g = FakeGcs::start();
    g.bucket("bkt");
    let o = opts(&[("endpoint_url", &g.endpoint)]);
    let (c, key) = GcsClient::for_url("gs://bkt/d", &o).unwrap();
    assert_eq!(key, "d");
    let c = c.with_page_size(2);
    exercise(&c, "gs://bkt");
    // Replaced only if unchanged: ifGenerationMatch the generation read.
    c.put("r/m.json", b"v1", PutCondition::Always).unwrap();
    let (_, generation) = c.get_tagged("r/m.json").unwrap().unwrap();
    c.put_if_generation("r/m.json", b"v2", &generation).unwrap();
    let e = c
        .put_if_generation("r/m.json", b"stale", &generation)
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PreconditionFailed(_)), "{e}");
    assert_eq!(c.get("r/m.json").unwrap().as_deref(), Some(&b"v2"[..]));
    let (missing, _) = GcsClient::for_url("gs://nobkt/d", &o).unwrap();
    let e = missing.list("d/").unwrap_err().to_string();
    assert!(e.contains("nobkt"), "{e}");
}
