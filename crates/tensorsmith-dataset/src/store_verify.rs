//! `dataset verify` of a dataset on a store (an S3 prefix), with the checks of verify.rs:
//! every shard the version lists present at its recorded size (from one listing), its header
//! valid and holding what the manifest says (read by range: only the header moves), the
//! version's index naming only listed shards and tensors they hold, `dataset_manifest.json`
//! mirroring the current version, and shards no version lists reported as strays.

use crate::error::Result;
use crate::manifest::{Manifest, INDEX_NAME, MANIFEST_NAME};
use crate::store::Store;
use crate::store_versions::{self as sv, index_key};
use crate::tensor_index_file;
use crate::verify::{check_coverage, check_index, check_tensors, mode_of_shards, DatasetReport};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use tensorsmith::index::TensorIndex;

/// Checks version `version` (`None`: the current one) of the dataset in `store`.
pub(crate) fn verify_store(store: &dyn Store, version: Option<u64>) -> Result<DatasetReport> {
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
    let mut read = crate::store::headers(store, &present).into_iter();
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
    if let Some(f) = &foreign {
        r.problems.push(format!(
            "{}: `tensorsmith dataset adopt {}` (or `dataset verify --repair`) makes it version {} after checking its shards",
            f.describe(),
            store.location(),
            f.base + 1
        ));
    } else if snap.versioned && is_current {
        let manifest_ok = store
            .get(MANIFEST_NAME)?
            .is_some_and(|b| b == m.to_json().as_bytes());
        if !manifest_ok {
            r.problems.push(format!(
                "dataset_manifest.json or {INDEX_NAME} is not version {}'s (a commit was stopped after its commit point): `tensorsmith dataset verify --repair` writes them again",
                snap.version.version
            ));
        }
    }
    if let (true, Some(name)) = (snap.versioned, &snap.version.index) {
        let key = index_key(name);
        let entries = match store.get(&key)? {
            Some(b) => tensor_index_file::read_bytes(b.into(), &PathBuf::from(store.show(&key))),
            None => Err(crate::error::DatasetError::Corrupt {
                path: PathBuf::from(store.show(&key)),
                msg: "missing".into(),
            }),
        };
        let iname = format!("index of version {}", snap.version.version);
        check_index(&mut r, entries, &iname, m, &tensors_of);
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
    for n in stray {
        r.notes.push(if crate::shard_record::is_writer_shard_name(n) {
            format!("{n}: a shard no version lists (a writer stopped before its commit point, or one still uploading: `tensorsmith dataset clean` removes it once older than the retention and an hour)")
        } else {
            format!("{n}: a file named like a shard that no version of this dataset lists: not this dataset's, and never removed by tensorsmith")
        });
    }
    Ok(r)
}
