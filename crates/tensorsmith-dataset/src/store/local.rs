//! The store seam over a local folder: objects are files below it, a replace is written to a
//! temporary name, fsynced and renamed, an exclusive create is a hard link of such a file
//! (it fails when the name exists, as `If-None-Match: *` does on S3; the file and the folder
//! fsynced, so a created version survives a crash), a finished shard moves in by a rename
//! (a copy across filesystems; the folders renamed into fsynced once, before the next
//! exclusive create, so the shards a version lists survive with it), a listing walks the folders below the prefix. A replace (the
//! manifest mirror) runs under the dataset's lock. Local datasets are written through it
//! (write.rs); distributed jobs on a folder still commit with the lock (commit.rs).

use crate::commit::lock::sync_dir;
use crate::error::{DatasetError, Result};
use crate::store::seam::{Entry, Expect, Store, Upload};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::UNIX_EPOCH;
use tensorsmith::bytes::{Backend, LocalFile, ReadAt};
use tensorsmith::sink::AtomicFile;

pub(crate) struct LocalStore {
    pub dir: PathBuf,
    /// The most `.safetensors` files seen in the folder of a file being uploaded (a write's
    /// staging): how much of a write was on local disk at once.
    pub staged_peak: AtomicUsize,
    /// Shard uploads left before one fails (`usize::MAX`: none fails), for the tests of a
    /// failed upload.
    pub fail_in: AtomicUsize,
    /// Objects opened for ranged reads (`open`), for the tests of what a step reads.
    pub opened: AtomicUsize,
    /// Run once after the next listing of the versions: another writer acting between a
    /// writer's look at the versions and what it does next, for the tests of races.
    pub after_versions_listed: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// Folders that shards were renamed into since the last exclusive create: fsynced once,
    /// just before the next one (the commit point), rather than after every rename.
    renamed_into: std::sync::Mutex<std::collections::HashSet<PathBuf>>,
    /// Whether the caller holds the dataset's lock (a local `dataset clean`): a replace
    /// then does not take it again.
    lock_held: bool,
}

impl LocalStore {
    pub fn new(dir: &Path) -> LocalStore {
        LocalStore {
            dir: dir.to_path_buf(),
            staged_peak: AtomicUsize::new(0),
            fail_in: AtomicUsize::new(usize::MAX),
            opened: AtomicUsize::new(0),
            after_versions_listed: std::sync::Mutex::new(None),
            renamed_into: std::sync::Mutex::new(Default::default()),
            lock_held: false,
        }
    }

    /// The folder as a store for a caller that holds its lock (`commit_lock::acquire`).
    pub fn locked(dir: &Path) -> LocalStore {
        LocalStore {
            lock_held: true,
            ..LocalStore::new(dir)
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    fn parent_made(&self, key: &str) -> Result<PathBuf> {
        let p = self.path(key);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| DatasetError::io(d, e))?;
        }
        Ok(p)
    }

    /// The test hooks of a shard moving in: the injected failure, the staging's peak.
    fn before_shard(&self, key: &str, from: &Path) -> Result<()> {
        if !cfg!(test) {
            return Ok(());
        }
        if key.starts_with("part-") && self.fail_in.fetch_sub(1, Ordering::Relaxed) == 0 {
            return Err(DatasetError::io(
                self.path(key),
                std::io::Error::other("injected upload failure"),
            ));
        }
        if let Some(Ok(entries)) = from.parent().map(std::fs::read_dir) {
            let n = entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".safetensors"))
                .count();
            self.staged_peak.fetch_max(n, Ordering::Relaxed);
        }
        Ok(())
    }

    /// `from` copied to `p` through a temporary name (fsynced, then renamed).
    fn copy_in(&self, p: &Path, from: &Path) -> Result<()> {
        let mut f = AtomicFile::create(p)?;
        let mut src = std::fs::File::open(from).map_err(|e| DatasetError::io(from, e))?;
        std::io::copy(&mut src, &mut f).map_err(|e| DatasetError::io(p, e))?;
        f.commit()?;
        Ok(())
    }

    /// `bytes` written and fsynced under a temporary name beside `p`.
    fn temp_with(&self, p: &Path, bytes: &[u8]) -> Result<AtomicFile> {
        let mut f = AtomicFile::create(p)?;
        std::io::Write::write_all(&mut f, bytes).map_err(|e| DatasetError::io(p, e))?;
        f.sync()?;
        Ok(f)
    }
}

/// A local object's tag: its content's hash (the tests' stand-in for an ETag).
fn tag_of(bytes: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    format!("{:016x}-{}", h.finish(), bytes.len())
}

fn mtime_ms(m: &std::fs::Metadata) -> u64 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

