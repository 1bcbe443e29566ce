//! Checking a dataset against its manifest: every shard present, of the recorded size, with a
//! valid header, holding what the manifest's schema and sample counts say; the index (when
//! present) naming only listed shards and tensors that exist; no stray shard files.

use crate::error::Result;
use crate::manifest::{content_digest_of, Manifest, ShardInfo, INDEX_NAME};
use crate::publish::is_published;
use crate::read::{mode_of, Dataset, DatasetMode};
use crate::staging::{stale_folders, DEFAULT_STALE_AFTER};
use crate::tensor_index_file;
use crate::versions::{self, indexes_dir, Snapshot};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;
use tensorsmith::index::TensorIndex;

/// What `verify` found: problems, one line each (empty when the dataset is sound), and notes
/// on files beside it that no version lists (a killed writer's shards, a user's own files):
/// they do not make the dataset unsound.
#[derive(Debug, Default)]
pub struct DatasetReport {
    pub shards: usize,
    pub tensors: usize,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

impl DatasetReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// [`verify_with`] reporting staging folders idle for more than 24 hours.
pub fn verify(dir: &Path) -> Result<DatasetReport> {
    verify_with(dir, DEFAULT_STALE_AFTER)
}

/// Checks `dir` against its manifest, and reports the staging folders of dead writers (a
/// heartbeat older than `stale_after`; `tensorsmith dataset clean` removes them).
pub fn verify_with(dir: &Path, stale_after: Duration) -> Result<DatasetReport> {
    verify_version(dir, None, stale_after)
}

/// Checks version `version` of `dir` (`None`: the current one) against its shards.
pub fn verify_version(
    dir: &Path,
    version: Option<u64>,
    stale_after: Duration,
) -> Result<DatasetReport> {
    let snap = match version {
        Some(n) => Snapshot::at(dir, n)?,
        None => match Snapshot::current(dir)? {
            Some(s) => s,
            None => Snapshot::at(dir, 0)?,
        },
    };
    // Another writer's commit is reported (the current version is checked all the same).
    let foreign = match version {
        None => crate::foreign::detect(dir, &snap)?,
        Some(_) => None,
    };
    let m = snap.manifest();
    let mut r = DatasetReport {
        shards: m.shards.len(),
        ..Default::default()
    };
    let mode = match Dataset::open_version(dir, snap.version.version) {
        Ok(d) => d.mode(),
        Err(_) => mode_of_shards(
            m,
            m.shards.iter().map(|s| {
                tensorsmith::safetensors::SafetensorsFile::open(dir.join(&s.shard_path))
                    .ok()
                    .map(|f| f.index().clone())
            }),
        ),
    };
    let mut tensors_of: HashMap<&str, HashSet<String>> = HashMap::new();
    let mut seen_keys: HashMap<String, String> = HashMap::new();
    for s in &m.shards {
        let path = dir.join(&s.shard_path);
        let p = &s.shard_path;
        let meta = match std::fs::metadata(&path) {
            Ok(md) => md,
            Err(e) => {
                r.problems.push(format!("{p}: missing ({e})"));
                continue;
            }
        };
        if meta.len() != s.bytes {
            r.problems.push(format!(
                "{p}: {} bytes, the manifest says {}",
                meta.len(),
                s.bytes
            ));
        }
        let f = match tensorsmith::safetensors::SafetensorsFile::open(&path) {
            Ok(f) => f,
            Err(e) => {
                r.problems
                    .push(format!("{p}: not a valid safetensors file: {e}"));
                continue;
            }
        };
        check_tensors(
            &mut r,
            s,
            f.index(),
            mode,
            m,
            &mut tensors_of,
            &mut seen_keys,
        );
    }
    check_coverage(&mut r, m, mode, &tensors_of, &seen_keys);
    let is_current = versions::list(dir)?
        .last()
        .is_none_or(|&c| c == snap.version.version);
    if let Some(f) = &foreign {
        r.problems.push(format!(
            "{}: `tensorsmith dataset adopt {}` (or `dataset verify --repair`) makes it version {} after checking its shards",
            f.describe(),
            dir.display(),
            f.base + 1
        ));
    } else if snap.versioned && is_current && !is_published(dir, &snap) {
        r.problems.push(format!(
            "dataset_manifest.json or {INDEX_NAME} is not version {}'s (a commit was killed after its commit point): `tensorsmith dataset verify --repair` writes them again",
            snap.version.version
        ));
    }
    // The version's own index file; without versions, the layout's index when present.
    let index = match &snap.version.index {
        Some(name) if snap.versioned => Some((
            indexes_dir(dir).join(name),
            format!("index of version {}", snap.version.version),
        )),
        _ if snap.versioned => None,
        _ => Some((dir.join(INDEX_NAME), INDEX_NAME.to_string())).filter(|(p, _)| p.exists()),
    };
    if let Some((ipath, iname)) = index {
        check_index(
            &mut r,
            tensor_index_file::read(&ipath),
            &iname,
            m,
            &tensors_of,
        );
    }
    // Shards of other versions still kept (retired, or current when checking an old one)
    // are not strays.
    let mut listed: HashSet<String> = m.shards.iter().map(|s| s.shard_path.clone()).collect();
    for v in versions::list(dir)? {
        if let Ok(v) = versions::read(dir, v) {
            listed.extend(v.manifest.shards.into_iter().map(|s| s.shard_path));
        }
    }
    if let Some(f) = &foreign {
        listed.extend(f.added.iter().cloned());
    }
    let pending = crate::pending::pending_names(dir)?;
    let strays = crate::outsiders::shard_named_files(dir)?;
    let ours = crate::outsiders::job_attempts(dir);
    for n in strays {
        if listed.contains(&n) {
            continue;
        }
        r.notes.push(if pending.contains(&n) {
            format!("{n}: a shard of a commit killed before its commit point (no version lists it; the next commit or `tensorsmith dataset clean` removes it)")
        } else if crate::shard_record::attempt_of(&n).is_some_and(|a| ours.contains(&a)) {
            format!("{n}: a shard no version lists, of a writer stopped before its commit point or still writing (`tensorsmith dataset clean` removes it once its writer's heartbeat has been still for an hour, or the retention when longer)")
        } else {
            format!("{n}: a file named like a shard that no version of this dataset lists: not this dataset's, and never removed by tensorsmith")
        });
    }
    for f in stale_folders(dir, stale_after)? {
        let idle = human_duration(f.idle);
        r.problems.push(format!(
            "{}: the staging folder of a writer that stopped {idle} ago without committing or aborting (`tensorsmith dataset clean` removes it once idle for {}; `dataset clean --older-than {}` now, which also removes versions superseded that long ago)",
            f.path.file_name().unwrap_or_default().to_string_lossy(),
            human_duration(DEFAULT_STALE_AFTER),
            short_duration(f.idle),
        ));
    }
    Ok(r)
}

/// The mode of a dataset told from its first shard whose header reads (`headers`, in the
/// manifest's order, `None` for one that does not): a damaged first shard must not make a
/// batch dataset look like a KV one, each of whose other shards would then seem to repeat its
/// neighbours' keys. KV when no header reads.
pub(crate) fn mode_of_shards<H: std::borrow::Borrow<TensorIndex>>(
    m: &Manifest,
    headers: impl IntoIterator<Item = Option<H>>,
) -> DatasetMode {
    m.shards
        .iter()
        .zip(headers)
        .find_map(|(s, h)| {
            let h = h?;
            let tensors: Vec<(&str, Option<u64>)> = h
                .borrow()
                .tensors
                .iter()
                .map(|t| (t.name.as_str(), t.shape.first().copied()))
                .collect();
            Some(mode_of(m, s.samples_count, &tensors))
        })
        .unwrap_or(DatasetMode::Kv)
}

/// The tensors of shard `s` (its header's `index`) checked against the manifest `m`.
pub(crate) fn check_tensors<'a>(
    r: &mut DatasetReport,
    s: &'a ShardInfo,
    index: &TensorIndex,
    mode: DatasetMode,
    m: &Manifest,
    tensors_of: &mut HashMap<&'a str, HashSet<String>>,
    seen_keys: &mut HashMap<String, String>,
) {
    let p = &s.shard_path;
    if let Some(want) = &s.content_digest {
        match content_digest_of(&index.metadata) {
            Some(got) if &got == want => {}
            Some(got) => r.problems.push(format!(
                "{p}: its digest record hashes to {got}, the manifest says {want} (another shard's content)"
            )),
            None => r.problems.push(format!(
                "{p}: records no digests, the manifest says it was written with them"
            )),
        }
    }
    let names = tensors_of.entry(p.as_str()).or_default();
    for t in &index.tensors {
        r.tensors += 1;
        names.insert(t.name.clone());
        let dtype = t.dtype.safetensors_name();
        match mode {
            DatasetMode::Batch => {
                if t.shape.first() != Some(&s.samples_count) {
                    r.problems.push(format!(
                        "{p}: tensor '{}' has shape {:?}, the manifest says {} samples",
                        t.name, t.shape, s.samples_count
                    ));
                }
            }
            DatasetMode::Kv => {
                if let Some(other) = seen_keys.insert(t.name.clone(), p.clone()) {
                    r.problems
                        .push(format!("{p}: tensor '{}' is also in {other}", t.name));
                }
            }
        }
        // Batch-mode schema shapes hold the full batch: compare the sample dimensions.
        let skip = usize::from(mode == DatasetMode::Batch);
        match m.schema.get(&t.name) {
            Some(sc) if sc.dtype != dtype || sc.shape.get(skip..) != t.shape.get(skip..) => {
                r.problems.push(format!(
                    "{p}: tensor '{}' is {dtype} {:?}, the schema says {} {:?}",
                    t.name, t.shape, sc.dtype, sc.shape
                ))
            }
            None if !m.schema.is_empty() => r.problems.push(format!(
                "{p}: tensor '{}' is not in the manifest's schema",
                t.name
            )),
            _ => {}
        }
    }
}

