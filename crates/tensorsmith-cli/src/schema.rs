//! `validate --schema`: checks a safetensors header against the reference's JSON schema with
//! a real JSON-Schema validator. The schema's dtype pattern misses names such as BOOL, C64
//! and the F4/F6 types (spec §2.1, §5.1), so a pattern failure on a `dtype` that names a
//! known safetensors dtype is not reported.

use serde_json::Value;
use std::sync::OnceLock;
use tensorsmith::dtype::DType;

/// The schema, verbatim from the reference (copied from shared/schemas).
const SCHEMA: &str = include_str!("../schemas/safetensors.schema.json");

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let schema: Value = serde_json::from_str(SCHEMA).expect("bundled schema is JSON");
        jsonschema::validator_for(&schema).expect("bundled schema compiles")
    })
}

/// Schema violations of a header (the JSON text), one message each; empty when valid.
pub fn check_header(json: &str) -> Vec<String> {
    let value: Value = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => return vec![format!("header is not JSON: {e}")],
    };
    validator()
        .iter_errors(&value)
        .filter(|e| !is_known_dtype_pattern_miss(e))
        .map(|e| format!("schema: at '{}': {}", e.instance_path(), e))
        .collect()
}

fn is_known_dtype_pattern_miss(e: &jsonschema::ValidationError) -> bool {
    matches!(
        e.kind(),
        jsonschema::error::ValidationErrorKind::Pattern { .. }
    ) && e.instance_path().as_str().ends_with("/dtype")
        && e.instance()
            .as_str()
            .is_some_and(|s| DType::from_safetensors_name(s, true).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_names_the_pattern_misses() {
        let h = r#"{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"C64","shape":[],"data_offsets":[1,9]}}"#;
        assert!(check_header(h).is_empty(), "{:?}", check_header(h));
    }

    #[test]
    fn reports_what_the_schema_forbids() {
        let h = r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1},"__metadata__":{"k":1}}"#;
        let errs = check_header(h);
        assert_eq!(errs.len(), 2, "{errs:?}");
        let h = r#"{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}}"#;
        assert_eq!(check_header(h).len(), 1);
    }
}
