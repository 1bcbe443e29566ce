//! The string encodings weight-inspect's hashed JSON is made of: its inner quoting of string
//! values and serde_json's JSON strings. Shared by the safetensors/GGUF and ONNX hashes.

/// `"` + escaped + `"`: `\"`, `\\`, `\n`, `\r`, `\t`; other ASCII controls and DEL as
/// `\u00xx`; everything else (including non-ASCII) as it is.
pub(crate) fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                o.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A JSON string as serde_json writes it (what weight-inspect's serializer does).
pub(crate) fn js(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}
