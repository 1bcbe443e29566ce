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
//!
//! glibc also hands memory back too eagerly for a streaming convert: its dynamic thresholds
//! follow the largest buffer freed (a 4 MiB chunk: mapped below 4 MiB, the heap's top trimmed
//! past 8 MiB), so every chunk's few multi-MiB buffers were trimmed away when freed and
//! faulted in again, page by page, for the next chunk. Fixed thresholds keep them: buffers
//! below 32 MiB come from the arenas, and an arena keeps up to 64 MiB free at its top. An
//! HF folder (1.1 GiB BF16, 2 cores) to an F16 GGUF took 4.5-4.6 s against 6.9-7.8 s, to
//! Q4_K_M 18.6-19.2 s against 22.4-22.6 s (minor faults 1.1 M -> 37 K, system time 4.6 ->
//! 0.5 s); peak RssAnon 23 MiB either way for F16, 139-143 MiB against 96-126 MiB for
//! Q4_K_M; a local Parquet `dataset write` the same (1.2-1.3 s, 10-12 MiB). Only `convert`
//! sets them: a `dataset write` of Parquet on S3 to a dataset on S3 (2 GiB, 2 cores, the
//! same bench as above) peaked at 227-273 MiB RssAnon with them, over the store layer's
//! 256 MiB, and at 181-183 MiB without (its 16 MiB shard buffers then mapped and unmapped:
//! 36-38 s against 41-42 s).

/// Fixes glibc's mmap and trim thresholds (see above; no-op elsewhere, and when the
/// environment sets any of `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_` or
/// `MALLOC_TOP_PAD_` itself).
pub fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if [
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_TOP_PAD_",
    ]
    .iter()
    .all(|k| std::env::var_os(k).is_none())
    {
        // SAFETY: as in `cap_arenas`.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        }
    }
}

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