impl Store for LocalStore {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn local_file(&self, key: &str) -> Option<PathBuf> {
        Some(self.path(key))
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let p = self.path(key);
        match std::fs::read(&p) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(DatasetError::io(&p, e)),
        }
    }

    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        Ok(self.get(key)?.map(|b| {
            let t = tag_of(&b);
            (b, Some(t))
        }))
    }

    fn replace(&self, key: &str, bytes: &[u8], expect: Expect<'_>) -> Result<bool> {
        // Compared and written under the dataset's commit lock (a `flock`: it excludes other
        // processes, and other threads, which open the lock file on their own); S3 compares
        // on the server.
        let _held = match self.lock_held {
            true => None,
            false => Some(crate::commit::lock::acquire(
                &self.dir,
                crate::commit::lock::DEFAULT_LOCK_TIMEOUT,
            )?),
        };
        let now = self.get(key)?;
        let same = match (expect, &now) {
            (Expect::Absent, None) => true,
            (Expect::Tag(t), Some(b)) => tag_of(b) == t,
            _ => false,
        };
        if same {
            self.put(key, bytes)?;
        }
        Ok(same)
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let p = self.parent_made(key)?;
        self.temp_with(&p, bytes)?.commit()?;
        Ok(())
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        let p = self.parent_made(key)?;
        let dir = p.parent().expect("a key has a parent").to_path_buf();
        let temp = dir.join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
        // Complete on the disk before its name appears: the link is the commit point.
        let written = std::fs::File::create(&temp).and_then(|mut f| {
            std::io::Write::write_all(&mut f, bytes)?;
            f.sync_all()
        });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(DatasetError::io(&temp, e));
        }
        // The shards moved in before it must be there after a crash if it is.
        let renamed: Vec<PathBuf> = self
            .renamed_into
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for d in &renamed {
            if let Err(e) = sync_dir(d) {
                let _ = std::fs::remove_file(&temp);
                return Err(e);
            }
        }
        let linked = std::fs::hard_link(&temp, &p);
        let _ = std::fs::remove_file(&temp);
        match linked {
            Ok(()) => sync_dir(&dir).map(|()| true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(DatasetError::io(&p, e)),
        }
    }
    fn adopt(&self, key: &str, from: &Path) -> Result<()> {
        if let Err(e) = self.before_shard(key, from) {
            let _ = std::fs::remove_file(from);
            return Err(e);
        }
        let p = self.parent_made(key)?;
        match std::fs::rename(from, &p) {
            Ok(()) => {
                // Its bytes now (a batch shard moves in as soon as it is written, before its
                // task's end-of-task fsync); its name with the next create's.
                std::fs::File::open(&p)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| DatasetError::io(&p, e))?;
                let dir = p.parent().expect("a key has a parent").to_path_buf();
                self.renamed_into
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(dir);
                Ok(())
            }
            // Another filesystem (staging in TMPDIR): copied, as an upload is.
            Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
                let r = self.copy_in(&p, from);
                let _ = std::fs::remove_file(from);
                r
            }
            Err(e) => {
                let _ = std::fs::remove_file(from);
                Err(DatasetError::io(&p, e))
            }
        }
    }

    fn put_file(&self, key: &str, from: &Path) -> Result<()> {
        self.before_shard(key, from)?;
        let p = self.parent_made(key)?;
        self.copy_in(&p, from)
    }

    fn list(&self, prefix: &str) -> Result<Vec<Entry>> {
        // The folder part of the prefix is walked; names are then filtered by the prefix.
        let base = match prefix.rfind('/') {
            Some(i) => &prefix[..i],
            None => "",
        };
        let mut out = Vec::new();
        let mut stack = vec![base.to_string()];
        while let Some(rel) = stack.pop() {
            let d = self.path(&rel);
            let entries = match std::fs::read_dir(&d) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(DatasetError::io(&d, e)),
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let key = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                let Ok(m) = e.metadata() else { continue };
                if m.is_dir() {
                    if prefix.starts_with(&format!("{key}/")) || key.starts_with(prefix) {
                        stack.push(key);
                    }
                } else if key.starts_with(prefix) && !name.starts_with('.') {
                    out.push(Entry {
                        key,
                        size: m.len(),
                        modified_ms: mtime_ms(&m),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        if cfg!(test) && prefix == crate::store::index::VERSIONS_PREFIX {
            let hook = self
                .after_versions_listed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(f) = hook {
                f();
            }
        }
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let p = self.path(key);
        match std::fs::remove_file(&p) {
            Ok(()) => {
                // A job's folder goes with its last object (only the job and a clean of it
                // once ended touch it); other folders stay, as writers create files in them.
                if key.starts_with(crate::store::job_marks::JOBS_PREFIX) {
                    if let Some(d) = p.parent() {
                        let _ = std::fs::remove_dir(d);
                    }
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(DatasetError::io(&p, e)),
        }
    }

    fn open(&self, key: &str) -> Result<Box<dyn ReadAt>> {
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(LocalFile::open(&self.path(key), Backend::Pread)?))
    }

    fn uploads(&self, _prefix: &str) -> Result<Vec<Upload>> {
        Ok(vec![])
    }

    fn abort(&self, _upload: &Upload) -> Result<()> {
        Ok(())
    }
}
