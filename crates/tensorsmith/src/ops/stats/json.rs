//! The stable JSON form of `stats` (`schema: "tensorsmith.stats/1"`; fields are only ever
//! added, never renamed). Every tensor has every key; a statistic with no value (the mean of
//! an empty tensor, the float classes of an integer tensor, anything of a tensor that is not
//! measured) is `null`.

use crate::ops::stats::fp_fit::TARGETS;
use crate::ops::stats::{StatsReport, TensorStats, Values};
use serde_json::{json, Map, Value};
use std::path::Path;

/// Version tag of the JSON form.
pub const STATS_SCHEMA: &str = "tensorsmith.stats/1";

/// A float as JSON: `null` when not finite (JSON has no NaN).
fn num(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// An integer as JSON, exactly (every stored integer fits i64 or u64).
fn int(x: i128) -> Value {
    if let Ok(i) = i64::try_from(x) {
        json!(i)
    } else if let Ok(u) = u64::try_from(x) {
        json!(u)
    } else {
        num(x as f64)
    }
}

fn fractions(counts: &[u64; 4], elements: u64) -> Value {
    if elements == 0 {
        return Value::Null;
    }
    Value::Object(
        TARGETS
            .iter()
            .zip(counts)
            .map(|(t, &n)| (t.name.to_string(), json!(n as f64 / elements as f64)))
            .collect(),
    )
}

/// One tensor's object.
pub fn tensor_json(t: &TensorStats) -> Value {
    let mut o = Map::new();
    o.insert("name".into(), json!(t.name));
    o.insert("type".into(), json!(t.type_name));
    o.insert("shape".into(), json!(t.shape));
    o.insert("elements".into(), json!(t.elements));
    let null = Value::Null;
    let keys = [
        "kind",
        "dtype",
        "not_measured",
        "count",
        "min",
        "max",
        "mean",
        "std",
        "nan",
        "pos_inf",
        "neg_inf",
        "zeros",
        "subnormals",
        "exponents",
        "overflow",
        "flush",
        "histogram",
    ];
    for k in keys {
        o.insert(k.into(), null.clone());
    }
    let mut set = |k: &str, v: Value| {
        o.insert(k.into(), v);
    };
    match &t.values {
        Values::NotMeasured(why) => set("not_measured", json!(why)),
        Values::Float { dtype, acc: a } => {
            let some = a.finite > 0;
            set("kind", json!("float"));
            set("dtype", json!(dtype.to_string()));
            set("count", json!(a.finite));
            set("min", if some { num(a.min) } else { Value::Null });
            set("max", if some { num(a.max) } else { Value::Null });
            set("mean", if some { num(a.mean) } else { Value::Null });
            set("std", a.variance().map_or(Value::Null, |v| num(v.sqrt())));
            set("nan", json!(a.nan));
            set("pos_inf", json!(a.pos_inf));
            set("neg_inf", json!(a.neg_inf));
            set("zeros", json!(a.zeros));
            set("subnormals", json!(a.subnormals));
            let e: Vec<(i32, u64)> = a.exponents().collect();
            if let (Some(&(first, _)), Some(&(last, _))) = (e.first(), e.last()) {
                let mut counts = vec![0u64; (last - first + 1) as usize];
                for (x, n) in e {
                    counts[(x - first) as usize] = n;
                }
                set("exponents", json!({"first": first, "counts": counts}));
            }
            set("overflow", fractions(&a.overflow, a.elements));
            set("flush", fractions(&a.flush, a.elements));
        }
        Values::Int { acc, histogram } => {
            let some = acc.count > 0;
            set("kind", json!("integer"));
            set("dtype", json!(t.type_name));
            set("count", json!(acc.count));
            set("min", if some { int(acc.min) } else { Value::Null });
            set("max", if some { int(acc.max) } else { Value::Null });
            set("mean", if some { num(acc.mean) } else { Value::Null });
            set("std", acc.variance().map_or(Value::Null, |v| num(v.sqrt())));
            for k in ["nan", "pos_inf", "neg_inf", "subnormals"] {
                set(k, json!(0));
            }
            set("zeros", json!(acc.zeros));
            if let Some(h) = histogram {
                set(
                    "histogram",
                    json!({"min": int(acc.min), "max": int(acc.max), "counts": h.to_vec()}),
                );
            }
        }
    }
    Value::Object(o)
}

/// The whole document as indented JSON text, one line per tensor.
pub fn stats_json_text(path: &Path, report: &StatsReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "{{");
    let _ = writeln!(s, "  \"schema\": {},", json!(STATS_SCHEMA));
    let _ = writeln!(s, "  \"model\": {},", json!(path.to_string_lossy()));
    let _ = write!(s, "  \"tensors\": [");
    for (i, t) in report.tensors.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(s, "{sep}\n    {}", tensor_json(t));
    }
    let nl = if report.tensors.is_empty() {
        ""
    } else {
        "\n  "
    };
    let _ = writeln!(s, "{nl}]");
    let _ = writeln!(s, "}}");
    s
}
