//! `tensorsmith report`: the page is written, self-contained, and its embedded JSON lists
//! every tensor; names and metadata cannot break out of the page; bad input exits 2 and
//! writes nothing.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

const DATA_OPEN: &str = "<script type=\"application/json\" id=\"report-data\">";

/// The page's embedded JSON, parsed.
fn embedded(page: &str) -> Value {
    let start = page.find(DATA_OPEN).expect("data element") + DATA_OPEN.len();
    let end = start + page[start..].find("</script>").expect("end of data");
    serde_json::from_str(&page[start..end]).expect("embedded JSON parses")
}

/// A llama-style checkpoint of `layers` layers, with a hostile name and metadata.
fn llama(path: &Path, layers: usize) -> Vec<String> {
    let mut w = Writer::new();
    let mut names = Vec::new();
    let mut add = |w: &mut Writer, name: String, shape: &[u64]| {
        let n = shape.iter().product::<u64>() as usize * 2;
        w.add(&name, DType::BF16, shape, vec![0u8; n]).unwrap();
        names.push(name);
    };
    add(&mut w, "model.embed_tokens.weight".into(), &[64, 16]);
    for l in 0..layers {
        for p in ["q_proj", "k_proj", "v_proj", "o_proj"] {
            add(
                &mut w,
                format!("model.layers.{l}.self_attn.{p}.weight"),
                &[16, 16],
            );
        }
        for p in ["gate_proj", "up_proj", "down_proj"] {
            add(
                &mut w,
                format!("model.layers.{l}.mlp.{p}.weight"),
                &[32, 16],
            );
        }
        add(
            &mut w,
            format!("model.layers.{l}.input_layernorm.weight"),
            &[16],
        );
    }
    add(&mut w, "model.norm.weight".into(), &[16]);
    add(&mut w, "lm_head.weight".into(), &[64, 16]);
    add(
        &mut w,
        "odd.</script><script>alert(1)</script>".into(),
        &[2],
    );
    w.metadata(BTreeMap::from([
        ("format".to_string(), "pt".to_string()),
        (
            "note".to_string(),
            "</script><!-- \u{2028}\u{2029} <img src=\"http://x/y.png\">".to_string(),
        ),
    ]));
    w.write_file(path).unwrap();
    names
}

