//! `tensorsmith diff --values` error metrics, `--rename`, the llama name map (with the Q/K row
//! permutation of llama.cpp's convert_hf_to_gguf.py undone) and the `--html` page.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use tensorsmith::dtype::DType;
use tensorsmith::ggml_type::GgmlType;
use tensorsmith::gguf::{GgufValue, Writer as GgufWriter};
use tensorsmith::safetensors::Writer;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .output()
        .unwrap()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn safetensors(path: &Path, tensors: &[(&str, &[u64], Vec<f32>)]) {
    let mut w = Writer::new();
    for (name, shape, v) in tensors {
        w.add(name, DType::F32, shape, f32_bytes(v)).unwrap();
    }
    w.write_file(path).unwrap();
}

fn compared<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["values"]["compared"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("{name} not compared: {v:#}"))
}

#[test]
fn metrics_equal_hand_computed_values() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (
        d.path().join("a.safetensors"),
        d.path().join("b.safetensors"),
    );
    safetensors(
        &a,
        &[
            ("w", &[2], vec![3.0, 4.0]),
            ("z", &[2], vec![0.0, 0.0]),
            ("same", &[1], vec![2.0]),
        ],
    );
    safetensors(
        &b,
        &[
            ("w", &[2], vec![3.0, 3.0]),
            ("z", &[2], vec![0.0, 1.0]),
            ("same", &[1], vec![2.0]),
        ],
    );
    let o = run(&["diff", "--values", "--all", "--json", p(&a), p(&b)]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    // a = [3, 4], b = [3, 3]: Σa² = 25, Σb² = 18, Σab = 21, Σ(a-b)² = 1, n = 2.
    let w = compared(&v, "w");
    assert_eq!(w["max_abs_diff"], 1.0);
    assert_eq!(w["rmse"].as_f64().unwrap(), 0.5f64.sqrt());
    assert_eq!(
        w["rel_rmse"].as_f64().unwrap(),
        0.5f64.sqrt() / 12.5f64.sqrt()
    );
    let cos = w["cosine"].as_f64().unwrap();
    assert!((cos - 21.0 / (5.0 * 18f64.sqrt())).abs() < 1e-15, "{cos}");
    let snr = w["snr_db"].as_f64().unwrap();
    assert!((snr - 10.0 * 25f64.log10()).abs() < 1e-12, "{snr}");
    // A all zero: no relative RMSE, no cosine; SNR of nothing against something: -inf.
    let z = compared(&v, "z");
    assert_eq!(z["rel_rmse"], Value::Null);
    assert_eq!(z["cosine"], Value::Null);
    assert_eq!(z["snr_db"], "-inf");
    assert_eq!(z["rmse"].as_f64().unwrap(), 0.5f64.sqrt());
    let s = compared(&v, "same");
    assert_eq!(
        (&s["cosine"], &s["snr_db"], &s["rmse"]),
        (&Value::from(1.0), &Value::from("inf"), &Value::from(0.0))
    );
    // Text names the metrics too.
    let t = String::from_utf8_lossy(&run(&["diff", "--values", p(&a), p(&b)]).stdout).into_owned();
    assert!(
        t.contains("~ values w: 1 of 2 elements differ") && t.contains("cosine 9.8995e-1"),
        "{t}"
    );
}

#[test]
fn rename_rules_pair_tensors_with_other_names() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (
        d.path().join("a.safetensors"),
        d.path().join("b.safetensors"),
    );
    safetensors(
        &a,
        &[
            ("model.h.0.w", &[2], vec![1.0, 2.0]),
            ("model.h.1.w", &[2], vec![1.0, 2.0]),
            ("head", &[1], vec![5.0]),
        ],
    );
    safetensors(
        &b,
        &[
            ("blk.0.weight", &[2], vec![1.0, 2.0]),
            ("blk.1.weight", &[2], vec![1.0, 2.5]),
            ("output", &[1], vec![5.0]),
        ],
    );
    let plain = json(&run(&["diff", "--values", "--json", p(&a), p(&b)]));
    assert_eq!(plain["tensors"]["removed"].as_array().unwrap().len(), 3);
    assert_eq!(plain["values"]["compared"], serde_json::json!([]));
    let o = run(&[
        "diff",
        "--values",
        "--all",
        "--json",
        p(&a),
        p(&b),
        "--rename",
        "model.h.{N}.w=blk.{N}.weight",
        "--rename",
        "head=output",
    ]);
    assert_eq!(o.status.code(), Some(1), "blk.1 differs");
    let v = json(&o);
    assert_eq!(v["tensors"]["removed"], serde_json::json!([]));
    assert_eq!(v["tensors"]["added"], serde_json::json!([]));
    assert_eq!(
        v["tensors"]["changed"],
        serde_json::json!([]),
        "a name alone is no change"
    );
    assert_eq!(compared(&v, "model.h.0.w")["b_name"], "blk.0.weight");
    assert_eq!(compared(&v, "model.h.0.w")["identical"], true);
    assert_eq!(compared(&v, "model.h.1.w")["identical"], false);
    assert_eq!(compared(&v, "model.h.1.w")["layer"], 1);
    assert_eq!(compared(&v, "head")["b_name"], "output");
    // Only the two identical pairs: exit 0.
    let o = run(&[
        "diff",
        "--values",
        p(&a),
        p(&b),
        "--rename",
        "model.h.0.w=blk.0.weight",
        "--rename",
        "head=output",
        "--rename",
        "model.h.1.w=nothing",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "model.h.1.w and blk.1.weight unpaired"
    );
}

