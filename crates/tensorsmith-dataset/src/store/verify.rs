//! `dataset verify` of a dataset in a store (an S3, Azure or GCS prefix, or a local folder:
//! verify.rs adds a folder's own checks), with the checks of verify_checks.rs: every shard
//! the version lists present at its recorded size (from one listing), its header valid and
//! holding what the manifest says (read by range: only the header moves), the version's index
//! (or, without versions, the layout's) naming only listed shards and tensors they hold, the
//! entry files mirroring the current version, and shards no version lists noted as strays,
//! with who removes them and when.

use crate::error::Result;
use crate::manifest::{Manifest, INDEX_NAME};
use crate::read::verify_checks::{
    check_coverage, check_index, check_tensors, mode_of_shards, DatasetReport,
};
use crate::store::clean::mirrored;
use crate::store::seam::Store;
use crate::store::versions::{self as sv, index_key};
use crate::tensor_index_file;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use tensorsmith::index::TensorIndex;

/// What a clean does with a shard no version lists: the note `verify` gives it.
/// `marked`: a writer's job marked its attempt (it goes with the job, once the job's
/// heartbeat is still). `by_age`: the store takes other shards our writers name once older
/// than the retention and an hour (a store; never a folder, which may hold a user's copies).
pub(crate) fn stray_note(name: &str, marked: bool, by_age: bool) -> String {
    if marked {
        format!("{name}: a shard no version lists, of a writer stopped before its commit point or still writing (`tensorsmith dataset clean` removes it once its writer's heartbeat has been still for an hour, or the retention when longer)")
    } else if by_age && crate::write::shard_record::is_writer_shard_name(name) {
        format!("{name}: a shard no version lists (a writer stopped before its commit point, or one still uploading: `tensorsmith dataset clean` removes it once older than the retention and an hour)")
    } else {
        format!("{name}: a file named like a shard that no version of this dataset lists: not this dataset's, and never removed by tensorsmith")
    }
}

/// Checks version `version` (`None`: the current one) of the dataset in a remote store.
pub(crate) fn verify_store(store: &dyn Store, version: Option<u64>) -> Result<DatasetReport> {
    verify_store_with(store, version, &|n, marked| stray_note(n, marked, true))
}

/// [`verify_store`], with `note` wording each shard no version lists (its name, and whether
/// a job marked its attempt).
pub(crate) fn verify_store_with(
    store: &dyn Store,
    version: Option<u64>,
    note: &dyn Fn(&str, bool) -> String,
) -> Result<DatasetReport> {
    let snap = match version {
        Some(n) => sv::at(store, n)?,
        None => match sv::current(store)? {
            Some(s) => s,
            None => sv::at(store, 0)?,
        },
    };
    let foreign = match version {
        None => sv::detect(store, &snap)?,
        Some(_) => None,
    };
    let m: &Manifest = snap.manifest();
    let mut r = DatasetReport {
        shards: m.shards.len(),
        ..Default::default()
    };
    let objects: HashMap<String, u64> = store
        .list("part-")?
        .into_iter()
        .map(|e| (e.key, e.size))
        .collect();
    let present: Vec<&str> = m
        .shards
        .iter()
        .map(|s| s.shard_path.as_str())
        .filter(|p| objects.contains_key(*p))
        .collect();
    let mut read = crate::store::seam::headers(store, &present).into_iter();
    let mut headers: Vec<Option<TensorIndex>> = Vec::with_capacity(m.shards.len());
    for s in &m.shards {
        let p = &s.shard_path;
        let Some(&size) = objects.get(p) else {
            r.problems.push(format!("{p}: missing"));
            headers.push(None);
            continue;
        };
        if size != s.bytes {
            r.problems
                .push(format!("{p}: {size} bytes, the manifest says {}", s.bytes));
        }
        match read.next().expect("one header per present shard") {
            Ok(h) => headers.push(Some(h)),
            Err(e) => {
                r.problems
                    .push(format!("{p}: not a valid safetensors file: {e}"));
                headers.push(None);
            }
        }
    }
    let mode = mode_of_shards(m, headers.iter().map(Option::as_ref));
    let mut tensors_of: HashMap<&str, HashSet<String>> = HashMap::new();
    let mut seen_keys: HashMap<String, String> = HashMap::new();
    for (s, h) in m.shards.iter().zip(&headers) {
        if let Some(h) = h {
            check_tensors(&mut r, s, h, mode, m, &mut tensors_of, &mut seen_keys);
        }
    }
    check_coverage(&mut r, m, mode, &tensors_of, &seen_keys);
    let list = sv::list(store)?;
    let is_current = list.last().is_none_or(|l| l.n == snap.version.version);
    // The version's index when the mirror check read it.
    let mut version_index: Option<Vec<u8>> = None;
    if let Some(f) = &foreign {
        r.problems.push(format!(
            "{}: `tensorsmith dataset adopt {}` (or `dataset verify --repair`) makes it version {} after checking its shards",
            f.describe(),
            store.location(),
            f.base + 1
        ));
    } else if snap.versioned && is_current {
        let (ok, index) = mirrored(store, &snap)?;
        if !ok {
            r.problems.push(format!(
                "dataset_manifest.json or {INDEX_NAME} is not version {}'s (a commit was stopped after its commit point): `tensorsmith dataset verify --repair` writes them again",
                snap.version.version
            ));
        }
        // Read once: checked below.
        version_index = index;
    }
    // The version's own index; without versions, the layout's index when there is one.
    let index = match &snap.version.index {
        Some(name) if snap.versioned => Some((
            index_key(name),
            format!("index of version {}", snap.version.version),
        )),
        _ if snap.versioned => None,
        _ => Some((INDEX_NAME.to_string(), INDEX_NAME.to_string())),
    };
    if let Some((key, iname)) = index {
        let path = PathBuf::from(store.show(&key));
        let bytes = match version_index.take() {
            Some(b) if snap.versioned => Some(b),
            _ => store.get(&key)?,
        };
        let entries = match bytes {
            Some(b) => Some(tensor_index_file::read_bytes(b.into(), &path)),
            // A version's index must be there; the layout's is optional.
            None if snap.versioned => Some(Err(crate::error::DatasetError::Corrupt {
                path,
                msg: "missing".into(),
            })),
            None => None,
        };
        if let Some(entries) = entries {
            check_index(&mut r, entries, &iname, m, &tensors_of);
        }
    }
    // Shards other kept versions list are not strays.
    let mut listed: HashSet<String> = m.shards.iter().map(|s| s.shard_path.clone()).collect();
    if let Some(f) = &foreign {
        listed.extend(f.added.iter().cloned());
    }
    for l in &list {
        if let Ok(v) = sv::read(store, l.n) {
            listed.extend(v.manifest.shards.into_iter().map(|s| s.shard_path));
        }
    }
    let mut stray: Vec<&String> = objects
        .keys()
        .filter(|n| !n.contains('/') && n.ends_with(".safetensors") && !listed.contains(*n))
        .collect();
    stray.sort();
    let marked = crate::store::job_marks::jobs(store)
        .map(|jobs| {
            jobs.into_values()
                .flat_map(|j| j.attempts)
                .collect::<HashSet<_>>()
        })
        .unwrap_or_default();
    for n in stray {
        let ours = crate::write::shard_record::attempt_of(n).is_some_and(|a| marked.contains(&a));
        r.notes.push(note(n, ours));
    }
    Ok(r)
}
