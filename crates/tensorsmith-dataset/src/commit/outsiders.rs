//! Files beside a dataset that are not its: a user's own `part-*.safetensors` in a folder that
//! holds no dataset (refused as neighbours by mode error and append, never removed), and the
//! names used in messages about them.

use crate::error::{DatasetError, Result};
use crate::manifest::is_shard_file_name;
use crate::write::job_options::WriteMode;
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

/// The attempts (`<task>-<uuid>`) that writers' jobs marked in `dir` (store_job_marks.rs):
/// whose shards are tensorsmith's.
pub(crate) fn job_attempts(dir: &Path) -> std::collections::HashSet<String> {
    crate::store::job_marks::jobs(&crate::store::local::LocalStore::new(dir))
        .map(|jobs| jobs.into_values().flat_map(|j| j.attempts).collect())
        .unwrap_or_default()
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
    // Listed before the pending file is read: a concurrent commit names its shards there
    // before it moves them in and removes the file only after its commit point, so a shard
    // seen here is either named by what is read next or already a version's (which a caller
    // outside the commit lock sees when it reads the current version after this).
    let listed = shard_named_files(dir)?;
    let pending = crate::commit::pending::pending_names(dir)?;
    // A writer marks its attempt before its first shard moves in, so the markers read after
    // the listing name every writer's shard in it: those are ours, not in the way.
    let ours = job_attempts(dir);
    let names: Vec<String> = listed
        .into_iter()
        .filter(|n| !pending.contains(n))
        .filter(|n| !crate::write::shard_record::attempt_of(n).is_some_and(|a| ours.contains(&a)))
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

/// [`refuse_in_the_way`] outside the commit lock, where a concurrent writer may commit
/// between a caller's look for a dataset and this one: files that seemed in the way are that
/// writer's shards when the folder now holds a dataset. `Ok(true)`: it does (the caller's
/// look is out of date).
pub(crate) fn refuse_unless_committed(dir: &Path, mode: WriteMode) -> Result<bool> {
    match refuse_in_the_way(dir, mode) {
        Ok(()) => Ok(false),
        Err(e) if crate::commit::versions::Snapshot::current(dir)?.is_none() => Err(e),
        Err(_) => Ok(true),
    }
}
