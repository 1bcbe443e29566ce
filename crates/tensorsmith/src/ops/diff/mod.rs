//! `diff`: two models compared, structurally and value by value: pairing by name, rename
//! rules and llama.cpp's names, error metrics, the JSON form and the HTML page.

mod run;
pub use run::*;

pub mod json;
pub mod llama;
pub mod metrics;
pub mod page;
pub mod pairing;
pub(crate) mod rename;
