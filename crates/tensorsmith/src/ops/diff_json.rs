//! The stable JSON form of a diff (`tensorsmith.diff/1`), shared by the CLI's `--json` and
//! the Python package.

use crate::index::MetaValue;
use crate::ops::diff::{Diff, TensorDesc};
use crate::ops::inspect::meta_json;
use serde_json::{json, Value};

/// Version tag of the JSON form.
pub const DIFF_SCHEMA: &str = "tensorsmith.diff/1";

fn desc_json(t: &TensorDesc) -> Value {
    json!({"name": t.name, "dtype": t.dtype, "shape": t.shape, "byte_length": t.byte_length})
}

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
                "compared": d.values.iter().map(|v| json!({
                    "name": v.name, "identical": v.identical, "elements": v.elements,
                    "differing": v.differing, "max_abs_diff": finite(v.max_abs_diff),
                    "mean_abs_diff": finite(v.mean_abs_diff),
                })).collect::<Vec<_>>(),
                "not_compared": d.not_compared.iter().map(|n| json!({
                    "name": n.name, "reason": n.reason,
                })).collect::<Vec<_>>(),
            })
        } else {
            Value::Null
        },
    })
}

/// JSON has no infinity: an infinite difference is written as the string "inf".
fn finite(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        json!("inf")
    }
}
