//! The special tokens, `add_*_token` flags, merges and chat template of a Hugging Face folder,
//! found as llama.cpp's converter finds them (gguf-py's `SpecialVocab`): tokenizer.json's
//! merges, normalizer and post-processor, then tokenizer_config.json's tokens and flags, then
//! config.json's `*_token_id`. The order of the rules and of the keys written is the
//! reference's, so the same folder gives the same keys in the same order.

use crate::gguf::{Array, GgufValue};
use serde_json::{Map, Value};

/// What the reference's `SpecialVocab.add_to_gguf` writes.
#[derive(Default)]
pub(crate) struct Special {
    pub merges: Vec<String>,
    /// (kind, id), in the order found.
    pub ids: Vec<(String, u32)>,
    /// (kind, add), in the order found.
    pub add: Vec<(String, bool)>,
    pub chat_template: Option<Value>,
    pub lowercase: Option<bool>,
    pub strip_accents: Option<bool>,
    kinds: Vec<String>,
    /// Ids from here on are skipped (a SentencePiece vocabulary's size).
    n_vocab: Option<u64>,
}

fn set_flag(v: &mut Vec<(String, bool)>, k: &str, b: bool, only_if_absent: bool) {
    match v.iter_mut().find(|(x, _)| x == k) {
        Some(e) if !only_if_absent => e.1 = b,
        Some(_) => {}
        None => v.push((k.to_string(), b)),
    }
}

impl Special {
    fn set_id(&mut self, kind: &str, id: Option<&Value>) {
        let Some(id) = id.and_then(Value::as_i64) else {
            return;
        };
        if id < 0
            || self.n_vocab.is_some_and(|n| id as u64 >= n)
            || self.ids.iter().any(|(k, _)| k == kind)
        {
            return;
        }
        self.ids.push((kind.to_string(), id as u32));
    }

