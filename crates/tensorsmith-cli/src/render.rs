//! Small helpers for human-readable output.

/// Escapes control characters (and backslashes) so a tensor name cannot move the cursor or
/// recolour the terminal; printable Unicode stays as it is.
pub fn printable(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return s.to_string();
    }
    s.chars()
        .flat_map(|c| {
            if c.is_control() || c == '\\' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// The widest a table's name column grows: a longer name pushes only its own row's cells
/// along, instead of padding every row to it.
pub const NAME_COLUMN_MAX: usize = 80;

/// The columns `s` takes on a terminal (East Asian wide characters take two).
pub fn width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// `s` followed by spaces up to `w` columns (nothing when it is wider).
pub fn pad_right(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(width(s))))
}

/// Spaces up to `w` columns, then `s` (right-aligned).
pub fn pad_left(s: &str, w: usize) -> String {
    format!("{}{s}", " ".repeat(w.saturating_sub(width(s))))
}

/// 1234567 → "1,234,567".
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count and its noun, singular for one: "1 tensor", "20,000 tensors", "2 retries".
pub fn count(n: impl TryInto<u64>, noun: &str) -> String {
    let n: u64 = n.try_into().unwrap_or(u64::MAX);
    if n == 1 {
        return format!("1 {noun}");
    }
    let plural = match noun.strip_suffix('y') {
        Some(stem) if !stem.ends_with(['a', 'e', 'o', 'u']) => format!("{stem}ies"),
        _ => format!("{noun}s"),
    };
    format!("{} {plural}", grouped(n))
}

/// Bytes with a binary unit: "1.50 GiB".
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// A size for a person: `807 bytes`, or `33.24 KiB (34,040 bytes)` where the unit rounds.
pub fn size_with_bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else {
        format!("{} ({} bytes)", human_bytes(n), grouped(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_control_characters_only() {
        assert_eq!(printable("a\u{1b}[31mb\né"), "a\\u{1b}[31mb\\né");
        assert_eq!(grouped(1234567), "1,234,567");
        assert_eq!(grouped(12), "12");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(size_with_bytes(807), "807 bytes");
        assert_eq!(size_with_bytes(34040), "33.24 KiB (34,040 bytes)");
    }
}
