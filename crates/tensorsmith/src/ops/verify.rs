//! `verify`: what a model's index does not already guarantee, checked by a full read. Each
//! tensor is checked by its file's format (zTensor: every digest, decoded parts and data
//! rules; formats without digests: nothing beyond the header), in parallel.

use crate::error::{Error, ErrorKind};
use crate::format::VerifyReport;
use crate::model::Model;
use rayon::prelude::*;
use std::path::Path;

/// Checks every tensor of `model` and reports every failure.
///
/// Nothing stops the check: every failure lands in [`VerifyReport::failures`], naming its
/// file and tensor. Their kinds: [`ErrorKind::DigestMismatch`] (a part, or an ONNX external
/// data file's SHA-1), [`ErrorKind::ZtCompression`] / [`ErrorKind::ZtDecodedLength`] /
/// [`ErrorKind::ZtSeekTable`] (a corrupt encoded part), [`ErrorKind::ZtLayoutData`] (data that
/// breaks its layout's rules), and the read errors of [`Model::read`].
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
    let mut report = VerifyReport::collect(checks);
    // ONNX sparse initializers: every index inside the shape (onnx.checker's rule; a copy to
    // another format carries them as they are, and only densifying would find them).
    for t in model.index.tensors.iter().filter(|t| {
        matches!(&t.layout, crate::index::Layout::Other(l) if &**l == crate::onnx::SPARSE_LAYOUT)
    }) {
        if let Err(e) = crate::ops::convert::densify::check_onnx_sparse(model, t) {
            let f = model.file_of(t);
            report.failures.push(e.in_file(Path::new(&f.location)));
        }
    }
    // Whole-file digests (ONNX external data `checksum`): each file read once.
    for f in model.files.iter().filter(|f| !f.sha1.is_empty()) {
        report.checked += 1;
        let actual = match crate::digest::sha1_hex(f.bytes()) {
            Ok(a) => a,
            Err(e) => {
                report.failures.push(e.in_file(Path::new(&f.location)));
                continue;
            }
        };
        for (tensor, want) in &f.sha1 {
            if !want.eq_ignore_ascii_case(&actual) {
                report.failures.push(
                    Error::new(ErrorKind::DigestMismatch {
                        expected: format!("sha1:{want}"),
                        actual: format!("sha1:{actual}"),
                    })
                    .at_tensor(tensor)
                    .in_file(Path::new(&f.location)),
                );
            }
        }
    }
    report
}
