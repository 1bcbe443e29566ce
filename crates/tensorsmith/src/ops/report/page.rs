//! The report page as one self-contained HTML document: its body, style and script in
//! `page/` (hand-written, included at build time) in `html_page`'s skeleton, around the
//! page's JSON in a `<script type="application/json">` element. Nothing is fetched when the
//! page is viewed: its Content-Security-Policy allows no network at all.

use crate::ops::report::html_page::Page;

const PAGE: Page = Page {
    body: include_str!("page/page.html"),
    data_id: "report-data",
    script: SCRIPT,
};
const STYLE: &str = include_str!("page/page.css");
const SCRIPT: &str = include_str!("page/page.js");

/// The page: `title` (as text) and `data_json` (the page's JSON, see `report_data`).
pub fn render(title: &str, data_json: &str) -> String {
    PAGE.render(title, STYLE, data_json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn style_and_script_cannot_end_their_elements() {
        crate::ops::report::html_page::assert_sealed(&PAGE, STYLE);
    }

    #[test]
    fn the_page_holds_title_style_script_and_data_once() {
        let page = render("a <b> & \"c\"", "{\"x\":\"{{SCRIPT}}\"}");
        assert!(page.contains("<title>a &lt;b&gt; &amp; &quot;c&quot;</title>"));
        assert!(page.contains("{\"x\":\"{{SCRIPT}}\"}"));
        assert_eq!(
            page.matches("data-ready").count(),
            SCRIPT.matches("data-ready").count()
        );
        assert!(!page.contains("{{DATA}}") && !page.contains("{{STYLE}}"));
    }
}
