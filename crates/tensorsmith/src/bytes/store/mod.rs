//! What every object store shares: the client seam (`object_client`, `client`), errors,
//! a remote object read as a file (`file`), and atomic uploads in parts.

pub(super) mod client;
pub(super) mod error;
pub(super) mod file;
pub(super) mod key;
pub(super) mod object_client;
pub(super) mod part_upload;
pub(super) mod parts;
pub(super) mod upload;
