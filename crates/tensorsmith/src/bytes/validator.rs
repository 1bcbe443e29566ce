//! One version of a remote object, pinned when it is opened, so that every later read is
//! checked to come from that version and an object replaced during a read is an error
//! ([`ErrorKind::ChangedDuringRead`]), never a mix of two versions. Backend-neutral: the HTTP
//! file uses it today; an object store's reader gives it the same three facts (entity tag,
//! last-modified time, length) from its own responses.
//!
//! What is pinned, from the first response (RFC 9110 §8.8, §13.1):
//! - a strong `ETag` when there is one: compared byte for byte, and sent as `If-Match`, so a
//!   server that honours it refuses a changed object with 412;
//! - else `Last-Modified`: compared as sent, and sent as `If-Unmodified-Since`. A weak `ETag`
//!   (`W/"…"`) is not used when there is a `Last-Modified`: RFC 9110 forbids weak tags in
//!   `If-Match` and `If-Range` for ranges;
//! - else a weak `ETag`: compared by weak comparison (the opaque tags agree), nothing sent;
//! - else nothing: only the object's length is compared, so a replacement of the same length
//!   goes unseen (the server gives nothing that could tell).
//!
//! The length (a 206's `Content-Range` total, a 200's `Content-Length`) is compared always. A
//! response that lacks the pinned validator is a mismatch: a 206 must carry the `ETag` and
//! `Last-Modified` a 200 would (RFC 9110 §15.3.7), so silence cannot be taken for "same".

use crate::error::ErrorKind;

/// What names one version of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validator {
    /// A strong entity tag, quotes included (`"abc"`).
    StrongEtag(String),
    /// A `Last-Modified` date, as the server wrote it.
    LastModified(String),
    /// A weak entity tag (`W/"abc"`), used only when there is no `Last-Modified`.
    WeakEtag(String),
}

impl Validator {
    /// The response header (or store field) the validator is read from.
    pub fn name(&self) -> &'static str {
        match self {
            Validator::StrongEtag(_) | Validator::WeakEtag(_) => "ETag",
            Validator::LastModified(_) => "Last-Modified",
        }
    }

    /// The validator as the server sent it (an ETag with its quotes and any `W/`, or the
    /// date text).
    pub fn value(&self) -> &str {
        match self {
            Validator::StrongEtag(v) | Validator::LastModified(v) | Validator::WeakEtag(v) => v,
        }
    }

    /// The request header that asks the server to refuse (412) a changed object, and its
    /// value; none for a weak tag, which RFC 9110 does not allow there.
    pub fn precondition(&self) -> Option<(&'static str, &str)> {
        match self {
            Validator::StrongEtag(v) => Some(("If-Match", v)),
            Validator::LastModified(v) => Some(("If-Unmodified-Since", v)),
            Validator::WeakEtag(_) => None,
        }
    }

    /// Whether a response's `etag` and `last_modified` name this version.
    fn matches(&self, etag: Option<&str>, last_modified: Option<&str>) -> bool {
        match self {
            Validator::StrongEtag(v) => etag.map(str::trim) == Some(v.as_str()),
            Validator::LastModified(v) => last_modified.map(str::trim) == Some(v.as_str()),
            Validator::WeakEtag(v) => etag.map(opaque_tag) == Some(opaque_tag(v)),
        }
    }

    /// What a response says in place of this validator.
    fn seen(&self, etag: Option<&str>, last_modified: Option<&str>) -> String {
        let v = match self {
            Validator::StrongEtag(_) | Validator::WeakEtag(_) => etag,
            Validator::LastModified(_) => last_modified,
        };
        v.map_or_else(|| "none".to_owned(), |v| v.trim().to_owned())
    }
}

/// An entity tag without its weakness indicator (weak comparison, RFC 9110 §8.8.3.2).
fn opaque_tag(tag: &str) -> &str {
    let t = tag.trim();
    t.strip_prefix("W/").unwrap_or(t)
}

/// The version an open object was first seen at: its validator, if the server gave one, and
/// its length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    validator: Option<Validator>,
    len: u64,
}

