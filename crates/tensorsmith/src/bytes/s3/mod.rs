//! S3 and its credentials: the store on `object_store` (`store`), multipart uploads, the
//! words and XML of S3's errors, and the AWS credential chain kept by hand (`chain` over
//! `sources`: storage options, environment, `~/.aws` profiles, web identity, container and
//! instance metadata; `sigv4` signs the STS and metadata requests the chain makes).

pub(super) mod chain;
pub(super) mod config;
pub(super) mod profile;
pub(super) mod sigv4;
pub(super) mod sources;
pub(super) mod store;
pub(super) mod uploads;
pub(super) mod words;
pub(super) mod xml;
