//! `verify`: what a model's index does not already guarantee, checked by a full read. Each
//! tensor is checked by its file's format (zTensor: every digest, decoded parts and data
//! rules; formats without digests: nothing beyond the header), in parallel.

use crate::format::VerifyReport;
use crate::model::Model;
use rayon::prelude::*;
use std::path::Path;

/// Checks every tensor of `model` and reports every failure.
pub fn verify(model: &Model) -> VerifyReport {
    crate::progress::expect(model.index.tensors.iter().map(|t| t.byte_len()).sum());
    let checks: Vec<_> = model
        .index
        .tensors
        .par_iter()
        .map(|t| {
            let f = model.file_of(t);
            let check = f
                .format()
                .verify_tensor(f.bytes(), t)
                .in_file(Path::new(&f.location));
            crate::progress::advance(t.byte_len());
            check
        })
        .collect();
    VerifyReport::collect(checks)
}