impl Pinned {
    /// Pins the first response's version: its `ETag` and `Last-Modified` headers (or a store's
    /// equivalents) and the object's length.
    pub fn new(etag: Option<&str>, last_modified: Option<&str>, len: u64) -> Pinned {
        let etag = etag.map(str::trim).filter(|t| !t.is_empty());
        let last_modified = last_modified.map(str::trim).filter(|t| !t.is_empty());
        let validator = match (etag, last_modified) {
            (Some(t), _) if !t.starts_with("W/") => Some(Validator::StrongEtag(t.to_owned())),
            (_, Some(lm)) => Some(Validator::LastModified(lm.to_owned())),
            (Some(t), None) => Some(Validator::WeakEtag(t.to_owned())),
            (None, None) => None,
        };
        Pinned { validator, len }
    }

    /// The pinned validator; `None` when the server sent none (only the length is checked).
    pub fn validator(&self) -> Option<&Validator> {
        self.validator.as_ref()
    }

    /// The object's length in bytes when it was first seen.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object was empty when first seen.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The request header that makes the server refuse a changed object, if any.
    pub fn precondition(&self) -> Option<(&'static str, &str)> {
        self.validator.as_ref().and_then(Validator::precondition)
    }

    /// Checks a later response: its `ETag`, `Last-Modified` and the object's length it gives
    /// must be the pinned ones.
    pub fn check(
        &self,
        etag: Option<&str>,
        last_modified: Option<&str>,
        len: u64,
    ) -> Result<(), ErrorKind> {
        if let Some(v) = &self.validator {
            if !v.matches(etag, last_modified) {
                return Err(ErrorKind::ChangedDuringRead {
                    what: v.name(),
                    pinned: v.value().to_owned(),
                    now: v.seen(etag, last_modified),
                });
            }
        }
        if len != self.len {
            return Err(ErrorKind::ChangedDuringRead {
                what: "length",
                pinned: format!("{} bytes", self.len),
                now: format!("{len} bytes"),
            });
        }
        Ok(())
    }

    /// The error for a server that refused a later read because its precondition failed
    /// (HTTP 412, or a store's "condition not met").
    pub fn refused(&self) -> ErrorKind {
        let (what, pinned, header) = match &self.validator {
            Some(v) => (
                v.name(),
                v.value().to_owned(),
                v.precondition().map(|p| p.0),
            ),
            None => ("version", "unknown".to_owned(), None),
        };
        ErrorKind::ChangedDuringRead {
            what,
            pinned,
            now: format!(
                "changed (the server answered 412 Precondition Failed to {})",
                header.unwrap_or("the request")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strong_etag_is_preferred_then_last_modified_then_a_weak_etag() {
        let lm = "Tue, 02 Jan 2024 00:00:00 GMT";
        let p = Pinned::new(Some("\"a\""), Some(lm), 5);
        assert_eq!(p.precondition(), Some(("If-Match", "\"a\"")));
        let p = Pinned::new(Some("W/\"a\""), Some(lm), 5);
        assert_eq!(p.precondition(), Some(("If-Unmodified-Since", lm)));
        let p = Pinned::new(Some("W/\"a\""), None, 5);
        assert_eq!(p.validator(), Some(&Validator::WeakEtag("W/\"a\"".into())));
        assert_eq!(p.precondition(), None);
        assert_eq!(Pinned::new(None, None, 5).validator(), None);
    }

    #[test]
    fn checks_compare_the_validator_and_the_length() {
        let p = Pinned::new(Some("\"a\""), None, 5);
        assert!(p.check(Some("\"a\""), None, 5).is_ok());
        assert!(p.check(Some("\"b\""), None, 5).is_err());
        assert!(
            p.check(Some("W/\"a\""), None, 5).is_err(),
            "strong comparison"
        );
        assert!(
            p.check(None, None, 5).is_err(),
            "a missing ETag is not the same one"
        );
        assert!(p.check(Some("\"a\""), None, 6).is_err());
        let weak = Pinned::new(Some("W/\"a\""), None, 5);
        assert!(
            weak.check(Some("\"a\""), None, 5).is_ok(),
            "weak comparison"
        );
        assert!(weak.check(Some("W/\"b\""), None, 5).is_err());
        let none = Pinned::new(None, None, 5);
        assert!(none.check(Some("\"x\""), Some("y"), 5).is_ok());
        assert!(none.check(None, None, 4).is_err());
        let e = p.check(Some("\"b\""), None, 5).unwrap_err().to_string();
        assert!(
            e.contains("\"a\"") && e.contains("\"b\"") && e.contains("ETag"),
            "{e}"
        );
    }
}
