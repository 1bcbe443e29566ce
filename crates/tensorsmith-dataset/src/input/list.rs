//! The input files a write names: a file or object as given; a local folder, or a URL that
//! ends with `/` or names no object but a prefix (`s3://b/in/`), gives the files directly in
//! it, in name order, skipping names that start with `_` or `.` (`_SUCCESS`, `.crc` files), as
//! Spark reads a folder. A Hive-partitioned folder (`key=value` subfolders) is refused,
//! naming it.

use crate::error::{DatasetError, Result};
use std::path::Path;
use tensorsmith::bytes::{redact_url, scheme_name, url_scheme, StorageOptions, UrlScheme};

/// Whether a file or object name is data (not `_`- or `.`-prefixed).
fn listed(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('_') && !name.starts_with('.')
}

/// The input files of `locations` (local paths and URLs, mixed), folders and prefixes listed.
pub fn input_locations(
    locations: &[impl AsRef<str>],
    storage: &StorageOptions,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for loc in locations {
        let loc = loc.as_ref();
        if scheme_name(loc).is_none() {
            let p = Path::new(loc);
            if p.is_dir() {
                out.extend(list_folder(p)?);
            } else {
                out.push(loc.to_owned());
            }
        } else if loc.ends_with('/') {
            out.extend(list_prefix(loc, storage)?);
        } else {
            out.push(loc.to_owned());
        }
    }
    if out.is_empty() {
        return Err(DatasetError::input(format!(
            "no input files in {}",
            locations
                .iter()
                .map(|l| redact_url(l.as_ref()))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(out)
}

fn list_folder(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| DatasetError::io(dir, e))?;
    for e in entries {
        let e = e.map_err(|e| DatasetError::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if listed(&name) && e.path().is_file() {
            names.push(name);
        } else if listed(&name) && name.contains('=') && e.path().is_dir() {
            return Err(hive_partitioned(dir, &name));
        }
    }
    names.sort();
    Ok(names
        .into_iter()
        .map(|n| dir.join(n).to_string_lossy().into_owned())
        .collect())
}

/// A folder with `key=value` subfolders: a Hive-partitioned table, whose partition columns
/// live in folder names. Not read: its files would lose those columns, and the subfolders
/// would be skipped as any folder in an input folder is.
fn hive_partitioned(dir: &Path, sub: &str) -> DatasetError {
    DatasetError::Input {
        file: Some(dir.to_path_buf()),
        column: None,
        row: None,
        msg: format!(
            "a Hive-partitioned folder (subfolder {sub}), which dataset write does not read: \
             its partition columns are in folder names, not in the files; write a folder of \
             files without partitions (Spark: no partitionBy), or name the partition files \
             themselves as inputs"
        ),
    }
}

/// The objects directly under `prefix` (a URL ending with `/`: `s3://`, `az://`,
/// `abfs(s)://`, `gs://`), in name order.
pub fn list_prefix(prefix: &str, storage: &StorageOptions) -> Result<Vec<String>> {
    use tensorsmith::bytes::{GcsClient, ObjectClient};
    let (objects, key) = match url_scheme(prefix) {
        Some(UrlScheme::S3 | UrlScheme::Az) => {
            let (client, key) = ObjectClient::for_url(prefix, storage)?;
            (client.list(&key)?, key)
        }
        Some(UrlScheme::Gs) => {
            let (client, key) = GcsClient::for_url(prefix, storage)?;
            (client.list(&key)?, key)
        }
        _ => {
            let scheme = scheme_name(prefix).unwrap_or_default();
            return Err(DatasetError::Input {
                file: Some(Path::new(&redact_url(prefix)).to_path_buf()),
                column: None,
                row: None,
                msg: format!(
                    "listing {scheme}:// prefixes is not supported (s3://, az://, gs:// are): \
                     name the input objects one by one"
                ),
            });
        }
    };
    let under: Vec<String> = objects
        .into_iter()
        .filter_map(|o| o.key.strip_prefix(key.as_str()).map(str::to_owned))
        .collect();
    if let Some((sub, _)) = under
        .iter()
        .filter_map(|n| n.split_once('/'))
        .find(|(sub, _)| listed(sub) && sub.contains('='))
    {
        return Err(hive_partitioned(Path::new(&redact_url(prefix)), sub));
    }
    let mut names: Vec<String> = under
        .into_iter()
        .filter(|n| listed(n) && !n.contains('/'))
        .collect();
    names.sort();
    Ok(names.into_iter().map(|n| format!("{prefix}{n}")).collect())
}
