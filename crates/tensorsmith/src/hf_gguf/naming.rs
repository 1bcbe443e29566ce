//! The `general.*` keys llama.cpp's converter (`convert_hf_to_gguf.py`, gguf-py's
//! `Metadata`) writes for a Hugging Face folder: the name, organisation, base name, fine-tune,
//! version and size label read off a model id (`config.json`'s `_name_or_path` when it is an
//! id, then the folder's name), the size label from the parameter count when the id has none,
//! and the sampling settings of `generation_config.json`; a model card's keys
//! (`model_card.rs`) come first.
//!
//! The rules are the reference's heuristics, kept as they are (so the same folder gets the same
//! keys), not a design of ours.

use crate::gguf::GgufValue;
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// What a model id says: (full name, organisation, base name, fine-tune, version, size label).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct IdParts {
    pub name: Option<String>,
    pub org: Option<String>,
    pub basename: Option<String>,
    pub finetune: Option<String>,
    pub version: Option<String>,
    pub size_label: Option<String>,
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("a fixed pattern")
}

static VERSION: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^(v|iter)?\d+([.]\d+)*$"));
static QTYPE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^(i?q\d(_\w)*|b?fp?(16|32))$"));
static SIZE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^((([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl))$")
});
static FINETUNE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^(chat|instruct|vision|lora)$"));
static TITLE_KEEP: LazyLock<Regex> = LazyLock::new(|| re(r"^(v\d+(?:\.\d+)*|\d.*)$"));

/// Python's `str.islower`: some cased character, and no upper-case one.
fn is_lower(s: &str) -> bool {
    s.chars().any(|c| c.is_lowercase()) && !s.chars().any(|c| c.is_uppercase())
}

