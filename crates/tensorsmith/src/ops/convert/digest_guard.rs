//! A conversion never copies a tensor whose bytes no longer match the digest its input
//! records (a flipped bit in a `.safetensors` with `tensorsmith.digest`, a `.zt` checksum):
//! it fails naming the tensor, and writes nothing. Safetensors output copied by the kernel
//! checks beside the copy (a second thread hashes the mapped source while the kernel copies
//! it, and the output is committed only once every digest held), so the check costs little
//! wall time; streamed safetensors output checks on its one read (`ModelRange`); other
//! outputs check before writing.

use crate::error::Result;
use crate::index::TensorInfo;
use crate::model::Model;
use crate::ops::convert::options::ConvertOptions;

fn check_all(input: &Model, tensors: &[&TensorInfo]) -> Result<()> {
    tensors.iter().try_for_each(|t| input.check_digests(t))
}

/// Runs `write` while another thread checks the recorded digests of `tensors`; the write's
/// result (an output not yet committed) is returned only when every digest held.
pub(crate) fn beside<T>(
    input: &Model,
    tensors: &[&TensorInfo],
    opts: &ConvertOptions,
    write: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if opts.skip_digest_check || !tensors.iter().any(|t| input.has_digest(t)) {
        return write();
    }
    std::thread::scope(|s| {
        let check = s.spawn(|| check_all(input, tensors));
        let written = write();
        let checked = check.join().expect("the digest check does not panic");
        checked.and(written)
    })
}

/// Checks the recorded digests of every tensor of `input` before a write that cannot be
/// held back from its commit.
pub(crate) fn before(input: &Model, opts: &ConvertOptions) -> Result<()> {
    if opts.skip_digest_check {
        return Ok(());
    }
    let tensors: Vec<&TensorInfo> = input.index.tensors.iter().collect();
    check_all(input, &tensors)
}
