//! A model card's metadata (README.md's YAML front matter) as the `general.*` keys llama.cpp's
//! converter writes from it (gguf-py's `Metadata.load_model_card` and the model-card part of
//! `apply_metadata_heuristic`): name, author, version, organization, description, fine-tune,
//! base name, size label and the source's URL, DOI, UUID and repository (each from its own key
//! or its `model_` one); license, its name and link; base models and datasets (a Hub id, a URL,
//! or a mapping); tags (with the pipeline tag) and languages.
//!
//! The front matter is read as the reference reads it: the first line exactly `---`, the lines
//! up to the next `---`, a list item `- no` quoted (its fix for YAML's Norway problem), tabs
//! as two spaces. It is parsed by yaml-rust2 (YAML 1.2, where the reference's PyYAML reads
//! YAML 1.1: an unquoted `yes`, `on` or a date is text here, a boolean or a date there; the
//! reference then fails to write such a value, so no file of it is lost). A value the
//! reference could not write (a number where text goes) is refused by name.

use super::naming::{id_parts, id_to_title};
use super::refuse;
use crate::error::Result;
use crate::gguf::{Array, GgufValue};
use serde_json::{Map, Value};
use std::path::Path;

/// The card's front matter as a mapping (`None`: no README.md, no front matter, or not a
/// mapping, as the reference takes them).
pub(crate) fn load(dir: &Path, shown: &str) -> Result<Option<Map<String, Value>>> {
    let named = format!("{shown}/README.md");
    let text = match std::fs::read(dir.join("README.md")) {
        Ok(b) => String::from_utf8(b)
            .map_err(|_| refuse(&named, "not UTF-8 (the converter reads it as UTF-8)"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::Error::from(e).in_file(Path::new(&named))),
    };
    let lines = splitlines(&text);
    if lines.first() != Some(&"---") {
        return Ok(None);
    }
    let mut yaml = String::new();
    for line in &lines[1..] {
        if *line == "---" {
            break;
        }
        yaml.push_str(line);
        yaml.push('\n');
    }
    let yaml = yaml.replace("- no\n", "- \"no\"\n").replace('\t', "  ");
    let docs = yaml_rust2::YamlLoader::load_from_str(&yaml)
        .map_err(|e| refuse(&named, &format!("its front matter is not YAML: {e}")))?;
    match docs.into_iter().next().map(json_of) {
        Some(Value::Object(m)) => Ok(Some(m)),
        _ => Ok(None),
    }
}

/// Python's `str.splitlines`: lines broken at `\n`, `\r\n`, `\r` and the other breaks Python
/// knows, without them.
fn splitlines(s: &str) -> Vec<&str> {
    let breaks = |c: char| {
        matches!(
            c,
            '\n' | '\r'
                | '\x0b'
                | '\x0c'
                | '\x1c'
                | '\x1d'
                | '\x1e'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    };
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if breaks(c) {
            out.push(&s[start..i]);
            let mut next = i + c.len_utf8();
            if c == '\r' && it.peek().map(|p| p.1) == Some('\n') {
                it.next();
                next += 1;
            }
            start = next;
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// A YAML value as JSON (mappings keep their text keys, in order; others are dropped, as a
/// lookup by name never finds them).
fn json_of(y: yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(r), Value::Number),
        Yaml::Integer(i) => Value::from(i),
        Yaml::String(s) => Value::String(s),
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Array(a) => Value::Array(a.into_iter().map(json_of).collect()),
        Yaml::Hash(h) => Value::Object(
            h.into_iter()
                .filter_map(|(k, v)| match k {
                    Yaml::String(k) => Some((k, json_of(v))),
                    _ => None,
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

/// What the card gives, as the reference's `Metadata` holds it.
#[derive(Default)]
pub(crate) struct Card {
    /// name, author, version, organization, description, finetune, basename, size_label,
    /// source_url, source_doi, source_uuid, source_repo_url: text, when the card sets it.
    pub text: Vec<(&'static str, String)>,
    pub license: Option<String>,
    pub license_name: Option<String>,
    pub license_link: Option<String>,
    /// Each entry's keys (of `ENTRY_KEYS`) in order; `None`: the card names none.
    pub base_models: Option<Vec<Vec<(&'static str, String)>>>,
    pub datasets: Option<Vec<Vec<(&'static str, String)>>>,
    pub tags: Option<Vec<String>>,
    pub languages: Option<Vec<String>>,
}

/// The fields a card's keys set, in the reference's order of lookups (the first that sets a
/// field wins).
const FIELDS: &[(&str, &str)] = &[
    ("name", "name"),
    ("author", "author"),
    ("version", "version"),
    ("organization", "organization"),
    ("description", "description"),
    ("finetune", "finetune"),
    ("basename", "basename"),
    ("size_label", "size_label"),
    ("source_url", "url"),
    ("source_doi", "doi"),
    ("source_uuid", "uuid"),
    ("source_repo_url", "repo_url"),
    ("name", "model_name"),
    ("author", "model_author"),
    ("version", "model_version"),
    ("organization", "model_organization"),
    ("description", "model_description"),
    ("finetune", "model_finetune"),
    ("basename", "model_basename"),
    ("size_label", "model_size_label"),
    ("source_url", "model_url"),
    ("source_doi", "model_doi"),
    ("source_uuid", "model_uuid"),
    ("source_repo_url", "model_repo_url"),
    ("name", "model_name"),
    ("author", "model_creator"),
    ("basename", "model_type"),
];

/// The keys of a base model's or dataset's entry, in the order they are written.
const ENTRY_KEYS: &[&str] = &[
    "name",
    "author",
    "version",
    "organization",
    "description",
    "url",
    "doi",
    "uuid",
    "repo_url",
];

fn text_of(path: &str, key: &str, v: &Value) -> Result<String> {
    v.as_str().map(String::from).ok_or_else(|| {
        refuse(
            path,
            &format!("the model card's {key} is {v}, not text (llama.cpp's converter cannot write it either)"),
        )
    })
}

/// Reads the card's keys as the reference's heuristics do; `total` is the parameter count
/// (for the size part of base models' ids).
pub(crate) fn card(path: &str, m: &Map<String, Value>, total: i64) -> Result<Card> {
    let mut c = Card::default();
    for (field, key) in FIELDS {
        if c.text.iter().any(|(f, _)| f == field) {
            continue;
        }
        match m.get(*key) {
            None | Some(Value::Null) => {}
            Some(v) => c.text.push((field, text_of(path, key, v)?)),
        }
    }
    let first = |keys: &[&str]| -> Option<Option<&Value>> {
        keys.iter()
            .any(|k| m.contains_key(*k))
            .then(|| keys.iter().find_map(|k| m.get(*k)).filter(|v| !v.is_null()))
    };
    c.base_models = first(&["base_model", "base_models", "base_model_sources"])
        .map(|v| entries(path, "base_model", v, total))
        .transpose()?;
    c.datasets = first(&["datasets", "dataset", "dataset_sources"])
        .map(|v| entries(path, "datasets", v, total))
        .transpose()?;
    c.license = match m.get("license") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|v| text_of(path, "license", v))
                .collect::<Result<Vec<_>>>()?
                .join(","),
        ),
        Some(v) => Some(text_of(path, "license", v)?),
    };
    for (slot, key) in [
        (&mut c.license_name, "license_name"),
        (&mut c.license_link, "license_link"),
    ] {
        if let Some(v) = m.get(key).filter(|v| !v.is_null()) {
            *slot = Some(text_of(path, key, v)?);
        }
    }
    c.tags = list(path, m, &["tags", "pipeline_tag"])?;
    c.languages = list(path, m, &["languages", "language"])?;
    Ok(c)
}

/// The reference's `use_array_model_card_metadata` over `keys`: text and lists of text
/// appended in turn; `None` when no key has a value.
fn list(path: &str, m: &Map<String, Value>, keys: &[&str]) -> Result<Option<Vec<String>>> {
    let mut out: Option<Vec<String>> = None;
    for key in keys {
        match m.get(*key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => out.get_or_insert_with(Vec::new).push(s.clone()),
            Some(Value::Array(a)) => {
                let got = out.get_or_insert_with(Vec::new);
                for v in a {
                    got.push(text_of(path, key, v)?);
                }
            }
            Some(_) => {
                out.get_or_insert_with(Vec::new);
            }
        }
    }
    Ok(out)
}

/// Base models or datasets: a Hub id, a URL (a Hub URL's id read too) or a mapping each.
fn entries(
    path: &str,
    key: &str,
    v: Option<&Value>,
    total: i64,
) -> Result<Vec<Vec<(&'static str, String)>>> {
    let items: Vec<&Value> = match v {
        None => Vec::new(),
        Some(Value::Array(a)) => a.iter().collect(),
        Some(Value::String(_)) => vec![v.expect("a value")],
        Some(_) => Vec::new(),
    };
    let mut out = Vec::new();
    for item in items {
        let mut e: Vec<(&'static str, String)> = Vec::new();
        match item {
            Value::String(id) => {
                let from_id = |id: &str, e: &mut Vec<(&'static str, String)>, url: bool| {
                    let p = id_parts(id, total);
                    if let Some(n) = &p.name {
                        e.push(("name", id_to_title(n)));
                    }
                    if let Some(o) = &p.org {
                        e.push(("organization", id_to_title(o)));
                    }
                    if let Some(v) = p.version {
                        e.push(("version", v));
                    }
                    if let (false, Some(o), Some(n)) = (url, &p.org, &p.name) {
                        e.push(("repo_url", format!("https://huggingface.co/{o}/{n}")));
                    }
                };
                if ["http://", "https://", "ssh://"]
                    .iter()
                    .any(|s| id.starts_with(s))
                {
                    e.push(("repo_url", id.clone()));
                    if id.contains("huggingface.co") {
                        let hub = id
                            .strip_prefix("https://huggingface.co/")
                            .or_else(|| id.strip_prefix("http://huggingface.co/"))
                            .filter(|r| {
                                let parts: Vec<&str> = r.split('/').collect();
                                parts.len() == 2 && parts.iter().all(|p| !p.is_empty())
                            });
                        if let Some(r) = hub {
                            from_id(r, &mut e, true);
                        }
                    }
                } else {
                    from_id(id, &mut e, false);
                }
            }
            Value::Object(o) => {
                for k in ENTRY_KEYS {
                    if let Some(v) = o.get(*k) {
                        e.push((k, text_of(path, &format!("{key} entry's {k}"), v)?));
                    }
                }
            }
            _ => {} // The reference logs it and keeps an empty entry.
        }
        e.sort_by_key(|(k, _)| ENTRY_KEYS.iter().position(|x| x == k));
        out.push(e);
    }
    Ok(out)
}

impl Card {
    /// The card's text field `field`.
    pub(crate) fn get(&self, field: &str) -> Option<String> {
        self.text
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| v.clone())
    }

    /// The keys after the size label, in the reference's order; empty text is not written,
    /// as gguf-py's `add_string` skips it.
    pub(crate) fn keys_after_size(&self, out: &mut Vec<(String, GgufValue)>) {
        let s = |k: String, v: &Option<String>, out: &mut Vec<(String, GgufValue)>| {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                out.push((k, GgufValue::String(v.clone())));
            }
        };
        s("general.license".into(), &self.license, out);
        s("general.license.name".into(), &self.license_name, out);
        s("general.license.link".into(), &self.license_link, out);
        for (f, k) in [
            ("source_url", "url"),
            ("source_doi", "doi"),
            ("source_uuid", "uuid"),
            ("source_repo_url", "repo_url"),
        ] {
            s(format!("general.source.{k}"), &self.get(f), out);
        }
        for (what, list) in [
            ("base_model", &self.base_models),
            ("dataset", &self.datasets),
        ] {
            if let Some(list) = list {
                out.push((
                    format!("general.{what}.count"),
                    GgufValue::U32(list.len() as u32),
                ));
                for (i, e) in list.iter().enumerate() {
                    for (k, v) in e {
                        s(format!("general.{what}.{i}.{k}"), &Some(v.clone()), out);
                    }
                }
            }
        }
        for (k, v) in [("tags", &self.tags), ("languages", &self.languages)] {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                out.push((
                    format!("general.{k}"),
                    GgufValue::Array(Array::String(v.clone())),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_as_python_splits_them() {
        assert_eq!(splitlines("a\r\nb\rc\nd"), ["a", "b", "c", "d"]);
        assert_eq!(splitlines("a\n\nb\n"), ["a", "", "b"]);
        assert_eq!(splitlines("x\u{2028}y"), ["x", "y"]);
    }

    #[test]
    fn a_card_reads_as_the_reference_reads_it() {
        let m: Map<String, Value> = serde_json::from_str(
            r#"{"license": ["mit", "apache-2.0"], "model_name": "Named",
                "base_model": ["Qwen/Qwen3-8B", "https://huggingface.co/org/Model-v2",
                               "https://example.com/m", {"name": "Dict", "url": "u"}, 5],
                "tags": ["a"], "pipeline_tag": "text-generation", "language": "en"}"#,
        )
        .unwrap();
        let c = card("README.md", &m, 8_000_000_000).unwrap();
        assert_eq!(c.get("name").as_deref(), Some("Named"));
        assert_eq!(c.license.as_deref(), Some("mit,apache-2.0"));
        let b = c.base_models.unwrap();
        assert_eq!(
            b[0],
            [
                ("name", "Qwen3 8B".to_string()),
                ("organization", "Qwen".into()),
                ("repo_url", "https://huggingface.co/Qwen/Qwen3-8B".into())
            ]
        );
        assert_eq!(b[1][0], ("name", "Model v2".to_string()));
        assert_eq!(
            b[1].last().unwrap().1,
            "https://huggingface.co/org/Model-v2"
        );
        assert_eq!(b[2], [("repo_url", "https://example.com/m".to_string())]);
        assert_eq!(
            b[3],
            [("name", "Dict".to_string()), ("url", "u".to_string())]
        );
        assert!(b[4].is_empty());
        assert_eq!(c.tags.unwrap(), ["a", "text-generation"]);
        assert_eq!(c.languages.unwrap(), ["en"]);
        let bad: Map<String, Value> = serde_json::from_str(r#"{"version": 1.5}"#).unwrap();
        assert!(card("README.md", &bad, 0).is_err());
    }
}
