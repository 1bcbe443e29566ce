//! config.json's hyper-parameters as the `{arch}.*` keys llama.cpp's converter writes for the
//! Llama family (its `TextModel.set_gguf_parameters`, then the architecture's own keys), in
//! its order, with its choice among the names configs use for the same thing.

use super::refuse;
use crate::error::Result;
use crate::gguf::GgufValue;
use serde_json::{Map, Value};

/// An architecture we convert: the llama.cpp name and whether Q/K rows are permuted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Arch {
    pub name: &'static str,
    pub undo_permute: bool,
}

/// Hugging Face architecture names we convert, and how.
const ARCHES: &[(&str, Arch)] = &[
    (
        "LlamaForCausalLM",
        Arch {
            name: "llama",
            undo_permute: true,
        },
    ),
    (
        "LLaMAForCausalLM",
        Arch {
            name: "llama",
            undo_permute: true,
        },
    ),
    (
        "MistralForCausalLM",
        Arch {
            name: "llama",
            undo_permute: true,
        },
    ),
    (
        "MixtralForCausalLM",
        Arch {
            name: "llama",
            undo_permute: true,
        },
    ),
    (
        "Qwen2ForCausalLM",
        Arch {
            name: "qwen2",
            undo_permute: false,
        },
    ),
    (
        "Qwen2MoeForCausalLM",
        Arch {
            name: "qwen2moe",
            undo_permute: false,
        },
    ),
    (
        "Qwen3ForCausalLM",
        Arch {
            name: "qwen3",
            undo_permute: false,
        },
    ),
    (
        "Qwen3MoeForCausalLM",
        Arch {
            name: "qwen3moe",
            undo_permute: false,
        },
    ),
];

pub(crate) fn arch_of(path: &str, config: &Value) -> Result<Arch> {
    let name = config
        .get("architectures")
        .and_then(|a| a.get(0))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            refuse(
                path,
                "config.json names no architecture (\"architectures\")",
            )
        })?;
    ARCHES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, a)| *a)
        .ok_or_else(|| {
            let known: Vec<&str> = ARCHES.iter().map(|(n, _)| *n).collect();
            refuse(
                path,
                &format!(
                    "architecture {name} is not one we convert (we convert {})",
                    known.join(", ")
                ),
            )
        })
}

/// config.json with `text_config` moved to the top, as the reference reads it.
pub(crate) fn flattened(config: &Value) -> Map<String, Value> {
    let mut m = config.as_object().cloned().unwrap_or_default();
    if let Some(Value::Object(t)) = config.get("text_config") {
        for (k, v) in t {
            m.insert(k.clone(), v.clone());
        }
    }
    m
}

/// The first of `keys` that config.json has (its value may be null), as the reference's
/// `find_hparam`.
pub(crate) fn find<'a>(h: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|k| h.get(*k)).filter(|v| !v.is_null())
}

fn uint(path: &str, key: &str, v: &Value) -> Result<u32> {
    v.as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| refuse(path, &format!("config.json's {key} is {v}, not a count")))
}

fn float(path: &str, key: &str, v: &Value) -> Result<f32> {
    v.as_f64()
        .map(|x| x as f32)
        .ok_or_else(|| refuse(path, &format!("config.json's {key} is {v}, not a number")))
}

