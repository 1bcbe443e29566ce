//! The diff page (`diff --values --html PAGE`): one self-contained HTML document around a
//! diff's JSON (`diff_json`, with value metrics): a summary, the error of each tensor pair by
//! layer (one line per tensor role, log scale), the worst twenty pairs and a sortable table of
//! every pair. The template, style and script are in `page/` (the report page's style
//! first, then the diff's own); the filling and escaping is `html_page`'s. Nothing is fetched
//! when the page is viewed (Content-Security-Policy `default-src 'none'`); the page sets
//! `data-ready` on its root once drawn; it is written atomically.

use crate::error::Result;
use crate::ops::report::html_page::Page;
use serde_json::Value;
use std::io::Write as _;
use std::path::Path;

const PAGE: Page = Page {
    body: include_str!("page/page.html"),
    data_id: "diff-data",
    script: SCRIPT,
};
const BASE_STYLE: &str = include_str!("../report/page/page.css");
const STYLE: &str = include_str!("page/page.css");
const SCRIPT: &str = include_str!("page/page.js");

/// The page for a diff's JSON, as HTML text.
pub fn diff_html(title: &str, diff_json: &Value) -> String {
    let style = format!("{BASE_STYLE}\n{STYLE}");
    PAGE.render(title, &style, &diff_json.to_string())
}

/// Writes the page to `out` (a temporary file renamed into place). Returns its length.
pub fn write_diff_page(out: &Path, title: &str, diff_json: &Value) -> Result<u64> {
    let html = diff_html(title, diff_json);
    crate::sink::write_atomically(out, |f| {
        f.write_all(html.as_bytes())?;
        Ok(html.len() as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn style_and_script_cannot_end_their_elements() {
        crate::ops::report::html_page::assert_sealed(&PAGE, STYLE);
    }

    #[test]
    fn the_page_embeds_the_json_escaped() {
        let v = serde_json::json!({"a": "</script>", "values": null});
        let page = diff_html("x<y", &v);
        assert!(page.contains("<title>x&lt;y</title>"));
        assert!(page.contains("\\u003c/script\\u003e"));
        assert!(page.contains("default-src 'none'"));
    }
}
