//! Atomic file output: bytes go to a temporary file in the destination's folder, which is
//! flushed, fsynced and renamed over the destination only on `commit`. Readers that have the
//! old file open (or mapped) keep a consistent view; a crash or an error leaves the old file
//! untouched and, at worst, a temporary file whose name says what it is.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Marker in the names of temporary files, so leftovers can be recognised and cleaned.
pub const TEMP_MARKER: &str = ".tensorsmith-tmp.";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file being written; invisible under its final name until [`AtomicFile::commit`].
pub struct AtomicFile {
    dest: PathBuf,
    temp: PathBuf,
    out: Option<BufWriter<File>>,
    written: u64,
}

impl AtomicFile {
    /// Starts writing what will become `dest`.
    pub fn create(dest: &Path) -> Result<AtomicFile> {
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let file_name = dest
            .file_name()
            .ok_or_else(|| {
                Error::from(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "destination has no file name",
                ))
                .in_file(dest)
            })?
            .to_string_lossy()
            .into_owned();
        remove_stale_temps(&dir, &file_name);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let temp = dir.join(format!(
            ".{file_name}{TEMP_MARKER}{}.{}.{nanos:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| crate::error::creating(e, dest).in_file(dest))?;
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            temp,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            written: 0,
        })
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The temporary file itself, with everything written so far flushed to it: for
    /// kernel-side copies into it (`copy_file_range`). Writes made through it are not counted
    /// by [`AtomicFile::written`].
    pub fn file(&mut self) -> Result<&mut File> {
        let out = self.out.as_mut().expect("not yet committed");
        out.flush()
            .map_err(|e| Error::from(e).in_file(&self.dest))?;
        Ok(out.get_mut())
    }

    /// Flushes and fsyncs what is written so far, still under the temporary name: the slow
    /// part of a commit, for callers that want the rename itself to be quick.
    pub fn sync(&mut self) -> Result<()> {
        let out = self.out.as_mut().expect("not yet committed");
        out.flush()
            .and_then(|()| out.get_ref().sync_all())
            .map_err(|e| Error::from(e).in_file(&self.dest))
    }

    /// Flushes, fsyncs and renames the temporary file over the destination, then fsyncs the
    /// folder so the rename itself is durable.
    pub fn commit(mut self) -> Result<()> {
        let out = self.out.take().expect("not yet committed");
        let finish = || -> io::Result<()> {
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&self.temp, &self.dest)
        };
        if let Err(e) = finish() {
            // `out` is gone, so Drop will not clean up: do it here.
            let _ = std::fs::remove_file(&self.temp);
            return Err(Error::from(e).in_file(&self.dest));
        }
        if let Some(dir) = self.dest.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            // Best effort: some filesystems refuse to open or sync a directory.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

/// Writes `path` atomically: `write` fills an [`AtomicFile`], which is committed only if
/// `write` succeeds (its errors are told as being about `path`). Returns what `write` does.
/// Every writer ends this way, so none can leave a partial file under the final name.
pub fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut AtomicFile) -> Result<T>,
) -> Result<T> {
    let mut f = AtomicFile::create(path)?;
    let out = write(&mut f).map_err(|e| e.in_file(path))?;
    f.commit()?;
    Ok(out)
}

/// Removes temporary files that an earlier write to the same destination left behind when
/// its process was killed. A temp file names its writer's pid; it is stale when that process
/// no longer runs (known through /proc; where there is no /proc nothing is removed).
pub fn remove_stale_temps(dir: &Path, file_name: &str) -> usize {
    let prefix = format!(".{file_name}{TEMP_MARKER}");
    dead_writers(dir, &prefix)
        .into_iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

/// The entries of `dir` named `{prefix}{pid}…` (a pid, then the end or a `.`) whose writer
/// process no longer runs (known through /proc; where there is no /proc, none).
pub fn dead_writers(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    if !Path::new("/proc/self").exists() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dead = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !alive {
            dead.push(entry.path());
        }
    }
    dead
}

/// An output a streaming writer can cut back: bytes written past `pos` are dropped and the
/// next write lands at `pos` (the zTensor v2 writer drops a blob it finds it already wrote,
/// which it can only know once the blob has streamed through).
pub trait Rewind: Write {
    fn rewind_to(&mut self, pos: u64) -> io::Result<()>;
}

impl Rewind for Vec<u8> {
    fn rewind_to(&mut self, pos: u64) -> io::Result<()> {
        self.truncate(pos as usize);
        Ok(())
    }
}

impl Rewind for File {
    fn rewind_to(&mut self, pos: u64) -> io::Result<()> {
        use std::io::{Seek, SeekFrom};
        self.set_len(pos)?;
        self.seek(SeekFrom::Start(pos)).map(|_| ())
    }
}

impl Rewind for AtomicFile {
    fn rewind_to(&mut self, pos: u64) -> io::Result<()> {
        let out = self.out.as_mut().expect("not yet committed");
        out.flush()?;
        out.get_mut().rewind_to(pos)?;
        self.written = pos;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.as_mut().expect("not yet committed").write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out
            .as_mut()
            .expect("not yet committed")
            .write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.as_mut().expect("not yet committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_write_removes_temps_of_dead_writers_only() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("m.safetensors");
        // pid 0x7fffffff is above Linux's pid_max, so it never runs.
        let dead = dir
            .path()
            .join(format!(".m.safetensors{TEMP_MARKER}2147483647.0.0"));
        let live = dir.path().join(format!(".m.safetensors{TEMP_MARKER}1.0.0"));
        let other = dir
            .path()
            .join(format!(".n.safetensors{TEMP_MARKER}2147483647.0.0"));
        for p in [&dead, &live, &other] {
            std::fs::write(p, b"partial").unwrap();
        }
        let mut f = AtomicFile::create(&dest).unwrap();
        f.write_all(b"x").unwrap();
        f.commit().unwrap();
        assert!(!dead.exists(), "stale temp of a dead writer survives");
        assert!(
            live.exists(),
            "temp of a running process (pid 1) was removed"
        );
        assert!(other.exists(), "temp of another destination was removed");
    }

    #[test]
    fn nothing_appears_until_commit_and_abandoned_writes_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("x.bin");
        std::fs::write(&dest, b"old").unwrap();
        {
            let mut f = AtomicFile::create(&dest).unwrap();
            f.write_all(b"new but abandoned").unwrap();
        }
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut f = AtomicFile::create(&dest).unwrap();
        f.write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        f.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