/// The rope parameters: `rope_parameters` or `rope_scaling`, with `rope_theta` (and the type)
/// mirrored in as the reference does.
pub(crate) fn rope_parameters(h: &Map<String, Value>) -> Map<String, Value> {
    let mut r = match h.get("rope_parameters").or_else(|| h.get("rope_scaling")) {
        Some(Value::Object(o)) => o.clone(),
        _ => Map::new(),
    };
    if !r.contains_key("full_attention") && !r.contains_key("sliding_attention") {
        let theta = find(
            h,
            &[
                "global_rope_theta",
                "rope_global_theta",
                "rope_theta_global",
                "rope_theta",
                "rotary_emb_base",
            ],
        );
        if let (false, Some(t)) = (r.contains_key("rope_theta"), theta) {
            r.insert("rope_theta".into(), t.clone());
        }
        if !r.contains_key("rope_type") {
            if let Some(t) = r.get("type").cloned().filter(|t| !t.is_null()) {
                r.insert("rope_type".into(), t);
            }
        }
        for k in ["partial_rotary_factor", "original_max_position_embeddings"] {
            if !r.contains_key(k) {
                let keys: &[&str] = if k == "partial_rotary_factor" {
                    &["partial_rotary_factor", "rope_pct", "rope_percent"]
                } else {
                    &["original_max_position_embeddings"]
                };
                if let Some(v) = find(h, keys) {
                    r.insert(k.into(), v.clone());
                }
            }
        }
    }
    r
}