/// Python's `str.title`: a cased character after an uncased one (or at the start) is upper
/// case, the others lower case.
fn title(s: &str) -> String {
    let mut out = String::new();
    let mut prev_cased = false;
    for c in s.chars() {
        let cased = c.is_lowercase() || c.is_uppercase();
        if cased && !prev_cased {
            out.extend(c.to_uppercase());
        } else if cased {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
        prev_cased = cased;
    }
    out
}

/// gguf-py's `Metadata.id_to_title`.
pub(crate) fn id_to_title(s: &str) -> String {
    s.trim()
        .replace('-', " ")
        .split_whitespace()
        .map(|w| {
            if is_lower(w) && !TITLE_KEEP.is_match(w) {
                title(w)
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Basename,
    SizeLabel,
    Finetune,
    Version,
    Type,
}

/// gguf-py's `Metadata.get_model_id_components`.
pub(crate) fn id_parts(model_id: &str, total_params: i64) -> IdParts {
    if model_id.contains(' ') {
        return IdParts {
            name: Some(model_id.to_string()),
            ..IdParts::default()
        };
    }
    let (mut org, full) = match model_id.split_once('/') {
        Some((o, f)) => (Some(o.to_string()), f.to_string()),
        None => (None, model_id.to_string()),
    };
    if org.as_deref().is_some_and(|o| o.starts_with('.')) {
        org = None;
    }
    let mut parts: Vec<String> = full
        .split('-')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    let mut kinds: Vec<Vec<Kind>> = vec![Vec::new(); parts.len()];
    for i in 0..parts.len() {
        let part = parts[i].clone();
        if VERSION.is_match(&part) {
            kinds[i].push(Kind::Version);
        } else if QTYPE.is_match(&part) {
            kinds[i].push(Kind::Type);
            parts[i] = part.to_uppercase();
        } else if i > 0 && SIZE.is_match(&part) {
            let mut p: Vec<char> = part.replace('_', ".").chars().collect();
            let n = p.len();
            if p[n - 1].is_ascii_digit() {
                // bloom-7b1: 7.1b
                let (a, b) = (p[n - 2], p[n - 1]);
                p.truncate(n - 2);
                p.push('.');
                p.push(b);
                p.push(a);
            }
            let n = p.len();
            if n > 1 && p[n - 2].is_ascii_digit() && "kmbt".contains(p[n - 1]) {
                p[n - 1] = p[n - 1].to_ascii_uppercase();
            }
            if total_params != 0 {
                let head: String = p[..p.len() - 1].iter().collect();
                let unit = " KMBT".find(p[p.len() - 1]).map(|u| u as i32).unwrap_or(-1);
                if let Ok(x) = head.parse::<f64>() {
                    let label = x * 1000f64.powi(unit);
                    let t = total_params as f64;
                    let context = if total_params < 0 {
                        label < (total_params.abs() / 8) as f64
                    } else {
                        (label - t).abs() > (7 * total_params / 8) as f64
                    };
                    if context {
                        kinds[i].push(Kind::Finetune);
                        let last = p.len() - 1;
                        p[last] = p[last].to_ascii_lowercase();
                    }
                }
            }
            if kinds[i].is_empty() {
                kinds[i].push(Kind::SizeLabel);
            }
            parts[i] = p.into_iter().collect();
        } else if i > 0 && FINETUNE.is_match(&part) {
            if total_params < 0 && part.eq_ignore_ascii_case("lora") {
                kinds[i].push(Kind::Type);
            } else {
                kinds[i].push(Kind::Finetune);
            }
        }
    }
    // Word sizes (small, xl) dropped when a numbered one is there.
    let numbered = parts
        .iter()
        .zip(&kinds)
        .any(|(n, k)| k.contains(&Kind::SizeLabel) && n.chars().any(|c| c.is_numeric()));
    if numbered {
        for (n, k) in parts.iter().zip(kinds.iter_mut()) {
            if k.contains(&Kind::SizeLabel) && n.chars().all(|c| c.is_alphabetic()) {
                k.retain(|x| *x != Kind::SizeLabel);
            }
        }
    }
    let mut at_start = true;
    for (part, k) in parts.iter().zip(kinds.iter_mut()) {
        let alpha_first = part.chars().next().is_some_and(|c| c.is_alphabetic());
        if at_start && ((k.is_empty() && alpha_first) || k.contains(&Kind::Version)) {
            k.push(Kind::Basename);
        } else {
            at_start = false;
            if k.is_empty() {
                k.push(Kind::Finetune);
            }
        }
    }
    for k in kinds.iter_mut().rev() {
        if k.contains(&Kind::Basename) && k.len() > 1 {
            k.retain(|x| *x != Kind::Basename);
        } else {
            break;
        }
    }
    let join = |want: Kind, not: Option<Kind>, dedup: bool| {
        let mut seen: Vec<&str> = Vec::new();
        for (n, k) in parts.iter().zip(&kinds) {
            if k.contains(&want)
                && not.is_none_or(|x| !k.contains(&x))
                && !(dedup && seen.contains(&n.as_str()))
            {
                seen.push(n);
            }
        }
        Some(seen.join("-")).filter(|s| !s.is_empty())
    };
    let mut basename = join(Kind::Basename, None, false);
    let size_label = join(Kind::SizeLabel, None, true);
    let finetune = join(Kind::Finetune, None, false);
    let version = join(Kind::Version, Some(Kind::Basename), false);
    if size_label.is_none() && finetune.is_none() && version.is_none() {
        basename = None;
    }
    IdParts {
        name: Some(full),
        org,
        basename,
        finetune,
        version,
        size_label,
    }
}

/// gguf-py's `model_weight_count_rounded_notation` (two digits at least).
fn rounded(count: u64) -> String {
    let c = count as f64;
    let (x, unit) = if c > 1e12 {
        (c * 1e-12, "T")
    } else if c > 1e9 {
        (c * 1e-9, "B")
    } else if c > 1e6 {
        (c * 1e-6, "M")
    } else {
        (c * 1e-3, "K")
    };
    let whole = format!("{}", x.round_ties_even() as u64);
    let digits = whole.trim_start_matches('0').len();
    let fix = 2usize.saturating_sub(digits);
    format!("{x:.fix$}{unit}")
}

/// gguf-py's `size_label`: `{experts}x{per expert}` for a mixture of experts.
pub(crate) fn size_label(total: u64, shared: u64, expert: u64, expert_count: u64) -> String {
    if expert_count > 0 {
        format!("{expert_count}x{}", rounded(shared + expert))
    } else {
        rounded(total)
    }
}

/// The `general.*` keys, in the order the reference writes them (after `general.type`).
/// `dir_name`: the folder's name; `config`: config.json; `generation`: generation_config.json.
pub(crate) fn general_keys(
    dir_name: &str,
    config: &Value,
    generation: Option<&Value>,
    from_card: &dyn Fn(&str) -> Option<String>,
    card_keys: Vec<(String, GgufValue)>,
    params: (u64, u64, u64, u64),
) -> Vec<(String, GgufValue)> {
    let (total, shared, expert, experts) = params;
    // The model card's values first (`from_card`: its text field of a `Metadata` name): the
    // heuristics below fill only what it leaves unset. `card_keys` go after the size label.
    let mut m = IdParts {
        name: from_card("name"),
        org: from_card("organization"),
        basename: from_card("basename"),
        finetune: from_card("finetune"),
        version: from_card("version"),
        size_label: from_card("size_label"),
    };
    let mut take = |p: IdParts| {
        if m.name.is_none() {
            m.name = p.name.map(|n| id_to_title(&n));
        }
        if m.org.is_none() {
            m.org = p.org.map(|n| id_to_title(&n));
        }
        m.basename = m.basename.take().or(p.basename);
        m.finetune = m.finetune.take().or(p.finetune);
        m.version = m.version.take().or(p.version);
        m.size_label = m.size_label.take().or(p.size_label);
    };
    if let Some(id) = config.get("_name_or_path").and_then(Value::as_str) {
        if id.matches('/').count() <= 1 {
            take(id_parts(id, total as i64));
        }
    }
    take(id_parts(dir_name, total as i64));
    if m.name.is_none() {
        m.name = Some(dir_name.to_string());
    }
    if m.size_label.is_none() && total > 0 {
        m.size_label = Some(size_label(total, shared, expert, experts));
    }
    let mut out: Vec<(String, GgufValue)> = Vec::new();
    if let Some(g) = generation {
        sampling_keys(g, &mut out);
    }
    // gguf-py's add_string skips empty text.
    let s = |k: &str, v: &Option<String>, out: &mut Vec<(String, GgufValue)>| {
        if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
            out.push((format!("general.{k}"), GgufValue::String(v.clone())));
        }
    };
    s("name", &m.name, &mut out);
    s("author", &from_card("author"), &mut out);
    s("version", &m.version, &mut out);
    s("organization", &m.org, &mut out);
    s("finetune", &m.finetune, &mut out);
    s("basename", &m.basename, &mut out);
    s("description", &from_card("description"), &mut out);
    s("size_label", &m.size_label, &mut out);
    out.extend(card_keys);
    out
}

/// generation_config.json's sampling settings, in the order gguf-py's writer adds them and
/// with its types: (config key, its fallback key, GGUF key, integer).
const SAMPLING: &[(&str, &str, &str, bool)] = &[
    ("top_k", "", "top_k", true),
    ("top_p", "", "top_p", false),
    ("min_p", "", "min_p", false),
    ("xtc_probability", "", "xtc_probability", false),
    ("xtc_threshold", "", "xtc_threshold", false),
    ("temperature", "", "temp", false),
    ("penalty_last_n", "", "penalty_last_n", true),
    (
        "penalty_repeat",
        "repetition_penalty",
        "penalty_repeat",
        false,
    ),
    ("mirostat", "", "mirostat", true),
    ("mirostat_tau", "", "mirostat_tau", false),
    ("mirostat_eta", "", "mirostat_eta", false),
];

fn sampling_keys(g: &Value, out: &mut Vec<(String, GgufValue)>) {
    if let Some(v) = g.get("sequence").and_then(Value::as_str) {
        out.push((
            "general.sampling.sequence".into(),
            GgufValue::String(v.into()),
        ));
    }
    for &(key, alt, gguf_key, int) in SAMPLING {
        let v = g.get(key).or_else(|| g.get(alt)).filter(|v| !v.is_null());
        let value = match (v, int) {
            (Some(v), true) => v.as_i64().map(|x| GgufValue::I32(x as i32)),
            (Some(v), false) => v.as_f64().map(|x| GgufValue::F32(x as f32)),
            (None, _) => None,
        };
        if let Some(value) = value {
            out.push((format!("general.sampling.{gguf_key}"), value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_as_the_reference_reads_them() {
        let p = id_parts("meta-llama/Llama-3.1-8B-Instruct", 8_030_261_248);
        assert_eq!(p.org.as_deref(), Some("meta-llama"));
        assert_eq!(p.basename.as_deref(), Some("Llama-3.1"));
        assert_eq!(p.size_label.as_deref(), Some("8B"));
        assert_eq!(p.finetune.as_deref(), Some("Instruct"));
        let p = id_parts("tiny-llama", 132_032);
        assert_eq!((p.basename, p.size_label), (None, None));
        assert_eq!(id_to_title("tiny-llama"), "Tiny Llama");
        assert_eq!(
            id_to_title("Qwen2.5-0.5B-Instruct"),
            "Qwen2.5 0.5B Instruct"
        );
        assert_eq!(id_to_title("llama3b-v2"), "Llama3B v2");
        let p = id_parts("bloom-7b1", 7_000_000_000);
        assert_eq!(p.size_label.as_deref(), Some("7.1B"));
        // A size far from the parameter count is a context length: a fine-tune.
        let p = id_parts("model-32k", 1_000_000_000);
        assert_eq!(p.finetune.as_deref(), Some("32k"));
    }

    #[test]
    fn size_labels_round_as_the_reference_does() {
        assert_eq!(size_label(132_032, 0, 0, 0), "132K");
        assert_eq!(size_label(1_235_814_400, 0, 0, 0), "1.2B");
        assert_eq!(size_label(8_030_261_248, 0, 0, 0), "8.0B");
        assert_eq!(size_label(0, 1_000_000, 5_000_000, 8), "8x6.0M");
    }
}
