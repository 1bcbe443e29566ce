//! Files beside a dataset that are not its: a user's own `part-*.safetensors` in a folder that
//! holds no dataset (refused as neighbours by mode error and append, never removed), and the
//! names used in messages about them.

use crate::error::{DatasetError, Result};
use crate::job_options::WriteMode;
use crate::manifest::is_shard_file_name;
use std::path::Path;

/// Up to five names, then how many more.
pub(crate) fn list_names(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}

/// Files named like shards (`part-*.safetensors`) in `dir`, sorted.
pub(crate) fn shard_named_files(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(DatasetError::io(dir, e)),
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| n.starts_with("part-") && is_shard_file_name(n))
        .collect();
    out.sort();
    Ok(out)
}

/// A write in mode error or append into `dir`, which holds no dataset: refused when files
/// named like shards are there (a reader of the layout could take them for the dataset's).
/// (Shards a killed commit of this folder left, which `_tensorsmith/pending` names, are not in
/// the way: the commit removes them.)
pub(crate) fn refuse_in_the_way(dir: &Path, mode: WriteMode) -> Result<()> {
    let mode = match mode {
        WriteMode::Overwrite => return Ok(()),
        WriteMode::ErrorIfExists => "error",
        WriteMode::Append => "append",
    };
    let pending = crate::pending::pending_names(dir)?;
    let names: Vec<String> = shard_named_files(dir)?
        .into_iter()
        .filter(|n| !pending.contains(n))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    Err(DatasetError::Conflict {
        dir: dir.to_path_buf(),
        msg: format!(
            "holds no dataset but {} file(s) named like shards ({}); tensorsmith does not write a dataset beside them in mode {mode} (move them, write elsewhere, or use --mode overwrite, which writes beside them and never touches them)",
            names.len(),
            list_names(&names)
        ),
    })
}
