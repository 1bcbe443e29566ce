//! Self-contained HTML pages (the report page, the diff page): one skeleton
//! (`html_page/skeleton.html`: the head with a Content-Security-Policy that allows no network,
//! the title, the footer, the page's JSON in a `<script type="application/json">` element and
//! its script) around each page's own body, with the helpers of `html_page/common.js` placed
//! before each page's script. The JSON is escaped to stay inside its element.

const SKELETON: &str = include_str!("html_page/skeleton.html");
const COMMON_SCRIPT: &str = include_str!("html_page/common.js");

/// What one kind of page brings to the skeleton.
pub struct Page {
    /// The page's `<main>` element.
    pub body: &'static str,
    /// The id of the element holding the page's JSON (the script finds it by this id).
    pub data_id: &'static str,
    pub script: &'static str,
}

impl Page {
    /// The page: `title` (as text), `style`, and `data_json`, the page's JSON.
    pub fn render(&self, title: &str, style: &str, data_json: &str) -> String {
        let script = format!("{COMMON_SCRIPT}\n{}", self.script);
        fill(
            SKELETON,
            &[
                ("{{TITLE}}", &escape_html(title)),
                ("{{STYLE}}", style),
                ("{{BODY}}", self.body),
                ("{{DATA_ID}}", self.data_id),
                ("{{DATA}}", &escape_script_json(data_json)),
                ("{{SCRIPT}}", &script),
            ],
        )
    }
}

/// For each page's tests: its style and script cannot end their elements, and its body holds
/// no marker (markers belong to the skeleton).
#[cfg(test)]
pub fn assert_sealed(page: &Page, style: &str) {
    assert!(!page.script.to_ascii_lowercase().contains("</script"));
    assert!(!style.to_ascii_lowercase().contains("</style"));
    assert!(!page.body.contains("{{"));
}

/// `template` with each marker replaced by its text. Markers are looked for in the template
/// only, never in what replaced one; a `{{` that starts no marker stays.
fn fill(template: &str, markers: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + markers.iter().map(|m| m.1.len()).sum::<usize>());
    let mut rest = template;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (marker, with) = markers
            .iter()
            .copied()
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
            &[("{{TITLE}}", "a"), ("{{DATA}}", "{\"k\":\"{{TITLE}}\"}")],
        );
        assert_eq!(page, "<t>a</t>{\"k\":\"{{TITLE}}\"}{{x");
    }

    #[test]
    fn the_skeleton_and_the_shared_script_cannot_be_broken_out_of() {
        assert!(!COMMON_SCRIPT.to_ascii_lowercase().contains("</script"));
        for m in [
            "{{TITLE}}",
            "{{STYLE}}",
            "{{BODY}}",
            "{{DATA_ID}}",
            "{{DATA}}",
            "{{SCRIPT}}",
        ] {
            assert!(SKELETON.contains(m), "{m}");
        }
        let p = Page {
            body: "<main>{{DATA}}</main>",
            data_id: "d",
            script: "go();",
        };
        let html = p.render("x<y", "b{}", "{\"a\":\"</script>\"}");
        assert!(html.contains("<title>x&lt;y</title>"));
        assert!(html.contains("<main>{{DATA}}</main>"));
        assert!(html.contains("id=\"d\">{\"a\":\"\\u003c/script\\u003e\"}</script>"));
        assert!(
            html.contains("var tsPage") && html.ends_with("go();</script>\n</body>\n</html>\n")
        );
    }
}
