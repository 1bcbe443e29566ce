//! Shell-style patterns over tensor names (`stats --tensors`, `--allow-zero`): `*` matches
//! any run of characters (dots included), `?` one character, `[abc]`, `[a-z]` and `[!abc]`
//! one character of (or not of) a set; `\` makes the next character literal. A pattern
//! matches the whole name.

use crate::error::{Error, ErrorKind, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(char),
    Any,
    Star,
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
    tokens: Vec<Token>,
}

impl Glob {
    /// Parses `pattern`; an unclosed `[` or a trailing `\` is an error naming the pattern.
    pub fn new(pattern: &str) -> Result<Glob> {
        let bad = |why: &str| Error::new(ErrorKind::BadPattern(format!("{pattern:?}: {why}")));
        let mut tokens = Vec::new();
        let mut it = pattern.chars().peekable();
        while let Some(c) = it.next() {
            tokens.push(match c {
                '*' => Token::Star,
                '?' => Token::Any,
                '\\' => Token::Char(it.next().ok_or_else(|| bad("ends with a lone '\\'"))?),
                '[' => {
                    let negated = it.next_if(|&c| c == '!' || c == '^').is_some();
                    let mut ranges = Vec::new();
                    let mut first = true;
                    loop {
                        let c = it.next().ok_or_else(|| bad("'[' is never closed"))?;
                        if c == ']' && !first {
                            break;
                        }
                        first = false;
                        let lo = if c == '\\' {
                            it.next().ok_or_else(|| bad("'[' is never closed"))?
                        } else {
                            c
                        };
                        let hi = if it.peek() == Some(&'-') {
                            let mut look = it.clone();
                            look.next();
                            match look.peek() {
                                Some(&h) if h != ']' => {
                                    it.next();
                                    it.next();
                                    h
                                }
                                _ => lo,
                            }
                        } else {
                            lo
                        };
                        ranges.push((lo, hi));
                    }
                    Token::Set { negated, ranges }
                }
                c => Token::Char(c),
            });
        }
        Ok(Glob {
            text: pattern.to_string(),
            tokens,
        })
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the whole of `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        // Iterative matching with one backtrack point (the last star): linear for patterns
        // with one star, never exponential.
        let (mut p, mut n) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match self.tokens.get(p) {
                Some(Token::Star) => {
                    star = Some((p, n));
                    p += 1;
                    continue;
                }
                Some(t) if one(t, name[n]) => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
            match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            }
        }
        self.tokens[p..].iter().all(|t| *t == Token::Star)
    }
}

fn one(t: &Token, c: char) -> bool {
    match t {
        Token::Char(x) => *x == c,
        Token::Any => true,
        Token::Star => false,
        Token::Set { negated, ranges } => {
            ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
        }
    }
}

/// Parses every pattern.
pub fn parse_all(patterns: &[String]) -> Result<Vec<Glob>> {
    patterns.iter().map(|p| Glob::new(p)).collect()
}

/// Whether any pattern matches `name`.
pub fn any_matches(globs: &[Glob], name: &str) -> bool {
    globs.iter().any(|g| g.matches(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, n: &str) -> bool {
        Glob::new(p).unwrap().matches(n)
    }

    #[test]
    fn stars_questions_and_sets() {
        assert!(m("*", ""));
        assert!(m("*.bias", "model.layers.0.mlp.bias"));
        assert!(!m("*.bias", "model.layers.0.mlp.bias2"));
        assert!(m(
            "model.layers.*.q_proj.*",
            "model.layers.12.q_proj.weight"
        ));
        assert!(m("blk.?.attn_q.weight", "blk.3.attn_q.weight"));
        assert!(!m("blk.?.attn_q.weight", "blk.13.attn_q.weight"));
        assert!(m("blk.[0-4].*", "blk.3.x") && !m("blk.[0-4].*", "blk.5.x"));
        assert!(m("blk.[!0-4].*", "blk.5.x") && !m("blk.[!0-4].*", "blk.3.x"));
        assert!(m("a[]]b", "a]b"));
        assert!(m("a[x-]b", "a-b"));
        assert!(m(r"lit\*", "lit*") && !m(r"lit\*", "litx"));
        assert!(m("*a*a*a*", "banana_a") && !m("*a*a*a*a*", "banana"));
        assert!(m("é*", "école"));
    }

    #[test]
    fn bad_patterns_name_themselves() {
        let e = Glob::new("blk.[0-4").unwrap_err().to_string();
        assert!(e.contains("blk.[0-4") && e.contains("never closed"), "{e}");
        assert!(Glob::new("x\\").is_err());
    }
}
