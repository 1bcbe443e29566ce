//! Shared by the zTensor vector tests: loading `expected.json`, comparing a read file with
//! it, and rewriting a file through the writer (for byte-identity checks).
#![allow(dead_code)]

use serde_json::Value;
use sha2::Digest as _;
use std::borrow::Cow;
use std::path::PathBuf;
use tensorsmith::dtype::DType;
use tensorsmith::index::{Encoding, Layout, MetaValue, ZtVersion};
use tensorsmith::ops::inspect::meta_json;
use tensorsmith::ztensor::{self, Compression, DigestKind, PartData, WriteOptions, Writer, ZtFile};

pub fn dir(ver: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/ztensor")
        .join(ver)
}

pub fn expected(ver: &str) -> Value {
    let text = std::fs::read_to_string(dir(ver).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub fn files(ver: &str) -> Vec<(String, Value)> {
    let e = expected(ver);
    let mut v: Vec<(String, Value)> = e["files"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

pub fn open(ver: &str, file: &str) -> tensorsmith::Result<ZtFile> {
    ztensor::open(dir(ver).join(file), &Default::default())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn layout_name(ver: &str, l: &Layout) -> String {
    match (ver, l) {
        (_, Layout::Dense) => "dense".into(),
        ("v2", Layout::SparseCsr) => "zt.sparse_csr/1".into(),
        ("v2", Layout::SparseCoo) => "zt.sparse_coo/1".into(),
        ("v2", Layout::QuantizedGroup) => "zt.quant_group/1".into(),
        ("v2", Layout::Mx) => "zt.mx/1".into(),
        (_, Layout::SparseCsr) => "sparse_csr".into(),
        (_, Layout::SparseCoo) => "sparse_coo".into(),
        (_, Layout::QuantizedGroup) => "quantized_group".into(),
        (_, Layout::Mx) => "mx".into(),
        (_, Layout::Other(s)) => s.to_string(),
        (_, Layout::Ggml(g)) => g.name().to_string(),
    }
}

/// The DType a component of expected.json describes.
fn expected_dtype(ver: &str, c: &Value) -> (DType, Option<String>) {
    let name = c["dtype"].as_str().unwrap();
    let ty = c.get("type").and_then(|t| t.as_str());
    let storage = match ver {
        "v0.1" => DType::from_ztensor_v01_name(name),
        "v1.1" => DType::from_ztensor_v11_name(name),
        _ => DType::from_ztensor_v2_storage(name),
    }
    .unwrap_or_else(|| panic!("dtype {name}"));
    match ty {
        None => (storage, None),
        Some(t) => match DType::from_ztensor_logical(t) {
            Some((l, s)) => {
                assert_eq!(s, storage);
                (l, None)
            }
            None => (storage, Some(t.to_string())),
        },
    }
}

/// Compares an opened valid file with its expected.json entry: names, shapes, layouts,
/// attributes, every part's dtype, placement, digest and decoded bytes.
pub fn check_valid(ver: &str, file: &str, want: &Value) {
    let f = open(ver, file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let ix = f.index();
    let objs = want["objects"].as_array().unwrap();
    assert_eq!(ix.tensors.len(), objs.len(), "{file}: tensor count");
    if let Some(a) = want.get("attributes").filter(|a| !a.is_null()) {
        let got: serde_json::Map<String, Value> = ix
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), meta_json(v)))
            .collect();
        assert_eq!(&Value::Object(got), a, "{file}: attributes");
    } else {
        assert!(ix.metadata.is_empty(), "{file}: attributes");
    }
    for o in objs {
        let name = o["name"].as_str().unwrap();
        let t = f.info(name).unwrap_or_else(|e| panic!("{file}: {e}"));
        let shape: Vec<u64> = o["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(t.shape.as_slice(), &shape[..], "{file}/{name}: shape");
        let layout = o["layout"].as_str().unwrap_or("dense");
        assert_eq!(layout_name(ver, &t.layout), layout, "{file}/{name}: layout");
        if let Some(a) = o.get("attributes").filter(|a| !a.is_null()) {
            let got: serde_json::Map<String, Value> = t
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), meta_json(v)))
                .collect();
            assert_eq!(&Value::Object(got), a, "{file}/{name}: attributes");
        }
        let comps = o["components"].as_object().unwrap();
        assert_eq!(t.parts.len(), comps.len(), "{file}/{name}: part count");
        for (role, c) in comps {
            let p = t
                .part(role)
                .unwrap_or_else(|| panic!("{file}/{name}: no part {role}"));
            let (dt, unknown) = expected_dtype(ver, c);
            assert_eq!(p.dtype, dt, "{file}/{name}/{role}: dtype");
            assert_eq!(
                p.unknown_type().map(str::to_string),
                unknown,
                "{file}/{name}/{role}: type"
            );
            let (off, len) = match c.get("blob") {
                Some(b) => (b[0].as_u64().unwrap(), b[1].as_u64().unwrap()),
                None => (
                    c["offset"].as_u64().unwrap(),
                    c["stored_length"].as_u64().unwrap(),
                ),
            };
            assert_eq!(p.range, off..off + len, "{file}/{name}/{role}: range");
            assert_eq!(
                p.decoded_len,
                c["decoded_length"].as_u64().unwrap(),
                "{file}/{name}/{role}: decoded length"
            );
            let enc = c.get("encoding").and_then(|e| e.as_str()).unwrap_or("raw");
            let want_enc = match enc {
                "raw" => Encoding::Raw,
                "zstd" => Encoding::Zstd,
                "zt.zstd-seekable/1" => Encoding::ZstdSeekable,
                other => Encoding::Other(other.into()),
            };
            assert_eq!(p.encoding, want_enc, "{file}/{name}/{role}: encoding");
            let d = c
                .get("digest")
                .or_else(|| c.get("checksum"))
                .and_then(|d| d.as_str());
            assert_eq!(
                p.digest()
                    .map(|(d, _)| tensorsmith::ztensor::digest::format(&d)),
                d.map(str::to_string),
                "{file}/{name}/{role}: digest"
            );
            let bytes = f
                .part_bytes_verified(name, role)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            if let Some(h) = c.get("hex") {
                assert_eq!(
                    hex(&bytes),
                    h.as_str().unwrap(),
                    "{file}/{name}/{role}: bytes"
                );
            } else {
                let sha = hex(&sha2::Sha256::digest(&bytes));
                assert_eq!(
                    sha,
                    c["sha256"].as_str().unwrap(),
                    "{file}/{name}/{role}: sha256"
                );
            }
            assert_eq!(
                matches!(bytes, Cow::Borrowed(_)),
                p.is_zero_copy(),
                "{file}/{name}/{role}: zero-copy exactly when raw little-endian"
            );
        }
    }
    let report = f.verify();
    assert!(report.is_ok(), "{file}: verify: {:?}", report.failures);
}

/// Writes `f`'s tensors again: same names, layouts, attributes and decoded bytes, each part
/// compressed at `level` where the original was compressed, digests of `digest` kind.
pub fn rewrite(
    f: &ZtFile,
    version: ZtVersion,
    level: i32,
    digest: Option<DigestKind>,
    align: Option<u64>,
) -> Vec<u8> {
    let mut w = Writer::new(
        WriteOptions::new()
            .with_version(version)
            .with_digest(digest)
            .with_align(align),
    );
    if !f.index().metadata.is_empty() {
        w.set_attributes(f.index().metadata.clone()).unwrap();
    }
    for t in &f.index().tensors {
        let parts: Vec<PartData<'_>> = t
            .parts
            .iter()
            .map(|p| {
                let mut d =
                    PartData::new(&p.role, p.dtype, f.part_bytes(&t.name, &p.role).unwrap());
                d.unknown_type = p.unknown_type().map(str::to_string);
                if p.encoding != Encoding::Raw {
                    d.compression = Some(Compression::Zstd { level });
                }
                d
            })
            .collect();
        w.add_object(
            &t.name,
            &t.shape,
            t.layout.clone(),
            t.attributes.to_map(),
            parts,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", t.name));
    }
    w.to_bytes().unwrap()
}

pub fn meta_map(pairs: &[(&str, MetaValue)]) -> std::collections::BTreeMap<String, MetaValue> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Where an invalid vector must fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `open` refuses the file.
    Open,
    /// The file opens; decoding some part (no digest check) fails, and so does verify.
    Read,
    /// The file opens and decodes; `verify` (and verified reads) report the failure.
    Verify,
    /// Checked by a dedicated test (named in the table's comment).
    Elsewhere,
}

pub fn check_invalid(
    ver: &str,
    file: &str,
    stage: Stage,
    rule: fn(&tensorsmith::ErrorKind) -> bool,
) {
    if stage == Stage::Elsewhere {
        return;
    }
    let r = open(ver, file);
    if stage == Stage::Open {
        let e = r.err().unwrap_or_else(|| panic!("{file}: opened"));
        assert!(rule(e.kind()), "{file}: wrong error {:?}", e.kind());
        assert!(
            e.to_string().contains(file),
            "{file}: error names the file: {e}"
        );
        return;
    }
    let f = r.unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut read_err = None;
    let mut verified_err = None;
    for t in &f.index().tensors {
        for p in &t.parts {
            if let Err(e) = f.part_bytes(&t.name, &p.role) {
                read_err.get_or_insert(e);
            }
            if let Err(e) = f.part_bytes_verified(&t.name, &p.role) {
                verified_err.get_or_insert(e);
            }
        }
    }
    match stage {
        Stage::Read => {
            let e = read_err.unwrap_or_else(|| panic!("{file}: read succeeded"));
            assert!(rule(e.kind()), "{file}: wrong read error {:?}", e.kind());
        }
        _ => {
            assert!(
                read_err.is_none(),
                "{file}: unverified read failed: {read_err:?}"
            );
        }
    }
    let report = f.verify();
    assert!(
        report.failures.iter().any(|e| rule(e.kind())),
        "{file}: verify did not report the rule: {:?}",
        report.failures
    );
    if stage == Stage::Verify {
        // Verified reads check digests, not data rules (those need the whole tensor).
        if let Some(e) = verified_err {
            assert!(
                rule(e.kind()) || matches!(e.kind(), tensorsmith::ErrorKind::DigestMismatch { .. }),
                "{file}: wrong verified-read error {:?}",
                e.kind()
            );
        }
    }
}

/// Every valid vector, opened and compared with expected.json.
pub fn check_all_valid(ver: &str) -> usize {
    let mut n = 0;
    for (file, want) in files(ver) {
        if want["valid"] == true {
            check_valid(ver, &file, &want);
            n += 1;
        }
    }
    n
}

/// Every invalid vector is listed in `table` (so a new vector cannot go unchecked).
/// An invalid vector, where it must fail, and the rule it must fail.
pub type Invalid<'a> = (&'a str, Stage, fn(&tensorsmith::ErrorKind) -> bool);

pub fn check_all_invalid(ver: &str, table: &[Invalid<'_>]) {
    let invalid: Vec<String> = files(ver)
        .into_iter()
        .filter(|(_, w)| w["valid"] == false)
        .map(|(f, _)| f)
        .collect();
    let listed: Vec<&str> = table.iter().map(|r| r.0).collect();
    for f in &invalid {
        assert!(listed.contains(&f.as_str()), "{f} has no expected error");
    }
    for (file, stage, rule) in table {
        check_invalid(ver, file, *stage, *rule);
    }
}

/// Deterministic sample bytes for `n` elements of `dtype`.
pub fn sample(dtype: DType, n: u64) -> Vec<u8> {
    let len = dtype.ztensor_v2_bytes(n).unwrap() as usize;
    (0..len)
        .map(|i| match dtype {
            DType::BOOL => (i % 2) as u8,
            DType::F4 if n % 2 == 1 && i == len - 1 => (i as u8 * 7) & 0x0f,
            _ => (i as u8).wrapping_mul(37).wrapping_add(11),
        })
        .collect()
}
