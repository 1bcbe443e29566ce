//! Reading a write's input: Parquet files, Arrow IPC files and streams, record batches in
//! memory, local or by ranged reads from stores; listing folders and prefixes; cutting rows
//! into the plan's batches.

pub(crate) mod cut;
pub(crate) mod files;
pub(crate) mod guarded_pages;
pub(crate) mod list;
pub(crate) mod memory;
pub(crate) mod remote_chunks;
pub(crate) mod schema;
pub(crate) mod source;
pub(crate) mod value_type;