    fn normalizer(&mut self, n: &Value) {
        match n.get("type").and_then(Value::as_str) {
            Some("Lowercase") => self.lowercase = Some(true),
            Some("StripAccents") => self.strip_accents = Some(true),
            Some("BertNormalizer") => {
                if let Some(b) = n.get("lowercase") {
                    self.lowercase = b.as_bool();
                }
                if let Some(b) = n.get("strip_accents") {
                    self.strip_accents = b.as_bool();
                }
            }
            Some("Sequence") => {
                for m in n
                    .get("normalizers")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    self.normalizer(m);
                }
            }
            _ => {}
        }
    }

    /// Reads the three files (`None` for one that is absent).
    pub(crate) fn load(
        tokenizer: Option<&Value>,
        config: Option<&Map<String, Value>>,
        model_config: &Value,
        template_file: Option<String>,
        n_vocab: Option<u64>,
        load_merges: bool,
    ) -> Special {
        let mut s = Special {
            n_vocab,
            kinds: ["bos", "eos", "unk", "sep", "pad", "cls", "mask"]
                .map(String::from)
                .to_vec(),
            ..Special::default()
        };
        let mut tc = config.cloned();
        let empty = Vec::new();
        let mut added: &Vec<Value> = &empty;
        if let Some(t) = tokenizer {
            if load_merges {
                s.merges = merges_of(t);
            }
            if let Some(n) = t.get("normalizer").filter(|n| !n.is_null()) {
                s.normalizer(n);
            }
            if let Some(a) = t.get("added_tokens").and_then(Value::as_array) {
                added = a;
            }
            s.post_processor(t, &mut tc);
        }
        let Some(tc) = tc.filter(|m| !m.is_empty()) else {
            s.ids_from_config(model_config);
            return s;
        };
        s.chat_template = match tc.get("chat_template") {
            Some(v) => Some(v.clone()),
            None => template_file.map(Value::String),
        }
        .filter(|v| v.is_string() || v.is_array());
        for kind in s.kinds.clone() {
            if let Some(b) = tc
                .get(&format!("add_{kind}_token"))
                .and_then(Value::as_bool)
            {
                set_flag(&mut s.add, &kind, b, true);
            }
            let content = match tc.get(&format!("{kind}_token")) {
                Some(Value::String(c)) => c.clone(),
                Some(Value::Object(o)) => match o.get("content") {
                    Some(Value::String(c)) => c.clone(),
                    _ => continue,
                },
                _ => continue,
            };
            let id = added
                .iter()
                .find(|a| a.get("content").and_then(Value::as_str) == Some(&content))
                .and_then(|a| a.get("id"));
            s.set_id(&kind, id);
        }
        s.ids_from_config(model_config);
        s
    }

    fn ids_from_config(&mut self, config: &Value) {
        for kind in self.kinds.clone() {
            let key = format!("{kind}_token_id");
            let mut id = config.get(&key).filter(|v| !v.is_null());
            if id.is_none() {
                id = config.get("text_config").and_then(|t| t.get(&key));
            }
            self.set_id(&kind, id);
        }
    }

    fn post_processor(&mut self, t: &Value, tc: &mut Option<Map<String, Value>>) {
        let get = |tc: &Option<Map<String, Value>>, k: &str| {
            tc.as_ref()
                .and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        let mut bos = get(tc, "bos_token");
        let mut cls = get(tc, "cls_token");
        let mut eos = get(tc, "eos_token");
        let sep = get(tc, "sep_token");
        let has_tc = tc.as_ref().is_some_and(|m| !m.is_empty());
        if bos.is_none() && cls.is_some() && has_tc {
            bos = cls.clone();
            tc.as_mut()
                .expect("tc")
                .insert("bos_token".into(), bos.clone().into());
        }
        if eos.is_none() && sep.is_some() && has_tc {
            eos = sep.clone();
            tc.as_mut()
                .expect("tc")
                .insert("eos_token".into(), eos.clone().into());
        }
        let Some(pp) = t.get("post_processor").filter(|p| !p.is_null()) else {
            return;
        };
        let list: Vec<&Value> = match pp.get("processors").and_then(Value::as_array) {
            Some(a) => a.iter().collect(),
            None => vec![pp],
        };
        let sid = |x: Option<&Value>| {
            x.and_then(|v| v.get("SpecialToken"))
                .and_then(|v| v.get("id"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        for p in list {
            match p.get("type").and_then(Value::as_str) {
                Some("ByteLevel") => {
                    set_flag(&mut self.add, "bos", false, true);
                    set_flag(&mut self.add, "eos", false, true);
                }
                Some("RobertaProcessing") => {
                    for k in ["bos", "eos", "sep"] {
                        set_flag(&mut self.add, k, true, false);
                    }
                    // The reference also fills cls/sep from the processor; their ids are not
                    // among the kinds it writes unless tokenizer_config names them.
                    if cls.is_none() && has_tc {
                        let c = p
                            .get("cls")
                            .and_then(|c| c.get(0))
                            .and_then(Value::as_str)
                            .map(String::from)
                            .or(bos.clone());
                        cls = c.clone();
                        tc.as_mut()
                            .expect("tc")
                            .insert("cls_token".into(), c.into());
                    }
                    if sep.is_none() && has_tc {
                        let c = p
                            .get("sep")
                            .and_then(|c| c.get(0))
                            .and_then(Value::as_str)
                            .map(String::from)
                            .or(eos.clone());
                        tc.as_mut()
                            .expect("tc")
                            .insert("sep_token".into(), c.into());
                    }
                }
                Some("TemplateProcessing") => {
                    let single = p
                        .get("single")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    let (mut first_id, mut last_id) = (None, None);
                    if single.len() > 1 {
                        if let Some(first) = sid(single.first()) {
                            if !has_tc {
                                bos = Some(first.clone());
                            } else if Some(&first) != bos.as_ref() && Some(&first) != cls.as_ref() {
                                if bos.is_none() {
                                    bos = Some(first.clone());
                                    tc.as_mut()
                                        .expect("tc")
                                        .insert("bos_token".into(), first.clone().into());
                                }
                                if cls.is_none() {
                                    cls = Some(first.clone());
                                    tc.as_mut()
                                        .expect("tc")
                                        .insert("cls_token".into(), first.clone().into());
                                }
                            }
                            let is = Some(&first) == bos.as_ref() || Some(&first) == cls.as_ref();
                            set_flag(&mut self.add, "bos", is, false);
                            first_id = Some(first);
                        }
                        if let Some(last) = sid(single.last()) {
                            if !has_tc {
                                eos = Some(last.clone());
                            } else if Some(&last) != eos.as_ref() {
                                let m = tc.as_mut().expect("tc");
                                if !self.kinds.iter().any(|k| k == "eot") {
                                    self.kinds.push("eot".into());
                                    m.insert("eot_token".into(), eos.clone().into());
                                } else if !self.kinds.iter().any(|k| k == "eom") {
                                    self.kinds.push("eom".into());
                                    m.insert("eom_token".into(), eos.clone().into());
                                }
                                m.insert("eos_token".into(), last.clone().into());
                                eos = Some(last.clone());
                            }
                            set_flag(&mut self.add, "eos", Some(&last) == eos.as_ref(), false);
                            last_id = Some(last);
                        }
                    }
                    // The pair template: whether a separator goes between the two sequences.
                    let pair = p
                        .get("pair")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    if pair.is_empty() {
                        continue;
                    }
                    let start = usize::from(first_id.is_some() && sid(pair.first()) == first_id);
                    let stop = usize::from(last_id.is_some() && sid(pair.last()) == last_id);
                    let Some(mid) = pair.get(start..pair.len().saturating_sub(stop).max(start))
                    else {
                        continue;
                    };
                    let seq = |v: Option<&Value>| {
                        v.and_then(|v| v.get("Sequence"))
                            .and_then(|v| v.get("id"))
                            .and_then(Value::as_str)
                            .map(String::from)
                    };
                    if mid.len() < 3
                        || seq(mid.first()).as_deref() != Some("A")
                        || seq(mid.last()).as_deref() != Some("B")
                    {
                        continue;
                    }
                    let inner = &mid[1..mid.len() - 1];
                    let sep_now = tc
                        .as_ref()
                        .and_then(|m| m.get("sep_token"))
                        .and_then(Value::as_str)
                        .map(String::from);
                    let is_sep = |e: &Option<String>| e.is_some() && (*e == sep_now || *e == eos);
                    let mut add_sep = false;
                    let e0 = sid(inner.first());
                    if is_sep(&e0) && last_id.is_none() {
                        add_sep = true;
                    }
                    if inner.len() == 2 && is_sep(&sid(inner.get(1))) {
                        add_sep = true;
                    }
                    set_flag(&mut self.add, "sep", add_sep, false);
                    if add_sep && sep_now.is_none() && has_tc {
                        tc.as_mut()
                            .expect("tc")
                            .insert("sep_token".into(), eos.clone().into());
                    }
                }
                _ => {}
            }
        }
    }

    /// The keys, in the reference's order.
    pub(crate) fn keys(&self) -> Vec<(String, GgufValue)> {
        let mut out = Vec::new();
        if !self.merges.is_empty() {
            out.push((
                "tokenizer.ggml.merges".to_string(),
                GgufValue::Array(Array::String(self.merges.clone())),
            ));
        }
        for (k, id) in &self.ids {
            // gguf-py's writer has no handler for a cls id: the reference skips it.
            let name = match k.as_str() {
                "bos" | "eos" | "eot" | "eom" | "mask" => k.as_str(),
                "unk" => "unknown",
                "sep" => "seperator",
                "pad" => "padding",
                _ => continue,
            };
            out.push((
                format!("tokenizer.ggml.{name}_token_id"),
                GgufValue::U32(*id),
            ));
        }
        for (k, b) in &self.add {
            out.push((format!("tokenizer.ggml.add_{k}_token"), GgufValue::Bool(*b)));
        }
        match &self.chat_template {
            Some(Value::String(t)) => out.push((
                "tokenizer.chat_template".to_string(),
                GgufValue::String(t.clone()),
            )),
            Some(Value::Array(list)) => {
                // Named templates: the others as tokenizer.chat_template.NAME and their names
                // in tokenizer.chat_templates, then the default as tokenizer.chat_template.
                let mut names = Vec::new();
                let mut default = None;
                for t in list {
                    let (Some(n), Some(body)) = (
                        t.get("name").and_then(Value::as_str),
                        t.get("template").and_then(Value::as_str),
                    ) else {
                        continue;
                    };
                    let n: String = n
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                        .collect();
                    if n == "default" {
                        default = Some(body.to_string());
                    } else if !n.is_empty() {
                        out.push((
                            format!("tokenizer.chat_template.{n}"),
                            GgufValue::String(body.into()),
                        ));
                        if !names.contains(&n) {
                            names.push(n);
                        }
                    }
                }
                if !names.is_empty() {
                    out.push((
                        "tokenizer.chat_templates".into(),
                        GgufValue::Array(Array::String(names)),
                    ));
                }
                if let Some(d) = default {
                    out.push(("tokenizer.chat_template".into(), GgufValue::String(d)));
                }
            }
            _ => {}
        }
        if let Some(b) = self.lowercase {
            out.push((
                "tokenizer.ggml.normalizer.lowercase".into(),
                GgufValue::Bool(b),
            ));
        }
        if let Some(b) = self.strip_accents {
            out.push((
                "tokenizer.ggml.normalizer.strip_accents".into(),
                GgufValue::Bool(b),
            ));
        }
        out
    }
}

/// tokenizer.json's merges as `"a b"` strings (pairs joined; a space inside a part written
/// as U+0120, as the reference does).
fn merges_of(t: &Value) -> Vec<String> {
    let Some(list) = t
        .get("model")
        .and_then(|m| m.get("merges"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|m| match m {
            Value::String(s) => Some(s.clone()),
            Value::Array(pair) if pair.len() == 2 => {
                let part = |v: &Value| {
                    v.as_str()
                        .unwrap_or_default()
                        .chars()
                        .map(|c| if c == ' ' { '\u{120}' } else { c })
                        .collect::<String>()
                };
                Some(format!("{} {}", part(&pair[0]), part(&pair[1])))
            }
            _ => None,
        })
        .collect()
}
