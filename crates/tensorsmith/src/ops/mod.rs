//! Operations written once against the neutral index: inspect (summaries and a stable JSON
//! form) and convert (rewrite with optional dtype casts).

pub mod convert;
pub mod diff;
pub mod inspect;
pub mod open;
pub mod tree;