/// convert_hf_to_gguf.py's `permute`: reshape(g, 2, rows/g/2, cols).swapaxes(1, 2), as index
/// arithmetic: row (g, j, i) of the Hugging Face tensor goes to row (g, i, j).
fn permute(rows: &[Vec<f32>], groups: usize) -> Vec<Vec<f32>> {
    let h = rows.len() / groups / 2;
    let mut out = vec![Vec::new(); rows.len()];
    for g in 0..groups {
        for j in 0..2 {
            for i in 0..h {
                out[g * 2 * h + i * 2 + j] = rows[g * 2 * h + j * h + i].clone();
            }
        }
    }
    out
}

fn matrix(rows: usize, cols: usize, seed: f32) -> Vec<Vec<f32>> {
    (0..rows)
        .map(|r| {
            (0..cols)
                .map(|c| seed + (r * cols + c) as f32 * 0.25)
                .collect()
        })
        .collect()
}

fn flat(m: &[Vec<f32>]) -> Vec<f32> {
    m.concat()
}

/// A tiny llama: 2 layers; 4 heads of dimension 2 for Q (8 rows), 2 KV heads for K.
fn llama_pair(dir: &Path, heads: bool) -> (std::path::PathBuf, std::path::PathBuf) {
    let (hf, gg) = (dir.join("hf.safetensors"), dir.join("llama.gguf"));
    let cols = 4;
    let mut st = Writer::new();
    let mut g = GgufWriter::new();
    g.set("general.architecture", GgufValue::String("llama".into()));
    if heads {
        g.set("llama.attention.head_count", GgufValue::U32(2));
        g.set("llama.attention.head_count_kv", GgufValue::U32(1));
    }
    for layer in 0..2 {
        let q = matrix(8, cols, layer as f32);
        let k = matrix(8, cols, 10.0 + layer as f32);
        let up = matrix(6, cols, 20.0 + layer as f32);
        let norm = vec![vec![1.0 + layer as f32], vec![2.0], vec![3.0], vec![4.0]];
        let hf_names = [
            format!("model.layers.{layer}.self_attn.q_proj.weight"),
            format!("model.layers.{layer}.self_attn.k_proj.weight"),
            format!("model.layers.{layer}.mlp.up_proj.weight"),
            format!("model.layers.{layer}.input_layernorm.weight"),
        ];
        let gg_names = [
            format!("blk.{layer}.attn_q.weight"),
            format!("blk.{layer}.attn_k.weight"),
            format!("blk.{layer}.ffn_up.weight"),
            format!("blk.{layer}.attn_norm.weight"),
        ];
        let stored = [permute(&q, 2), permute(&k, 1), up.clone(), norm.clone()];
        for (i, m) in [q, k, up, norm].iter().enumerate() {
            let shape = if i == 3 {
                vec![4]
            } else {
                vec![m.len() as u64, cols as u64]
            };
            st.add(&hf_names[i], DType::F32, &shape, f32_bytes(&flat(m)))
                .unwrap();
            let ne: tensorsmith::index::Shape = shape.iter().rev().copied().collect();
            g.add(
                &gg_names[i],
                ne,
                GgmlType::from_dtype(DType::F32).unwrap(),
                f32_bytes(&flat(&stored[i])),
            )
            .unwrap();
        }
    }
    st.add(
        "model.embed_tokens.weight",
        DType::F32,
        &[3, 4],
        f32_bytes(&[0.5; 12]),
    )
    .unwrap();
    g.add(
        "token_embd.weight",
        [4u64, 3].into_iter().collect(),
        GgmlType::from_dtype(DType::F32).unwrap(),
        f32_bytes(&[0.5; 12]),
    )
    .unwrap();
    st.write_file(&hf).unwrap();
    g.write_file(&gg).unwrap();
    (hf, gg)
}

