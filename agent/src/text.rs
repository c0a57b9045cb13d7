//! Text for people: sizes in words, and secret-looking values taken out of
//! text before it leaves the agent (to a model, a webhook, an alert's
//! request). The executor already redacts what it answers; this is the
//! agent's second pass over text it writes itself or got from elsewhere.

use std::sync::OnceLock;

use regex::Regex;

/// `1.5 GiB`, `512 B`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Secret-looking values (`password=…`, bearer tokens, API keys) replaced by
/// `[redacted]`, the name before them kept.
pub fn redact(text: &str) -> String {
    static PATTERNS: OnceLock<Vec<Regex>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            r"(?i)((?:password|passwd|secret|token|api[_-]?key|access[_-]?key)\s*[=:]\s*)[^\s,;&]+",
            r"(?i)(bearer\s+)[a-z0-9._~+/=-]{8,}",
            r"()\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}",
            r"()\bAKIA[0-9A-Z]{16}\b",
        ]
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect()
    });
    let mut out = text.to_string();
    for re in patterns {
        out = re.replace_all(&out, "${1}[redacted]").into_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
    }

    #[test]
    fn secrets_are_redacted_and_their_names_kept() {
        let said = redact("DB password=hunter2 and Authorization: Bearer abcdefgh12345678");
        assert_eq!(
            said,
            "DB password=[redacted] and Authorization: Bearer [redacted]"
        );
        assert_eq!(redact("key sk-abcdefghijklmnop1234"), "key [redacted]");
        assert_eq!(redact("nothing secret here"), "nothing secret here");
    }
}
