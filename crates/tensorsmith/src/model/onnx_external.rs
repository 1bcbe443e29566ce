//! An ONNX model with external data opened as one: the data files its tensors name (by
//! `location`, relative to the model's folder or URL) opened through the byte layer, checked
//! to stay inside the model's folder (symlinks resolved; the file opened is the file checked), each tensor's range checked against
//! its file, and the tensor then read from that file as a shard of the model. A folder
//! holding one `.onnx` opens it; a folder holding several is refused, naming them.

use super::file::{open_bytes, ModelFile};
use super::Model;
use crate::bytes::{is_http_url, is_url, LocalFile, ReadAt};
use crate::error::{Error, OnnxRule, Result};
use crate::format::OpenOptions;
use crate::index::{Format, MetaValue, TensorIndex};
use crate::onnx::{Onnx, ATTR_CHECKSUM, ATTR_LENGTH, ATTR_LOCATION};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Whether the index is of an ONNX model with tensors in external data files.
pub(super) fn has_external(index: &TensorIndex) -> bool {
    matches!(index.format, Format::Onnx { .. })
        && index
            .tensors
            .iter()
            .any(|t| t.parts.iter().any(|p| p.shard().is_some()))
}

fn bad(location: &str, rule: impl Into<String>) -> Error {
    OnnxRule::ExternalFile {
        location: location.to_string(),
        rule: rule.into(),
    }
    .into()
}

/// A URL's path bytes, percent-encoded where a URL may not hold them as they are.
fn url_path(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// Where the data file named `location` is, for a model at `model`, and its bytes: beside
/// it (a URL resolved against the model's URL; a path checked, through symlinks, to stay in
/// the model's folder, and the file opened then being the file checked).
fn resolve(model: &str, location: &str, opts: &OpenOptions) -> Result<(String, Box<dyn ReadAt>)> {
    crate::onnx::check_location(location)?;
    if is_url(model) {
        let path_end = model.find(['?', '#']).unwrap_or(model.len());
        let base = &model[..model[..path_end].rfind('/').map_or(0, |i| i + 1)];
        // An http(s) URL's path is percent-encoded; an s3:// key or hf:// path is the text
        // itself (the store's reader encodes it).
        let url = match is_http_url(model) {
            true => format!("{base}{}", url_path(location)),
            false => format!("{base}{location}"),
        };
        let bytes = open_bytes(&url, opts)?;
        return Ok((url, bytes));
    }
    let dir = match Path::new(model).parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let joined = dir.join(location);
    let real_dir = dir
        .canonicalize()
        .map_err(|e| Error::from(e).in_file(&dir))?;
    let real = joined
        .canonicalize()
        .map_err(|e| bad(location, format!("cannot be opened: {e}")))?;
    if !real.starts_with(&real_dir) {
        return Err(bad(
            location,
            format!(
                "resolves to {}, outside the model's folder {}",
                real.display(),
                real_dir.display()
            ),
        ));
    }
    let checked =
        std::fs::metadata(&real).map_err(|e| bad(location, format!("cannot be opened: {e}")))?;
    if !checked.is_file() {
        return Err(bad(location, "is not a regular file"));
    }
    let file = open_checked(&real, &checked).map_err(|e| bad(location, e))?;
    let name = joined.to_string_lossy().into_owned();
    let bytes = LocalFile::from_file(file, opts.backend()).map_err(|e| e.in_file(&joined))?;
    Ok((name, Box::new(bytes)))
}

/// Opens `real`, the file whose status `checked` was taken when its path was checked, and
/// makes sure the file opened is that one: a path component swapped for a symlink between
/// the check and the open (by someone who can write in the model's folder) would otherwise
/// open a file outside it. Without blocking: a FIFO swapped in is refused, not waited on.
fn open_checked(real: &Path, checked: &std::fs::Metadata) -> std::result::Result<File, String> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NONBLOCK);
    let file = o.open(real).map_err(|e| format!("cannot be opened: {e}"))?;
    let opened = file
        .metadata()
        .map_err(|e| format!("cannot be opened: {e}"))?;
    #[cfg(unix)]
    let same = {
        use std::os::unix::fs::MetadataExt;
        (opened.dev(), opened.ino()) == (checked.dev(), checked.ino())
    };
    #[cfg(not(unix))]
    let same = opened.len() == checked.len();
    if !opened.is_file() || !same {
        return Err(format!(
            "changed while it was opened: {} is no longer the file checked to be inside the model's folder",
            real.display()
        ));
    }
    Ok(file)
}

