//! The stable JSON form of a diff (`tensorsmith.diff/1`), shared by the CLI's `--json`, the
//! diff page and the Python package. Fields are only ever added: each compared tensor carries
//! `b_name` (when paired under another name), `rmse`, `rel_rmse`, `cosine`, `snr_db` (null
//! where undefined; `"inf"`/`"-inf"` for infinite SNR), `reordered`, `layer` and `role`;
//! `values.name_map` names the name map used (null: none).

use crate::index::MetaValue;
use crate::ops::diff::metrics::Metrics;
use crate::ops::diff::{Diff, TensorDesc};
use crate::ops::inspect::meta_json;
use crate::ops::report::data::layer_of;
use serde_json::{json, Value};

/// Version tag of the JSON form.
pub const DIFF_SCHEMA: &str = "tensorsmith.diff/1";

fn desc_json(t: &TensorDesc) -> Value {
    json!({"name": t.name, "dtype": t.dtype, "shape": t.shape, "byte_length": t.byte_length})
}

/// The diff `d` of the models named `a` and `b` (as shown to people: paths or URLs) in the
/// `tensorsmith.diff/1` form.
pub fn to_json(a: &str, b: &str, d: &Diff) -> Value {
    let meta = |v: &[(String, MetaValue)]| -> Value {
        v.iter()
            .map(|(k, x)| json!({"key": k, "value": meta_json(x)}))
            .collect()
    };
    json!({
        "schema": DIFF_SCHEMA,
        "a": a,
        "b": b,
        "same": d.is_same(),
        "tensors": {
            "added": d.added.iter().map(desc_json).collect::<Vec<_>>(),
            "removed": d.removed.iter().map(desc_json).collect::<Vec<_>>(),
            "changed": d.changed.iter().map(|c| json!({
                "name": c.a.name, "fields": c.fields(), "a": desc_json(&c.a), "b": desc_json(&c.b),
            })).collect::<Vec<_>>(),
        },
        "metadata": {
            "added": meta(&d.meta_added),
            "removed": meta(&d.meta_removed),
            "changed": d.meta_changed.iter().map(|(k, x, y)| json!({
                "key": k, "a": meta_json(x), "b": meta_json(y),
            })).collect::<Vec<_>>(),
        },
        "values": if d.values_compared {
            json!({
                "name_map": d.name_map,
                "compared": d.values.iter().map(|v| {
                    let mut o = json!({
                        "name": v.name, "identical": v.identical, "elements": v.elements,
                        "differing": v.differing, "max_abs_diff": finite(v.max_abs_diff),
                        "mean_abs_diff": finite(v.mean_abs_diff),
                        "reordered": v.reordered,
                        "layer": layer_of(&v.name), "role": role_of(&v.name),
                    });
                    if let Some(b) = &v.b_name {
                        o["b_name"] = json!(b);
                    }
                    metrics_json(&mut o, &v.metrics);
                    o
                }).collect::<Vec<_>>(),
                "not_compared": d.not_compared.iter().map(|n| json!({
                    "name": n.name, "reason": n.reason,
                })).collect::<Vec<_>>(),
            })
        } else {
            Value::Null
        },
    })
}

fn metrics_json(o: &mut Value, m: &Metrics) {
    for (k, x) in [
        ("rmse", m.rmse),
        ("rel_rmse", m.rel_rmse),
        ("cosine", m.cosine),
        ("snr_db", m.snr_db),
    ] {
        o[k] = match x {
            Some(x) if !x.is_nan() => signed_inf(x),
            _ => Value::Null,
        };
    }
    o["nonfinite_pairs"] = json!(m.nonfinite);
}

/// A tensor's role: its name without the layer number's part and what precedes it, and
/// without a final `.weight` (`model.layers.3.self_attn.q_proj.weight`: `self_attn.q_proj`;
/// `blk.3.attn_q.weight`: `attn_q`; `lm_head.weight`: `lm_head`).
pub fn role_of(name: &str) -> String {
    let parts: Vec<&str> = name.split('.').collect();
    let after = parts
        .iter()
        .position(|s| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()))
        .map_or(0, |i| i + 1);
    let mut rest = &parts[after.min(parts.len())..];
    if rest.len() > 1 && rest.last() == Some(&"weight") {
        rest = &rest[..rest.len() - 1];
    }
    rest.join(".")
}

/// A number, with infinities as the strings `"inf"` and `"-inf"`.
fn signed_inf(x: f64) -> Value {
    if x == f64::NEG_INFINITY {
        json!("-inf")
    } else {
        finite(x)
    }
}

/// JSON has no infinity: an infinite difference is written as the string "inf".
fn finite(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        json!("inf")
    }
}