/// Batch mode: every shard holds every column; KV: every schema key is in some shard (not
/// checked when a shard could not be read).
pub(crate) fn check_coverage(
    r: &mut DatasetReport,
    m: &Manifest,
    mode: DatasetMode,
    tensors_of: &HashMap<&str, HashSet<String>>,
    seen_keys: &HashMap<String, String>,
) {
    if mode == DatasetMode::Batch {
        for col in m.schema.keys() {
            for s in &m.shards {
                if tensors_of
                    .get(s.shard_path.as_str())
                    .is_some_and(|n| !n.contains(col))
                {
                    r.problems
                        .push(format!("{}: no tensor '{col}'", s.shard_path));
                }
            }
        }
    } else if !m.schema.is_empty() {
        // A shard that could not be read (reported already) may hold any key: not every key
        // it held is reported again.
        if m.shards
            .iter()
            .any(|s| !tensors_of.contains_key(s.shard_path.as_str()))
        {
            return;
        }
        for k in m.schema.keys().filter(|k| !seen_keys.contains_key(*k)) {
            r.problems
                .push(format!("schema names '{k}', which no shard holds"));
        }
    }
}

/// The index's entries (as read) checked against the shards' tensors; `iname` names it.
/// Entries pointing at a shard the manifest lists but that could not be read are not
/// reported again (the shard's own problem says why).
pub(crate) fn check_index(
    r: &mut DatasetReport,
    entries: Result<Vec<tensor_index_file::IndexEntry>>,
    iname: &str,
    m: &Manifest,
    tensors_of: &HashMap<&str, HashSet<String>>,
) {
    let listed: HashSet<&str> = m.shards.iter().map(|s| s.shard_path.as_str()).collect();
    match entries {
        Ok(entries) => {
            for e in entries {
                match tensors_of.get(&*e.file_name) {
                    None if listed.contains(&*e.file_name) => {}
                    None => r.problems.push(format!(
                        "{iname}: '{}' points at {}, which the manifest does not list",
                        e.tensor_key, e.file_name
                    )),
                    Some(n) if !n.contains(&e.tensor_key) => r.problems.push(format!(
                        "{iname}: '{}' is not in {}",
                        e.tensor_key, e.file_name
                    )),
                    _ => {}
                }
            }
        }
        Err(e) => r.problems.push(format!("{iname}: unreadable: {e}")),
    }
}

/// `90m`, `3h`, `45s`: a duration `parse_duration` reads, no longer than `d`.
fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=7199 => format!("{}m", s / 60),
        _ => format!("{}h", s / 3600),
    }
}

/// `3d 4h`, `5h 12m`, `7m 3s`, `12s`: an idle time for people.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (days, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (days, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => format!("{m}m {sec}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{days}d {h}h"),
    }
}
