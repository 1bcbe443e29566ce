//! Atomic file output: bytes go to a temporary file in the destination's folder, which is
//! flushed, fsynced and renamed over the destination only on `commit`. Readers that have the
//! old file open (or mapped) keep a consistent view; a crash or an error leaves the old file
//! untouched and, at worst, a temporary file whose name says what it is.
//!
//! An `s3://`/`s3a://`, `az://`/`abfs(s)://` or `gs://` destination (feature `remote`) is the
//! same promise kept by the store: the bytes stream up in parts ([`ObjectUpload`], from
//! `bytes::create_upload`: bounded memory) and the object appears only on `commit`; otherwise
//! the upload is abandoned, so no object appears unless complete. A writer that must cut its
//! output back further than the part still in memory (the zTensor writers: a duplicate blob
//! is found once it has streamed through) asks for a spooled output instead
//! ([`AtomicFile::create_spooled`]): the bytes go to an unlinked local temporary file,
//! streamed through the store's upload at commit: memory stays bounded, local disk holds
//! the whole output for a while.

#[cfg(feature = "remote")]
use crate::bytes::ObjectUpload;
use crate::bytes::StorageOptions;
use crate::error::{Error, ErrorKind, Result};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Marker in the names of temporary files, so leftovers can be recognised and cleaned.
pub const TEMP_MARKER: &str = ".tensorsmith-tmp.";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Where the bytes of an [`AtomicFile`] go until it is committed.
enum Out {
    /// A temporary file beside the destination, renamed over it.
    Local { temp: PathBuf, out: BufWriter<File> },
    /// An upload in parts, completed at commit.
    #[cfg(feature = "remote")]
    Upload(Box<dyn ObjectUpload>),
    /// An unlinked local file, uploaded whole at commit.
    #[cfg(feature = "remote")]
    Spool(Box<Spool>),
}

/// An unlinked local file and the upload it streams through at commit (nothing is sent
/// before).
#[cfg(feature = "remote")]
struct Spool {
    out: BufWriter<File>,
    to: Box<dyn ObjectUpload>,
}

/// A file being written; invisible under its final name until [`AtomicFile::commit`].
pub struct AtomicFile {
    dest: PathBuf,
    out: Option<Out>,
    written: u64,
    /// A write in progress, for the signal handler (`interrupt`).
    _active: crate::interrupt::Guard,
}

/// How an output that is a URL is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Remote {
    Stream,
    Spool,
}

impl AtomicFile {
    /// Starts writing what will become the local file `dest`. A URL is refused by name:
    /// outputs that may be uploaded ask for it, with their store settings
    /// ([`AtomicFile::create_with`]), so that no writer built for local files (a dataset's
    /// manifest beside its shards, say) half-uploads by accident.
    pub fn create(dest: &Path) -> Result<AtomicFile> {
        let name = dest.to_string_lossy();
        crate::bytes::refuse_write(&name)?;
        crate::bytes::refuse_remote(&name, "this output")?;
        AtomicFile::create_with(dest, &StorageOptions::new())
    }

    /// Starts writing what will become `dest`, a local path or an `s3://` URL (streamed up,
    /// with the store settings `storage`); other URLs are refused by name.
    pub fn create_with(dest: &Path, storage: &StorageOptions) -> Result<AtomicFile> {
        AtomicFile::open(dest, storage, Remote::Stream)
    }

    /// As [`AtomicFile::create_with`], for a writer that may cut its output back anywhere
    /// ([`Rewind`]) or copy into its file ([`AtomicFile::file`]): a URL is spooled to a local
    /// temporary file and uploaded at commit.
    pub fn create_spooled(dest: &Path, storage: &StorageOptions) -> Result<AtomicFile> {
        AtomicFile::open(dest, storage, Remote::Spool)
    }

