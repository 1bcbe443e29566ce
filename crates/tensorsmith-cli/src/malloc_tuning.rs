//! glibc's malloc gives threads their own arenas (up to 8 per core), and a freed buffer stays
//! in the arena of the thread that allocated it, for that arena's next allocations only. The
//! store layer's part-sized buffers (8 MiB GETs, read-ahead blocks, decoded batches) are
//! allocated on many threads (the I/O runtime's workers, uploaders, read-ahead threads, the
//! tasks), so freed ones pile up across arenas. One arena per core lets them be reused by
//! whichever thread allocates next. Measured on `dataset write` Parquet on S3 to a dataset
//! on S3 (benches/dataset_s3_to_s3.py, 2 GiB, 2 cores; live heap at its peak 192 MiB by
//! heaptrack): peak RssAnon 345 MiB with glibc's defaults, 237-241 MiB with this, at the same
//! speed (15.7-16.5 s against 16.0-16.6 s); fixing the mmap threshold at 1 MiB instead gave
//! 190 MiB but cost 1-3 s in page faults (every large buffer mapped anew). The Python
//! package leaves its host process's allocator as it is.

/// Caps glibc's arenas at one per core, at least 2 (no-op elsewhere, and when the
/// environment sets `MALLOC_ARENA_MAX` itself).
pub fn cap_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .max(2);
        // SAFETY: mallopt only changes the allocator's settings; called first thing in main,
        // before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, cores as libc::c_int);
        }
    }
}
