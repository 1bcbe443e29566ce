//! The flat XML documents read outside object_store: S3's `ListMultipartUploads`
//! (`s3_uploads.rs`) and STS's replies (`aws_sources.rs`), elements found by tag and their
//! text unescaped. Flat documents without attributes, comments or CDATA in the elements read
//! here; a few lines, where an XML crate's serde structs would be more.

/// The inner text of every `<tag>…</tag>` in `xml`, in order (tags of the same name are
/// never nested in S3's responses).
pub(crate) fn elements<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let Some(j) = after.find(&close) else { break };
        out.push(&after[..j]);
        rest = &after[j + close.len()..];
    }
    out
}

/// The unescaped text of the first `<tag>` in `xml`.
pub(crate) fn text(xml: &str, tag: &str) -> Option<String> {
    elements(xml, tag).first().map(|s| unescape(s))
}

/// XML text with its five predefined entities and character references resolved.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(end) = after.find(';').filter(|&e| e <= 10) else {
            out.push('&');
            rest = after;
            continue;
        };
        let name = &after[..end];
        let ch = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                .ok()
                .and_then(char::from_u32),
            n if n.starts_with('#') => n[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match ch {
            Some(c) => {
                out.push(c);
                rest = &after[end + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_text_and_entities() {
        let xml = "<R><Contents><Key>a&amp;b &lt;c&gt;</Key><ETag>&quot;e1&quot;</ETag></Contents>\
                   <Contents><Key>x&#47;y&#x41;</Key></Contents><IsTruncated>false</IsTruncated></R>";
        let c = elements(xml, "Contents");
        assert_eq!(c.len(), 2);
        assert_eq!(text(c[0], "Key").unwrap(), "a&b <c>");
        assert_eq!(text(c[0], "ETag").unwrap(), "\"e1\"");
        assert_eq!(text(c[1], "Key").unwrap(), "x/yA");
        assert_eq!(text(xml, "IsTruncated").unwrap(), "false");
        assert_eq!(text(xml, "Missing"), None);
        assert_eq!(unescape("a & b &bogus; &"), "a & b &bogus; &");
    }
}
