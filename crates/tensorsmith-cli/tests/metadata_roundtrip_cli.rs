//! File metadata through conversions: safetensors -> GGUF -> safetensors gives back the
//! original `__metadata__` keys (`format: pt`, which transformers checks), zTensor -> GGUF ->
//! zTensor likewise; a checkpoint's write id never reaches GGUF or zTensor; a GGUF key present
//! both as itself and under the output's prefix with different values, and `convert --append`
//! of a key the file has with another value, are errors naming the key.

#[path = "support/cli.rs"]
mod cli;
use cli::{p, run};
use std::collections::BTreeMap;
use std::path::Path;
use tensorsmith::dtype::DType;
use tensorsmith::index::MetaValue;
use tensorsmith::safetensors::Writer;

fn ok(args: &[&str]) {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn fails(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(2), "{args:?} should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn model(path: &Path, name: &str, meta: &[(&str, &str)]) {
    let mut w = Writer::new();
    w.add(name, DType::F32, &[2, 4], vec![0u8; 32]).unwrap();
    w.metadata(
        meta.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    w.write_file(path).unwrap();
}

fn metadata(path: &Path) -> BTreeMap<String, MetaValue> {
    tensorsmith::open(p(path), &tensorsmith::OpenOptions::new())
        .unwrap()
        .index
        .metadata
        .clone()
}

fn text(pairs: &[(&str, &str)]) -> BTreeMap<String, MetaValue> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), MetaValue::Str(v.to_string())))
        .collect()
}

#[test]
fn safetensors_through_gguf_comes_back_with_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (a, g, b) = (
        dir.path().join("a.safetensors"),
        dir.path().join("m.gguf"),
        dir.path().join("b.safetensors"),
    );
    let meta = [("format", "pt"), ("x", "1")];
    model(&a, "w", &meta);
    ok(&["convert", p(&a), p(&g)]);
    assert!(metadata(&g).contains_key("safetensors.metadata.format"));
    ok(&["convert", p(&g), p(&b)]);
    assert_eq!(metadata(&b), text(&meta));

    // zTensor the same way.
    let (z, gz, z2) = (
        dir.path().join("a.zt"),
        dir.path().join("z.gguf"),
        dir.path().join("b.zt"),
    );
    ok(&["convert", p(&a), p(&z)]);
    ok(&["convert", p(&z), p(&gz)]);
    assert!(metadata(&gz).contains_key("ztensor.metadata.format"));
    ok(&["convert", p(&gz), p(&z2)]);
    assert_eq!(metadata(&z2), text(&meta));
}

#[test]
fn a_key_given_twice_with_different_values_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (a, g, b) = (
        dir.path().join("a.safetensors"),
        dir.path().join("m.gguf"),
        dir.path().join("b.safetensors"),
    );
    model(&a, "w", &[("format", "pt")]);
    ok(&["convert", p(&a), p(&g), "--set", "format=str:np"]);
    let err = fails(&["convert", p(&g), p(&b)]);
    assert!(err.contains(p(&g)), "{err}");
    assert!(err.contains("metadata key 'format'"), "{err}");
    assert!(err.contains("safetensors.metadata.format"), "{err}");
    assert!(!b.exists());
}

#[test]
fn the_write_id_of_a_checkpoint_is_not_carried() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.safetensors");
    model(&a, "w", &[("format", "pt")]);
    let shards = dir.path().join("ck");
    std::fs::create_dir(&shards).unwrap();
    let index = shards.join("model.safetensors");
    ok(&["convert", p(&a), p(&index), "--shard-size", "1KB"]);
    let ck = shards.join("model.safetensors.index.json");
    assert!(metadata(&ck).contains_key("tensorsmith.write_id"));
    for out in ["m.gguf", "m.zt"] {
        let out = dir.path().join(out);
        ok(&["convert", p(&ck), p(&out)]);
        let keys: Vec<String> = metadata(&out).into_keys().collect();
        assert!(
            keys.iter().all(|k| !k.contains("write_id")),
            "{out:?}: {keys:?}"
        );
    }
}

#[test]
fn append_refuses_a_key_the_file_has_with_another_value() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c, z) = (
        dir.path().join("a.safetensors"),
        dir.path().join("b.safetensors"),
        dir.path().join("c.safetensors"),
        dir.path().join("m.zt"),
    );
    model(&a, "w", &[("format", "pt")]);
    model(&b, "v", &[("format", "np")]);
    model(&c, "u", &[("format", "pt"), ("y", "2")]);
    ok(&["convert", p(&a), p(&z)]);
    let before = std::fs::read(&z).unwrap();
    let err = fails(&["convert", p(&b), p(&z), "--append"]);
    assert!(err.contains(p(&z)), "{err}");
    assert!(err.contains("metadata key 'format'"), "{err}");
    assert!(err.contains(r#""pt""#) && err.contains(r#""np""#), "{err}");
    assert_eq!(std::fs::read(&z).unwrap(), before, "the file was changed");
    // The same value is no conflict; new keys are added.
    ok(&["convert", p(&c), p(&z), "--append"]);
    assert_eq!(metadata(&z), text(&[("format", "pt"), ("y", "2")]));
}

#[test]
fn a_metadata_key_ztensor_v2_cannot_name_is_refused_as_a_metadata_key() {
    let dir = tempfile::tempdir().unwrap();
    let (a, z) = (dir.path().join("a.safetensors"), dir.path().join("a.zt"));
    model(&a, "w", &[("", "empty key"), ("format", "pt")]);
    let err = fails(&["convert", p(&a), p(&z)]);
    assert!(
        err.contains("file attribute (metadata key)") && err.contains("must not be empty"),
        "{err}"
    );
    assert!(!z.exists());
    // zTensor v1.1 has no such rule: the key is carried.
    ok(&["convert", p(&a), p(&z), "--zt-version", "1.1"]);
    assert_eq!(metadata(&z), text(&[("", "empty key"), ("format", "pt")]));
}