#[test]
fn the_page_is_self_contained_and_lists_every_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("llama.safetensors");
    let page = dir.path().join("llama.html");
    let names = llama(&model, 12);
    let o = run(&[
        "report",
        model.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
        "--title",
        "Tiny <llama> & co",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>Tiny &lt;llama&gt; &amp; co</title>"));
    // Nothing fetched at view time: no remote src or href, and a policy that allows none.
    for attr in ["src=", "href="] {
        for q in ["\"", "'", ""] {
            for scheme in ["http://", "https://", "//"] {
                let bad = format!("{attr}{q}{scheme}");
                assert!(!html.contains(&bad), "{bad} in the page");
            }
        }
    }
    assert!(html.contains("default-src 'none'"));
    // The hostile name and metadata stay inside the data element.
    assert_eq!(html.matches("</script>").count(), 2);
    assert!(!html.contains('\u{2028}') && !html.contains('\u{2029}'));
    let data = embedded(&html);
    assert_eq!(data["schema"], "tensorsmith.report/1");
    assert_eq!(data["title"], "Tiny <llama> & co");
    assert_eq!(data["format"], "safetensors");
    assert_eq!(data["tensor_count"], names.len());
    let rows = data["tensors"].as_array().unwrap();
    let mut got: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let mut want: Vec<&str> = names.iter().map(String::as_str).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    let q = rows
        .iter()
        .find(|r| r["name"] == "model.layers.11.self_attn.q_proj.weight")
        .unwrap();
    assert_eq!(q["layer"], 11);
    assert_eq!(q["dtype"], "BF16");
    assert_eq!(q["parameters"], 256);
    assert_eq!(q["bytes"], 512);
    assert_eq!(q["bits_per_weight"], 16.0);
    assert_eq!(q["shape"], serde_json::json!([16, 16]));
    let embed = rows
        .iter()
        .find(|r| r["name"] == "model.embed_tokens.weight")
        .unwrap();
    assert!(embed["layer"].is_null());
    assert!(embed.get("stats").is_none());
    assert!(data["metadata"]["note"]
        .as_str()
        .unwrap()
        .starts_with("</script><!-- \u{2028}"));
}

#[test]
fn gguf_block_types_show_their_bits_per_weight() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/gguf/every_type.gguf"
    );
    let o = run(&["report", model, "-o", page.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let data = embedded(&std::fs::read_to_string(&page).unwrap());
    assert_eq!(data["format"], "gguf");
    let index = tensorsmith::open(model, &Default::default()).unwrap().index;
    let rows = data["tensors"].as_array().unwrap();
    assert_eq!(rows.len(), index.tensors.len());
    for (r, t) in rows.iter().zip(&index.tensors) {
        assert_eq!(r["name"], t.name.as_str());
        assert_eq!(r["dtype"], t.type_name());
    }
    let q8 = rows
        .iter()
        .find(|r| r["dtype"] == "q8_0")
        .expect("a q8_0 tensor");
    assert_eq!(q8["bits_per_weight"], 8.5);
    assert_eq!(q8["layout"], "ggml:q8_0");
    assert_eq!(q8["shape"], serde_json::json!([4, 64]));
    let q4 = rows
        .iter()
        .find(|r| r["dtype"] == "q4_0")
        .expect("a q4_0 tensor");
    assert_eq!(q4["bits_per_weight"], 4.5);
    assert_eq!(q4["parameters"], 256);
    let dtypes = data["dtypes"].as_array().unwrap();
    assert!(dtypes
        .iter()
        .any(|d| d["dtype"] == "q4_0" && d["bits_per_weight"] == 4.5));
}

#[test]
fn a_vocabulary_in_the_metadata_is_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/gguf/vocab_150k.gguf"
    );
    let o = run(&["report", model, "-o", page.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let len = std::fs::metadata(&page).unwrap().len();
    assert!(len < 200_000, "{len} bytes");
    let data = embedded(&std::fs::read_to_string(&page).unwrap());
    let cut = data["metadata"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_str)
        .any(|v| v.ends_with(" items)"));
    assert!(cut);
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.safetensors");
    std::fs::write(&junk, b"\xff\xff\xff\xff\xff\xff\xff\x7fnot a header").unwrap();
    let page = dir.path().join("out.html");
    let missing = dir.path().join("missing.safetensors");
    for input in [&junk, &missing] {
        let o = run(&[
            "report",
            input.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{input:?}");
        assert!(String::from_utf8_lossy(&o.stderr).starts_with("tensorsmith: "));
        assert!(!page.exists());
    }
    // A page already there stays as it was.
    std::fs::write(&page, b"old page").unwrap();
    let o = run(&[
        "report",
        junk.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read(&page).unwrap(), b"old page");
    // Nothing else left in the folder (no temporary file).
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["junk.safetensors", "out.html"]);
    // An output folder that does not exist is an error too.
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/gguf/every_type.gguf"
    );
    let nowhere = dir.path().join("no/such/dir/p.html");
    let o = run(&["report", model, "-o", nowhere.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!dir.path().join("no").exists());
    // -o is required.
    let o = run(&["report", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn with_stats_every_row_carries_what_stats_measures() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    let page = dir.path().join("m.html");
    let values: Vec<u8> = [1.0f32, f32::NAN, -2.0, 0.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut w = Writer::new();
    w.add("a.w", DType::F32, &[4], values).unwrap();
    w.add("b.w", DType::F32, &[2], vec![0u8; 8]).unwrap();
    w.write_file(&model).unwrap();
    let (model, page) = (model.to_str().unwrap(), page.to_str().unwrap());

    let o = run(&["report", model, "-o", page]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plain = embedded(&std::fs::read_to_string(page).unwrap());
    assert!(plain["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r.get("stats").is_none()));

    let o = run(&["report", model, "-o", page, "--stats"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let data = embedded(&std::fs::read_to_string(page).unwrap());
    let o = run(&["stats", "--json", model]);
    let measured: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(data["stats_schema"], measured["schema"]);
    let rows = data["tensors"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, m) in rows.iter().zip(measured["tensors"].as_array().unwrap()) {
        assert_eq!(row["name"], m["name"]);
        assert_eq!(row["stats"], *m);
    }
    assert_eq!(rows[0]["stats"]["nan"], 1);
    assert_eq!(rows[0]["stats"]["min"], -2.0);
    assert_eq!(rows[1]["stats"]["zeros"], 2);
}
