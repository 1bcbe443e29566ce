//! Self-contained HTML pages (the report page, the diff page): a template whose markers
//! `{{TITLE}}`, `{{STYLE}}`, `{{SCRIPT}}` and `{{DATA}}` are filled with the escaped title,
//! the style and script text and the page's JSON, escaped to stay inside its
//! `<script type="application/json">` element.

/// `template` with its markers filled: `title` (as text), `style`, `script`, `data_json`.
pub fn fill(template: &str, title: &str, style: &str, script: &str, data_json: &str) -> String {
    let title = escape_html(title);
    let data = escape_script_json(data_json);
    let mut out = String::with_capacity(template.len() + style.len() + script.len() + data.len());
    // Markers are looked for in the template only, never in what replaced one.
    let mut rest = template;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (marker, with) = [
            ("{{TITLE}}", title.as_str()),
            ("{{STYLE}}", style),
            ("{{SCRIPT}}", script),
            ("{{DATA}}", data.as_str()),
        ]
        .into_iter()
        .find(|(m, _)| after.starts_with(m))
        .unwrap_or(("{{", "{{"));
        out.push_str(with);
        rest = &after[marker.len()..];
    }
    out.push_str(rest);
    out
}

/// Text made safe inside an HTML element or attribute.
pub fn escape_html(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// JSON text made safe inside a `<script>` element: `<`, `>` and `&` (which JSON has only
/// inside strings) as `\u` escapes, so no `</script>` or `<!--` can end or change the
/// element; U+2028 and U+2029 too, so the text stays valid JavaScript should anyone paste it.
pub fn escape_script_json(json: &str) -> String {
    let mut o = String::with_capacity(json.len() + 64);
    for c in json.chars() {
        match c {
            '<' => o.push_str("\\u003c"),
            '>' => o.push_str("\\u003e"),
            '&' => o.push_str("\\u0026"),
            '\u{2028}' => o.push_str("\\u2028"),
            '\u{2029}' => o.push_str("\\u2029"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_end_its_script() {
        let v = serde_json::json!({"name": "</script><script>alert(1)</script>\u{2028}&<!--"});
        let e = escape_script_json(&v.to_string());
        assert!(!e.contains('<') && !e.contains('\u{2028}'), "{e}");
        let back: serde_json::Value = serde_json::from_str(&e).expect("still JSON");
        assert_eq!(back, v);
    }

    #[test]
    fn markers_are_filled_once_from_the_template() {
        let page = fill(
            "<t>{{TITLE}}</t>{{DATA}}{{x",
            "a<b",
            "",
            "",
            "{\"k\":\"{{SCRIPT}}\"}",
        );
        assert_eq!(page, "<t>a&lt;b</t>{\"k\":\"{{SCRIPT}}\"}{{x");
    }
}
