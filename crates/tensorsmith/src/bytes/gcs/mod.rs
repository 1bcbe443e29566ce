//! Google Cloud Storage through its XML API, by hand (the emulators the tests run on do
//! not serve what `object_store`'s GCS client needs): the file (`store`), OAuth tokens from
//! service accounts, the metadata server and external accounts (`auth`), the client and
//! resumable uploads.

mod store;
pub(super) use store::*;

pub(super) mod auth;
pub(super) mod client;
pub(super) mod upload;
