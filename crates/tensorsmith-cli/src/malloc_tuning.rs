//! glibc's malloc hands buffers of 128 KiB and more to `mmap` and back to the kernel when
//! freed, but the first such free raises that threshold to the freed size (up to 32 MiB), and
//! from then on the part-sized buffers of the store layer (8 MiB GETs and parts, decoded
//! batches) come from the arenas of the many I/O threads, where freed ones stay resident.
//! Measured on `dataset write` Parquet on S3 to a dataset on S3 (benches/dataset_s3_to_s3.py):
//! live heap at its peak 192 MiB (heaptrack), peak RssAnon 352 MiB; with the threshold fixed at
//! 1 MiB, 188 MiB, in the same time. Fixing it (any `mallopt` of it turns the dynamic rule off)
//! keeps large buffers mapped only while they live. The Python package leaves its host
//! process's allocator as it is.

/// Fixes glibc's mmap threshold at 1 MiB (no-op elsewhere, and when the environment sets
/// `MALLOC_MMAP_THRESHOLD_` itself).
pub fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only changes the allocator's settings; called first thing in main,
        // before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}