    fn open(dest: &Path, storage: &StorageOptions, how: Remote) -> Result<AtomicFile> {
        let name = dest.to_string_lossy();
        crate::bytes::refuse_write(&name)?;
        if crate::bytes::scheme_name(&name).is_some() {
            return AtomicFile::remote(dest, storage, how);
        }
        let _ = (storage, how);
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
        // The write counts as in progress before its temporary file exists: a signal that
        // finds the file finds the write to stop, and the file goes with it.
        let active = crate::interrupt::guard();
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| crate::error::creating(e, dest).in_file(dest))?;
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            out: Some(Out::Local {
                temp,
                out: BufWriter::with_capacity(1 << 20, file),
            }),
            written: 0,
            _active: active,
        })
    }

    #[cfg(feature = "remote")]
    fn remote(dest: &Path, storage: &StorageOptions, how: Remote) -> Result<AtomicFile> {
        let location = dest.to_string_lossy();
        let active = crate::interrupt::guard();
        let out = match how {
            Remote::Stream => Out::Upload(crate::bytes::create_upload(&location, storage)?),
            Remote::Spool => {
                let to = crate::bytes::create_upload(&location, storage)?;
                let file = tempfile::tempfile().map_err(|e| {
                    Error::from(io::Error::new(
                        e.kind(),
                        format!("a local temporary file to spool the upload in: {e}"),
                    ))
                    .in_file(dest)
                })?;
                Out::Spool(Box::new(Spool {
                    out: BufWriter::with_capacity(1 << 20, file),
                    to,
                }))
            }
        };
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            out: Some(out),
            written: 0,
            _active: active,
        })
    }

    #[cfg(not(feature = "remote"))]
    fn remote(dest: &Path, _: &StorageOptions, _: Remote) -> Result<AtomicFile> {
        Err(Error::new(ErrorKind::Unsupported(
            "URL outputs need the `remote` feature".into(),
        ))
        .in_file(dest))
    }

    /// Whether the output has a file ([`AtomicFile::file`]): false for a streamed upload.
    pub fn has_file(&self) -> bool {
        match self.out {
            #[cfg(feature = "remote")]
            Some(Out::Upload(_)) => false,
            _ => true,
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self.out.as_mut().expect("not yet committed") {
            Out::Local { out, .. } => out,
            #[cfg(feature = "remote")]
            Out::Spool(s) => &mut s.out,
            #[cfg(feature = "remote")]
            Out::Upload(u) => u.as_mut(),
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The temporary file itself, with everything written so far flushed to it: for
    /// kernel-side copies into it (`copy_file_range`). Writes made through it are not counted
    /// by [`AtomicFile::written`]. A streamed upload has none ([`AtomicFile::has_file`]).
    pub fn file(&mut self) -> Result<&mut File> {
        let dest = self.dest.clone();
        let out = match self.out.as_mut().expect("not yet committed") {
            Out::Local { out, .. } => out,
            #[cfg(feature = "remote")]
            Out::Spool(s) => &mut s.out,
            #[cfg(feature = "remote")]
            Out::Upload(_) => {
                return Err(Error::new(ErrorKind::Unsupported(
                    "a streamed upload has no file to copy into".into(),
                ))
                .in_file(&dest))
            }
        };
        out.flush().map_err(|e| Error::from(e).in_file(&dest))?;
        Ok(out.get_mut())
    }

    /// Flushes and fsyncs what is written so far, still under the temporary name: the slow
    /// part of a commit, for callers that want the rename itself to be quick. (Nothing to do
    /// for an upload: the store keeps what it acknowledged.)
    pub fn sync(&mut self) -> Result<()> {
        match self.out.as_mut().expect("not yet committed") {
            Out::Local { out, .. } => out
                .flush()
                .and_then(|()| out.get_ref().sync_all())
                .map_err(|e| Error::from(e).in_file(&self.dest)),
            #[cfg(feature = "remote")]
            _ => Ok(()),
        }
    }

    /// Flushes, fsyncs and renames the temporary file over the destination, then fsyncs the
    /// folder so the rename itself is durable. An upload is completed (a spooled one is
    /// uploaded first).
    pub fn commit(mut self) -> Result<()> {
        match self.out.take().expect("not yet committed") {
            Out::Local { temp, out } => commit_local(&self.dest, &temp, out),
            #[cfg(feature = "remote")]
            Out::Upload(u) => u.commit().map(|_| ()),
            #[cfg(feature = "remote")]
            Out::Spool(s) => {
                use std::io::{Seek, SeekFrom};
                let Spool { out, mut to } = *s;
                let mut file = out
                    .into_inner()
                    .map_err(|e| Error::from(e.into_error()).in_file(&self.dest))?;
                file.seek(SeekFrom::Start(0))
                    .and_then(|_| io::copy(&mut file, &mut to))
                    .map_err(|e| Error::from(e).in_file(&self.dest))?;
                to.commit().map(|_| ())
            }
        }
    }
}

fn commit_local(dest: &Path, temp: &Path, out: BufWriter<File>) -> Result<()> {
    let finish = || -> io::Result<()> {
        let file = out.into_inner().map_err(|e| e.into_error())?;
        // A file replaced keeps its permission bits (a private 0600 file stays private); a
        // symbolic link is replaced by the new file, its target left as it was.
        if let Ok(old) = std::fs::symlink_metadata(dest) {
            if old.file_type().is_file() {
                file.set_permissions(old.permissions())?;
            }
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(temp, dest)
    };
    if let Err(e) = finish() {
        // `out` is gone, so Drop will not clean up: do it here.
        let _ = std::fs::remove_file(temp);
        return Err(Error::from(e).in_file(dest));
    }
    if let Some(dir) = dest.parent() {
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

/// Writes the local file `path` atomically: `write` fills an [`AtomicFile`], which is
/// committed only if `write` succeeds (its errors are told as being about `path`). Returns
/// what `write` does. Every writer ends this way, so none can leave a partial file under the
/// final name. A URL is refused ([`AtomicFile::create`]); see [`write_atomically_with`].
pub fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut AtomicFile) -> Result<T>,
) -> Result<T> {
    finish(path, AtomicFile::create(path)?, write)
}

/// As [`write_atomically`], to a local path or an `s3://` URL (with the store settings
/// `storage`), streamed up: for writers that only write forward.
pub fn write_atomically_with<T>(
    path: &Path,
    storage: &StorageOptions,
    write: impl FnOnce(&mut AtomicFile) -> Result<T>,
) -> Result<T> {
    finish(path, AtomicFile::create_with(path, storage)?, write)
}

/// As [`write_atomically_with`], a URL spooled to a local temporary file and uploaded at
/// commit: for writers that cut their output back ([`Rewind`]) or copy into its file.
pub fn write_atomically_spooled<T>(
    path: &Path,
    storage: &StorageOptions,
    write: impl FnOnce(&mut AtomicFile) -> Result<T>,
) -> Result<T> {
    finish(path, AtomicFile::create_spooled(path, storage)?, write)
}

fn finish<T>(
    path: &Path,
    mut f: AtomicFile,
    write: impl FnOnce(&mut AtomicFile) -> Result<T>,
) -> Result<T> {
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

/// Whether process `pid` no longer runs on this machine (known through /proc; where there is
/// no /proc, never: nothing is taken for dead).
pub fn writer_gone(pid: u32) -> bool {
    Path::new("/proc/self").exists()
        && pid != std::process::id()
        && !Path::new(&format!("/proc/{pid}")).exists()
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
        if writer_gone(pid) {
            dead.push(entry.path());
        }
    }
    dead
}

/// An output a streaming writer can cut back: bytes written past `pos` are dropped and the
/// next write lands at `pos` (the zTensor v2 writer drops a blob it finds it already wrote,
/// which it can only know once the blob has streamed through).
pub trait Rewind: Write {
    /// Drops every byte written past `pos` (a position already written), so the next write
    /// lands at `pos`.
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
        match self.out.as_mut().expect("not yet committed") {
            Out::Local { out, .. } => {
                out.flush()?;
                out.get_mut().rewind_to(pos)?;
            }
            #[cfg(feature = "remote")]
            Out::Spool(s) => {
                s.out.flush()?;
                s.out.get_mut().rewind_to(pos)?;
            }
            #[cfg(feature = "remote")]
            Out::Upload(u) => u.rewind_to(pos)?,
        }
        self.written = pos;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.writer().write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer().write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}

impl Drop for AtomicFile {
    /// Not committed: the temporary file is removed; an upload is aborted (by its own drop);
    /// a spool file was never linked.
    fn drop(&mut self) {
        if let Some(Out::Local { temp, .. }) = self.out.take() {
            let _ = std::fs::remove_file(temp);
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
    fn only_outputs_that_ask_for_it_may_be_urls() {
        let e = AtomicFile::create(Path::new("s3://b/m.safetensors"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("this output to s3:// URLs"), "{e}");
        let e = write_atomically(Path::new("hf://o/r/x"), |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("read only"), "{e}");
        let e = AtomicFile::create(Path::new("az://c/m.safetensors"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("this output to az:// URLs"), "{e}");
        let e = AtomicFile::create_with(Path::new("https://h/k"), &StorageOptions::new())
            .err()
            .unwrap();
        assert!(e.to_string().contains("writing to https:// URLs"), "{e}");
        // A gs:// output asks nothing of the store before its first part or its commit.
        #[cfg(feature = "remote")]
        {
            let mut anon = StorageOptions::new();
            anon.set("anon", "true").unwrap();
            drop(AtomicFile::create_with(Path::new("gs://b/k"), &anon).unwrap());
        }
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

    #[test]
    fn a_replaced_file_keeps_its_permissions_and_a_link_is_replaced_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        let dest = dir.path().join("secret.bin");
        std::fs::write(&dest, b"old").unwrap();
        for m in [0o600, 0o640, 0o444] {
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(m)).unwrap();
            write_atomically(&dest, |f| Ok(f.write_all(b"new")?)).unwrap();
            assert_eq!(mode(&dest), m);
            assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        }
        // A new file gets the usual mode (0666 less the umask): not that of some other file.
        let fresh = dir.path().join("fresh.bin");
        write_atomically(&fresh, |f| Ok(f.write_all(b"x")?)).unwrap();
        assert_eq!(mode(&fresh) & 0o600, 0o600);
        // A link: replaced by the new file; its target keeps its bytes and mode.
        let target = dir.path().join("target.bin");
        std::fs::write(&target, b"target").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.bin");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, |f| Ok(f.write_all(b"new")?)).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_file());
        assert_eq!(std::fs::read(&link).unwrap(), b"new");
        assert_eq!(std::fs::read(&target).unwrap(), b"target");
        assert_eq!(mode(&target), 0o600);
    }
}
