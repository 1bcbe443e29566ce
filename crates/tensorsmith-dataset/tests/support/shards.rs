//! The shard files of a dataset or staging folder, for tests and the `dataset_write` fuzz
//! target (included by path).
#![allow(dead_code)]

use std::path::Path;

/// Shard file names in `dir`, sorted.
pub fn shard_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".safetensors"))
        .collect();
    v.sort();
    v
}

/// Shard bytes by name without its uuid (`part-TTTTT-NNNN`), in name order.
pub fn shard_contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    shard_files(dir)
        .into_iter()
        .map(|f| (f[..15].to_string(), std::fs::read(dir.join(&f)).unwrap()))
        .collect()
}
