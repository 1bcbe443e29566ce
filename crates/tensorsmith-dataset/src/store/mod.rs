//! The commit protocol on a store: the `Store` seam (conditional creates and replaces,
//! ranged reads, listing), its implementations (a local folder, and S3, Azure and GCS through
//! the byte layer), and the protocol's steps on it: versions, writes, jobs, the commit,
//! adoption, clean and verify. A local folder is one more store, so each step exists once.

pub(crate) mod adopt;
pub(crate) mod clean;
pub(crate) mod commit;
pub(crate) mod gcs;
pub(crate) mod index;
pub(crate) mod job;
pub(crate) mod job_marks;
#[cfg(test)]
mod job_tests;
pub(crate) mod local;
pub(crate) mod object;
pub(crate) mod open;
pub(crate) mod prefix;
pub(crate) mod seam;
#[cfg(test)]
mod tests;
pub(crate) mod upload;
pub(crate) mod verify;
pub(crate) mod versions;
pub(crate) mod write;