/// The `{arch}.*` keys and `general.file_type` (`file_type`), in the reference's order.
pub(crate) fn keys(
    path: &str,
    arch: Arch,
    h: &Map<String, Value>,
    block_count: u32,
    file_type: u32,
) -> Result<Vec<(String, GgufValue)>> {
    let a = arch.name;
    let mut out: Vec<(String, GgufValue)> = Vec::new();
    let u = |k: &str, v: u32, out: &mut Vec<(String, GgufValue)>| {
        out.push((format!("{a}.{k}"), GgufValue::U32(v)));
    };
    u("block_count", block_count, &mut out);
    let counts: [(&str, &[&str]); 5] = [
        (
            "context_length",
            &[
                "max_position_embeddings",
                "n_ctx",
                "n_positions",
                "max_length",
                "max_sequence_length",
                "model_max_length",
            ],
        ),
        ("embedding_length", &["hidden_size", "n_embd", "dim"]),
        (
            "feed_forward_length",
            &[
                "prefix_dense_intermediate_size",
                "dense_intermediate_size",
                "intermediate_size",
                "n_inner",
                "hidden_dim",
            ],
        ),
        (
            "attention.head_count",
            &["num_attention_heads", "n_head", "n_heads"],
        ),
        (
            "attention.head_count_kv",
            &["num_key_value_heads", "n_kv_heads"],
        ),
    ];
    for (k, names) in counts {
        if let Some(v) = find(h, names) {
            u(k, uint(path, names[0], v)?, &mut out);
        }
    }
    if h.get("is_causal") == Some(&Value::Bool(false)) {
        out.push((format!("{a}.attention.causal"), GgufValue::Bool(false)));
    }
    let rope = rope_parameters(h);
    let rp = match rope.get("full_attention") {
        Some(Value::Object(o)) => o.clone(),
        _ => rope.clone(),
    };
    if let Some(t) = rp.get("rope_type").and_then(Value::as_str) {
        let factor = rp.get("factor").filter(|f| !f.is_null());
        let s = |k: &str, v: &str, out: &mut Vec<(String, GgufValue)>| {
            out.push((format!("{a}.{k}"), GgufValue::String(v.into())));
        };
        match (t, factor) {
            ("linear", Some(f)) => {
                s("rope.scaling.type", "linear", &mut out);
                out.push((
                    format!("{a}.rope.scaling.factor"),
                    GgufValue::F32(float(path, "factor", f)?),
                ));
            }
            ("yarn", Some(f)) => {
                s("rope.scaling.type", "yarn", &mut out);
                out.push((
                    format!("{a}.rope.scaling.factor"),
                    GgufValue::F32(float(path, "factor", f)?),
                ));
                let orig = rp.get("original_max_position_embeddings").ok_or_else(|| {
                    refuse(
                        path,
                        "yarn rope scaling without original_max_position_embeddings",
                    )
                })?;
                out.push((
                    format!("{a}.rope.scaling.original_context_length"),
                    GgufValue::U32(uint(path, "original_max_position_embeddings", orig)?),
                ));
                let opt = [
                    ("extrapolation_factor", "rope.scaling.yarn_ext_factor"),
                    ("attention_factor", "rope.scaling.yarn_attn_factor"),
                    ("beta_fast", "rope.scaling.yarn_beta_fast"),
                    ("beta_slow", "rope.scaling.yarn_beta_slow"),
                ];
                for (k, key) in opt {
                    let mut v = rp.get(k).filter(|v| !v.is_null());
                    if k == "attention_factor" && v.is_none() {
                        v = rp.get("attn_factor").filter(|v| !v.is_null());
                    }
                    if let Some(v) = v {
                        out.push((format!("{a}.{key}"), GgufValue::F32(float(path, k, v)?)));
                    }
                }
            }
            ("su" | "longrope", _) => s("rope.scaling.type", "longrope", &mut out),
            _ => {} // default, dynamic, llama3 (a tensor): no key
        }
    }
    if let Some(t) = rp.get("rope_theta").filter(|v| !v.is_null()) {
        out.push((
            format!("{a}.rope.freq_base"),
            GgufValue::F32(float(path, "rope_theta", t)?),
        ));
    }
    let fk = |k: &str, keys: &[&str]| find(h, keys).map(|v| (k.to_string(), v.clone()));
    for (k, v) in [
        fk(
            "attention.layer_norm_rms_epsilon",
            &["rms_norm_eps", "norm_eps"],
        ),
        fk(
            "attention.layer_norm_epsilon",
            &["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"],
        ),
    ]
    .into_iter()
    .flatten()
    {
        out.push((format!("{a}.{k}"), GgufValue::F32(float(path, &k, &v)?)));
    }
    for (k, keys) in [
        (
            "expert_count",
            &["num_local_experts", "num_experts", "n_routed_experts"][..],
        ),
        (
            "expert_used_count",
            &[
                "num_experts_per_tok",
                "num_experts_per_token",
                "top_k_experts",
            ][..],
        ),
    ] {
        if let Some(v) = find(h, keys) {
            u(k, uint(path, keys[0], v)?, &mut out);
        }
    }
    if let Some(hd) = h.get("head_dim").filter(|v| !v.is_null()) {
        let hd = uint(path, "head_dim", hd)?;
        u("attention.key_length", hd, &mut out);
        u("attention.value_length", hd, &mut out);
    }
    out.push(("general.file_type".into(), GgufValue::U32(file_type)));
    if matches!(arch.name, "qwen2moe" | "qwen3moe") {
        // The reference's Qwen2MoeModel (Qwen3MoeModel is one) adds these after the rest.
        for (k, key) in [
            ("expert_feed_forward_length", "moe_intermediate_size"),
            (
                "expert_shared_feed_forward_length",
                "shared_expert_intermediate_size",
            ),
        ] {
            if let Some(v) = h.get(key).filter(|v| !v.is_null()) {
                u(k, uint(path, key, v)?, &mut out);
            }
        }
    }
    if arch.name == "llama" {
        let vocab = h
            .get("vocab_size")
            .ok_or_else(|| refuse(path, "config.json has no vocab_size"))?;
        u("vocab_size", uint(path, "vocab_size", vocab)?, &mut out);
        let dim = match h.get("head_dim").filter(|v| !v.is_null()) {
            Some(d) => uint(path, "head_dim", d)?,
            None => {
                let e = h
                    .get("hidden_size")
                    .map(|v| uint(path, "hidden_size", v))
                    .transpose()?;
                let n = h
                    .get("num_attention_heads")
                    .map(|v| uint(path, "num_attention_heads", v))
                    .transpose()?;
                match (e, n) {
                    (Some(e), Some(n)) if n > 0 => e / n,
                    _ => {
                        return Err(refuse(
                            path,
                            "config.json has no hidden_size and num_attention_heads",
                        ))
                    }
                }
            }
        };
        u("rope.dimension_count", dim, &mut out);
    }
    Ok(out)
}
