//! Azure Blob Storage: its settings and every credential source (`config`), and the store
//! on `object_store` (`store`).

pub(super) mod config;
pub(super) mod store;
