//! An object key as object_store's path: the key's own characters (`Path::parse`). Its
//! `Path::from` percent-encodes `~ % # ? * [ ] " '`, `\ ^ { } | < >` and every non-ASCII
//! byte into the key itself, and drops empty segments, so `s3://b/模型.safetensors` was
//! written and read as the object `%E6%A8%A1%E5%9E%8B.safetensors` and `s3://b/a//m` as
//! `a/m`: other objects than the ones named. A key object_store cannot name as it is (an
//! empty, `.` or `..` segment, a leading or trailing `/`, a control character) is refused.

use crate::error::{Error, ErrorKind, Result};
use object_store::path::Path as StorePath;

/// The object_store path naming exactly the object `key`.
pub(crate) fn store_path(key: &str) -> Result<StorePath> {
    let why = if key.starts_with('/') || key.ends_with('/') {
        Some("starts or ends with '/'")
    } else if key.split('/').any(str::is_empty) {
        Some("has an empty segment ('//')")
    } else {
        None
    };
    let refuse = |why: &str| {
        Error::new(ErrorKind::BadStorageOption(format!(
            "the object key {key:?} {why}, which the store client (object_store) cannot name \
             as it is: read or write it under another key"
        )))
    };
    if let Some(why) = why {
        return Err(refuse(why));
    }
    StorePath::parse(key).map_err(|e| match e {
        object_store::path::Error::BadSegment { source, .. } => {
            refuse(&format!("has a segment that is not a name ({source})"))
        }
        other => refuse(&other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::store_path;

    #[test]
    fn keys_are_named_as_they_are_or_refused() {
        for key in [
            "模型.safetensors",
            "a/~m",
            "p/m%41",
            "b/m[1]#?*\"'",
            "sp ace/+;=&:@",
        ] {
            assert_eq!(store_path(key).unwrap().as_ref(), key);
        }
        for key in ["a//m", "/a", "a/", "a/./m", "a/../m", "a/\u{1}"] {
            let e = store_path(key).unwrap_err().to_string();
            assert!(
                e.contains("cannot name") && e.contains(&format!("{key:?}")),
                "{e}"
            );
        }
    }
}