/// Opens the data files of `index` (read from `file`, at `location`) and returns the model.
pub(super) fn open_with_data(
    location: &str,
    mut index: TensorIndex,
    mut file: ModelFile,
    opts: &OpenOptions,
) -> Result<Model> {
    let at = |e: Error| e.in_file(Path::new(location));
    file.name = location.rsplit('/').next().unwrap_or(location).to_string();
    let mut files = vec![file];
    let mut by_location: HashMap<String, usize> = HashMap::new();
    let mut shard_of = HashMap::with_capacity(index.tensors.len());
    for t in &mut index.tensors {
        let Some(loc) = t.parts.first().and_then(|p| p.shard()).map(str::to_owned) else {
            shard_of.insert(t.name.clone(), 0);
            continue;
        };
        let i = match by_location.get(&loc) {
            Some(&i) => i,
            None => {
                let (path, bytes) =
                    resolve(location, &loc, opts).map_err(|e| at(e.at_tensor(&t.name)))?;
                files.push(ModelFile::data_file(path, loc.clone(), bytes, &Onnx));
                by_location.insert(loc.clone(), files.len() - 1);
                files.len() - 1
            }
        };
        let f = &mut files[i];
        let part = &mut t.parts[0];
        let fail = |rule: String| at(bad(&loc, rule).at_tensor(&t.name));
        if part.range.end > f.file_len {
            return Err(fail(format!(
                "bytes [{}, {}) run past the end of the {}-byte file",
                part.range.start, part.range.end, f.file_len
            )));
        }
        // Without `length` the data runs to the file's end: it must be exactly the tensor.
        if !t.attributes.contains_key(ATTR_LENGTH) && part.range.end != f.file_len {
            return Err(fail(format!(
                "no 'length': the data from offset {} runs to the end of the {}-byte file, \
                 {} bytes, but the tensor needs {}",
                part.range.start,
                f.file_len,
                f.file_len - part.range.start,
                part.decoded_len
            )));
        }
        if let Some(MetaValue::Str(c)) = t.attributes.get(ATTR_CHECKSUM) {
            if !f.sha1.iter().any(|(_, x)| x == c) {
                f.sha1.push((t.name.clone(), c.clone()));
            }
        }
        debug_assert!(t.attributes.contains_key(ATTR_LOCATION));
        part.extra = None;
        shard_of.insert(t.name.clone(), i);
    }
    Ok(Model::with_files(location, index, files, shard_of))
}

/// The one `.onnx` model in a folder (`None` when there is none); several are refused.
pub(super) fn onnx_in_dir(dir: &Path) -> Result<Option<String>> {
    let at = |e: std::io::Error| Error::from(e).in_file(dir);
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(at)? {
        let entry = entry.map_err(at)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_onnx = Path::new(&name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
        if is_onnx && !name.starts_with('.') && entry.path().is_file() {
            names.push(name);
        }
    }
    names.sort();
    match names.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(dir.join(one).to_string_lossy().into_owned())),
        _ => Err(Error::from(OnnxRule::SeveralModels(names.join(", "))).in_file(dir)),
    }
}

#[cfg(test)]
mod tests {
    use super::open_checked;

    #[test]
    fn the_file_opened_must_be_the_file_checked() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.data"), dir.path().join("b.data"));
        std::fs::write(&a, b"inside").unwrap();
        std::fs::write(&b, b"swapped in").unwrap();
        let checked = std::fs::metadata(&a).unwrap();
        assert!(open_checked(&a, &checked).is_ok());
        // The path now names another file than the one checked (a rename, a symlink).
        std::fs::rename(&b, &a).unwrap();
        let e = open_checked(&a, &checked).unwrap_err();
        assert!(e.contains("changed while it was opened"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_swapped_in_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.data");
        std::fs::write(&a, b"inside").unwrap();
        let checked = std::fs::metadata(&a).unwrap();
        std::fs::remove_file(&a).unwrap();
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(a.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_checked(&a, &checked).unwrap_err();
        assert!(e.contains("changed while it was opened"), "{e}");
    }
}
