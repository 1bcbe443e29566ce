//! `fetch_into`: a whole remote object into a caller's buffer with as few requests as its
//! store allows (`tensorsmith::bytes::fetch_whole`: one GET on S3 and Azure), for the node
//! cache of store datasets (`_shard_cache.py`), which knows each shard's size from the
//! manifest and checks its digests after.

use crate::errors::{raise, IntoPy};
use crate::file::storage_options;
use pyo3::prelude::*;

/// Fetches the object at `url` (`len` bytes, else an error) into the `len` bytes at `addr`,
/// without the GIL.
#[pyfunction]
#[pyo3(signature = (url, storage, addr, len))]
pub fn fetch_into(
    py: Python<'_>,
    url: &str,
    storage: Vec<(String, String)>,
    addr: usize,
    len: usize,
) -> PyResult<()> {
    if addr == 0 && len > 0 {
        return Err(raise(py, "OptionError", "fetch_into: null address".into()));
    }
    let opts = storage_options(py, storage)?;
    py.detach(|| {
        // SAFETY: the caller (tensorsmith's shard cache, never user code) passes the address
        // of a live writable mapping of at least `len` bytes that nothing else touches until
        // this call returns.
        let buf: &mut [u8] = if len == 0 {
            &mut []
        } else {
            unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) }
        };
        let mut out = std::io::Cursor::new(buf);
        tensorsmith::bytes::fetch_whole(url, &opts, len as u64, &mut out)
    })
    .py_err(py)
}
