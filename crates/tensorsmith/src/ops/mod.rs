//! Operations written once against the neutral index: inspect (summaries and a stable JSON
//! form) and convert (rewrite with optional dtype casts).

pub mod convert;
pub mod convert_ztensor;
pub mod densify;
pub mod diff;
pub mod diff_json;
pub mod hash;
pub mod inspect;
pub mod open;
pub mod sharded;
pub mod tree;
pub mod wi_hash;