#[test]
fn permute_moves_rows_as_the_converter_does() {
    // One group of 4 rows: (1, 2, 2) swapped to (1, 2, 2): rows 0, 2, 1, 3.
    let m: Vec<Vec<f32>> = (0..4).map(|r| vec![r as f32]).collect();
    assert_eq!(flat(&permute(&m, 1)), [0.0, 2.0, 1.0, 3.0]);
    // Two groups of 4: each group on its own.
    let m: Vec<Vec<f32>> = (0..8).map(|r| vec![r as f32]).collect();
    assert_eq!(
        flat(&permute(&m, 2)),
        [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
    );
}

#[test]
fn llama_map_pairs_hf_and_gguf_names_and_undoes_the_permutation() {
    let d = tempfile::tempdir().unwrap();
    let (hf, gg) = llama_pair(d.path(), true);
    for (x, y) in [(&hf, &gg), (&gg, &hf)] {
        let o = run(&["diff", "--values", "--all", "--json", p(x), p(y)]);
        let v = json(&o);
        assert_eq!(v["values"]["name_map"], "llama");
        let c = v["values"]["compared"].as_array().unwrap();
        assert_eq!(c.len(), 9, "{v:#}");
        assert!(c.iter().all(|c| c["identical"] == true), "{v:#}");
        assert_eq!(v["values"]["not_compared"], serde_json::json!([]));
        assert_eq!(v["tensors"]["removed"], serde_json::json!([]));
        assert_eq!(v["tensors"]["added"], serde_json::json!([]));
        let reordered = c.iter().filter(|c| c["reordered"] == true).count();
        assert_eq!(reordered, 4, "Q and K of both layers");
    }
    let v = json(&run(&[
        "diff",
        "--values",
        "--all",
        "--json",
        p(&hf),
        p(&gg),
    ]));
    let q = compared(&v, "model.layers.1.self_attn.q_proj.weight");
    assert_eq!(q["b_name"], "blk.1.attn_q.weight");
    assert_eq!(q["role"], "self_attn.q_proj");
    assert_eq!(q["layer"], 1);
    // Without the map nothing pairs; with names paired but rows left permuted, Q and K differ.
    let v = json(&run(&[
        "diff",
        "--values",
        "--json",
        "--name-map",
        "none",
        p(&hf),
        p(&gg),
    ]));
    assert_eq!(v["values"]["compared"], serde_json::json!([]));
    let rules: Vec<String> = [
        "model.layers.{N}.self_attn.q_proj.weight=blk.{N}.attn_q.weight",
        "model.layers.{N}.self_attn.k_proj.weight=blk.{N}.attn_k.weight",
    ]
    .iter()
    .flat_map(|r| ["--rename".to_owned(), r.to_string()])
    .collect();
    let mut args = vec![
        "diff",
        "--values",
        "--json",
        "--name-map",
        "none",
        p(&hf),
        p(&gg),
    ];
    args.extend(rules.iter().map(String::as_str));
    let v = json(&run(&args));
    assert_eq!(
        v["values"]["compared"].as_array().unwrap().len(),
        4,
        "{v:#}"
    );
    // Head counts missing: Q and K are named, not compared.
    let d2 = tempfile::tempdir().unwrap();
    let (hf, gg) = llama_pair(d2.path(), false);
    let v = json(&run(&["diff", "--values", "--json", p(&hf), p(&gg)]));
    let n = v["values"]["not_compared"].as_array().unwrap();
    assert_eq!(n.len(), 4, "{v:#}");
    assert!(n[0]["reason"]
        .as_str()
        .unwrap()
        .contains("llama.attention.head_count"));
}

#[test]
fn contradictions_and_bad_rules_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.safetensors");
    safetensors(&a, &[("w", &[1], vec![1.0])]);
    let page = d.path().join("p.html");
    for (args, says) in [
        (vec!["diff", p(&a), p(&a), "--html", p(&page)], "--values"),
        (
            vec!["diff", "--values", p(&a), p(&a), "--rename", "nothing"],
            "'='",
        ),
        (
            vec!["diff", "--values", p(&a), p(&a), "--rename", "a=*"],
            "TO",
        ),
        (
            vec!["diff", "--values", p(&a), p(&a), "--name-map", "llama"],
            "GGUF names",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
    assert!(!page.exists());
}

#[test]
fn the_page_is_self_contained_and_lists_every_pair() {
    let d = tempfile::tempdir().unwrap();
    let (hf, gg) = llama_pair(d.path(), true);
    let page = d.path().join("diff.html");
    let o = run(&[
        "diff",
        "--values",
        "--json",
        "--html",
        p(&page),
        p(&hf),
        p(&gg),
    ]);
    assert_eq!(o.status.code(), Some(1), "metadata differs");
    let printed = json(&o);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("default-src 'none'"));
    assert!(
        !html.contains("https://")
            && !html.contains("<script src")
            && !html.contains("<link rel=\"stylesheet\"")
    );
    assert!(
        html.match_indices("http://")
            .all(|(i, _)| html[i..].starts_with("http://www.w3.org/2000/svg")),
        "only the SVG namespace"
    );
    let start = html.find("id=\"diff-data\">").unwrap() + "id=\"diff-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let embedded: Value = serde_json::from_str(&html[start..end]).unwrap();
    assert_eq!(embedded, printed, "--json prints what the page holds");
    let c = embedded["values"]["compared"].as_array().unwrap();
    assert_eq!(c.len(), 9, "every pair, identical ones too");
    // Without --json: the text, and the page all the same.
    std::fs::remove_file(&page).unwrap();
    let o = run(&["diff", "--values", "--html", p(&page), p(&hf), p(&gg)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(page.exists());
}
