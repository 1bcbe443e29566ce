//! AWS's shared files: `~/.aws/config` (`AWS_CONFIG_FILE`, sections `[profile NAME]`) and
//! `~/.aws/credentials` (`AWS_SHARED_CREDENTIALS_FILE`, sections `[NAME]`), one profile's
//! settings merged (the credentials file wins where both set a key). What a profile's
//! settings mean for credentials is the chain's business (`aws_chain.rs`).

use crate::error::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::path::PathBuf;

fn bad(msg: String) -> Error {
    Error::new(ErrorKind::BadStorageOption(msg))
}

/// One profile's keys from the credentials file and the config file (the credentials file
/// wins where both set a key).
pub(crate) struct Profile {
    pub name: String,
    values: HashMap<String, String>,
    /// Whether a section of this name was in either file.
    pub found: bool,
}

impl Profile {
    /// The profile `name`; one named explicitly must exist in one of the files.
    pub(crate) fn load(
        name: &str,
        explicit: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Profile> {
        let home = env("HOME").map(PathBuf::from);
        let file = |var: &str, default: &str| {
            env(var)
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
        };
        let mut values = HashMap::new();
        let mut found = false;
        let config_section = if name == "default" {
            "default".to_owned()
        } else {
            format!("profile {name}")
        };
        let sources = [
            (file("AWS_CONFIG_FILE", "config"), config_section),
            (
                file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
                name.to_owned(),
            ),
        ];
        for (path, section) in sources {
            let Some(path) = path else { continue };
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if let Some(kv) = ini_section(&text, &section) {
                found = true;
                values.extend(kv);
            }
        }
        if explicit && !found {
            return Err(bad(format!(
                "AWS profile '{name}' is in neither the credentials nor the config file"
            )));
        }
        Ok(Profile {
            name: name.to_owned(),
            values,
            found,
        })
    }

    pub(crate) fn get(&self, key: &str) -> Option<String> {
        self.values.get(key).filter(|v| !v.is_empty()).cloned()
    }
}

/// The `key = value` lines of `[section]` in an INI text, keys lower-cased; `None` if there
/// is no such section. Indented lines (nested settings) and comments are skipped.
fn ini_section(text: &str, section: &str) -> Option<HashMap<String, String>> {
    let mut out: Option<HashMap<String, String>> = None;
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            inside = name == section;
            if inside {
                out.get_or_insert_with(HashMap::new);
            }
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if let Some(map) = out.as_mut() {
                map.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
    }
    out
}
