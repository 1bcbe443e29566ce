//! `--rename FROM=TO` rules of a diff: how a name of model A becomes the name of its twin in B.
//!
//! A rule is two patterns split at the first `=`. A pattern matches a whole name; in it `*`
//! matches any text (empty included) and `{N}` a run of ASCII digits; everything else is
//! literal. TO's `*` and `{N}` are filled, in order, with what FROM's placeholders captured
//! (TO may use fewer, never more). So `model.*=*` strips a prefix,
//! `h.{N}.attn.*=blk.{N}.attn_*` renames a family, and `lm_head.weight=output.weight` one
//! tensor. Rules are tried in the order given; the first that matches a name renames it.

use std::fmt;

/// Most placeholders one pattern may hold (matching backtracks over them).
const MAX_CAPTURES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Lit(String),
    Any,
    Digits,
}

/// One parsed rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenameRule {
    text: String,
    from: Vec<Tok>,
    to: Vec<Tok>,
}

impl fmt::Display for RenameRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn tokens(p: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut rest = p;
    while let Some(c) = rest.chars().next() {
        let (tok, len) = if c == '*' {
            (Some(Tok::Any), 1)
        } else if rest.starts_with("{N}") {
            (Some(Tok::Digits), 3)
        } else {
            lit.push(c);
            (None, c.len_utf8())
        };
        if let Some(t) = tok {
            if !lit.is_empty() {
                out.push(Tok::Lit(std::mem::take(&mut lit)));
            }
            out.push(t);
        }
        rest = &rest[len..];
    }
    if !lit.is_empty() {
        out.push(Tok::Lit(lit));
    }
    out
}

fn captures(t: &[Tok]) -> usize {
    t.iter().filter(|t| !matches!(t, Tok::Lit(_))).count()
}

impl RenameRule {
    /// Parses `FROM=TO`; the error says what is wrong with the rule.
    pub fn parse(rule: &str) -> Result<RenameRule, String> {
        let Some((from, to)) = rule.split_once('=') else {
            return Err(format!("rename rule {rule:?} has no '=' (FROM=TO)"));
        };
        if from.is_empty() {
            return Err(format!("rename rule {rule:?} has an empty FROM"));
        }
        let (from_t, to_t) = (tokens(from), tokens(to));
        let (nf, nt) = (captures(&from_t), captures(&to_t));
        if nf > MAX_CAPTURES {
            return Err(format!(
                "rename rule {rule:?} has {nf} placeholders; at most {MAX_CAPTURES}"
            ));
        }
        if nt > nf {
            return Err(format!(
                "rename rule {rule:?} uses {nt} placeholders in TO but FROM captures {nf}"
            ));
        }
        Ok(RenameRule {
            text: rule.to_owned(),
            from: from_t,
            to: to_t,
        })
    }

    /// The new name when the rule matches all of `name`.
    pub fn apply(&self, name: &str) -> Option<String> {
        let mut caps = Vec::new();
        if !matches(&self.from, name, &mut caps) {
            return None;
        }
        let mut caps = caps.into_iter();
        let mut out = String::with_capacity(name.len());
        for t in &self.to {
            match t {
                Tok::Lit(s) => out.push_str(s),
                _ => out.push_str(caps.next().unwrap_or_default()),
            }
        }
        Some(out)
    }
}

/// Whether `toks` match all of `s`, the shortest text per placeholder first; captures pushed.
fn matches<'s>(toks: &[Tok], s: &'s str, caps: &mut Vec<&'s str>) -> bool {
    let Some((first, rest)) = toks.split_first() else {
        return s.is_empty();
    };
    match first {
        Tok::Lit(l) => s
            .strip_prefix(l.as_str())
            .is_some_and(|r| matches(rest, r, caps)),
        Tok::Any | Tok::Digits => {
            let digits = matches!(first, Tok::Digits);
            // Where the placeholder's text may end: `*` may be empty, `{N}` may not.
            let ends = s
                .char_indices()
                .map(|(i, _)| i)
                .chain(std::iter::once(s.len()))
                .skip(usize::from(digits));
            for end in ends {
                let (head, tail) = s.split_at(end);
                if digits && !head.bytes().all(|b| b.is_ascii_digit()) {
                    return false;
                }
                caps.push(head);
                if matches(rest, tail, caps) {
                    return true;
                }
                caps.pop();
            }
            false
        }
    }
}

/// The first rule's rename of `name`, if any rule matches.
pub fn rename(rules: &[RenameRule], name: &str) -> Option<String> {
    rules.iter().find_map(|r| r.apply(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> RenameRule {
        RenameRule::parse(s).unwrap()
    }

    #[test]
    fn literal_prefix_and_captures() {
        assert_eq!(r("a.w=b.w").apply("a.w").as_deref(), Some("b.w"));
        assert_eq!(r("a.w=b.w").apply("a.w2"), None);
        assert_eq!(r("model.*=*").apply("model.x.y").as_deref(), Some("x.y"));
        let fam = r("h.{N}.attn.*=blk.{N}.attn_*");
        assert_eq!(fam.apply("h.12.attn.q").as_deref(), Some("blk.12.attn_q"));
        assert_eq!(fam.apply("h.x.attn.q"), None);
        assert_eq!(r("*.weight=*").apply(".weight").as_deref(), Some(""));
        assert_eq!(r("é*=*").apply("éa").as_deref(), Some("a"));
    }

    #[test]
    fn bad_rules_are_refused() {
        assert!(RenameRule::parse("abc").unwrap_err().contains("no '='"));
        assert!(RenameRule::parse("=x").is_err());
        assert!(RenameRule::parse("a=*").unwrap_err().contains("TO"));
        assert!(RenameRule::parse("*********=x").is_err());
    }

    #[test]
    fn first_matching_rule_wins() {
        let rules = [r("a.*=x.*"), r("*=y")];
        assert_eq!(rename(&rules, "a.b").as_deref(), Some("x.b"));
        assert_eq!(rename(&rules, "c").as_deref(), Some("y"));
    }
}
