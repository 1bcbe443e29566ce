//! An input as the user names it: a path as the OS gives it (any bytes, not only UTF-8), a
//! URL, or `-` for stdin.
//!
//! - A pipe, a character device (`/dev/stdin` on a pipe) or `-` is read whole, in bounded
//!   memory, into an unlinked temporary file, then opened from it: every format is read by
//!   position, which a pipe cannot do.
//! - A file whose name is not UTF-8 is opened by its bytes, as one file. A folder (a
//!   checkpoint) of such a name is refused naming the rule: the files of a checkpoint or of a
//!   split model are found by UTF-8 names.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use tensorsmith::bytes::LocalFile;
use tensorsmith::{Error, Model, OpenOptions, Result};

/// What `-` is called in messages.
pub const STDIN: &str = "<stdin>";

/// A name as text for messages: UTF-8 as it is, anything else as U+FFFD (as `ls` shows `?`).
pub fn shown_name(name: &OsStr) -> String {
    name.to_string_lossy().into_owned()
}

/// True for what cannot be read by position: a pipe, a socket, a character device.
fn is_stream(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        t.is_fifo() || t.is_char_device() || t.is_socket()
    })
}

/// Opens the model `arg` names; see the module's notes.
pub fn open_input(arg: &OsStr, opts: &OpenOptions) -> Result<Model> {
    if arg == "-" {
        return spooled(io::stdin().lock(), STDIN, opts);
    }
    let path = Path::new(arg);
    let name = shown_name(arg);
    let url = arg.to_str().is_some_and(tensorsmith::bytes::is_url);
    if !url && is_stream(path) {
        let f = File::open(path).map_err(|e| Error::from(e).in_file(Path::new(&name)))?;
        return spooled(f, &name, opts);
    }
    match arg.to_str() {
        Some(s) => crate::open_model(s, opts),
        None if path.is_dir() => Err(Error::from(io::Error::new(
            io::ErrorKind::InvalidInput,
            "this folder's name is not UTF-8, and the files of a checkpoint are found by UTF-8 \
             names: rename it, or name one of its files",
        ))
        .in_file(Path::new(&name))),
        None => {
            let at = Path::new(&name);
            let file = File::open(path).map_err(|e| Error::from(e).in_file(at))?;
            let file = LocalFile::from_file(file, opts.backend()).map_err(|e| e.in_file(at))?;
            tensorsmith::model::open_reader(&name, Box::new(file), opts)
        }
    }
}

/// The whole of `src` copied into an unlinked temporary file, then opened from it as `name`.
fn spooled(mut src: impl Read, name: &str, opts: &OpenOptions) -> Result<Model> {
    let at = |e: io::Error| Error::from(e).in_file(Path::new(name));
    let mut tmp = unlinked_temp().map_err(at)?;
    io::copy(&mut src, &mut tmp).map_err(at)?;
    let file = LocalFile::from_file(tmp, opts.backend()).map_err(|e| e.in_file(Path::new(name)))?;
    tensorsmith::model::open_reader(name, Box::new(file), opts)
}

/// A new file in the temporary folder, already removed from it (it goes when closed).
fn unlinked_temp() -> io::Result<File> {
    let dir = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    for i in 0..100u32 {
        let p = dir.join(format!(
            ".tensorsmith-stdin-{}-{nanos:08x}-{i}",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => {
                std::fs::remove_file(&p)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("creating a temporary file in {}: {e}", dir.display()),
                ))
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free temporary file name in {}", dir.display()),
    ))
}
