//! `report`: one self-contained HTML page about a model: its data (`data`), the page
//! (`page`, with its HTML, style and script in `page/`) and what the report and diff pages
//! share (`html_page`).

mod run;
pub use run::*;

pub mod data;
pub(crate) mod html_page;
pub(crate) mod page;
