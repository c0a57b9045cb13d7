//! Output shaping: secrets are redacted and terminal control sequences are
//! neutralised before anything leaves the executor. The agent (and any model
//! behind it) is not trusted with credentials it does not need to diagnose.

use std::sync::OnceLock;

use regex::Regex;

pub const REDACTED: &str = "[REDACTED]";

/// Environment keys whose values are withheld.
const SECRET_KEY_PARTS: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PWD",
    "SECRET",
    "TOKEN",
    "KEY",
    "CREDENTIAL",
    "PRIVATE",
    "AUTH",
    "COOKIE",
    "SESSION",
    "DSN",
];

fn log_patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let table: &[(&str, &str)] = &[
            // user:password@ in URLs and connection strings.
            (r"(?P<keep>[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:)[^\s@/]+@", "${keep}[REDACTED]@"),
            // Authorization headers and bearer tokens.
            (r"(?i)(?P<keep>\bbearer\s+)[a-z0-9\-._~+/]+=*", "${keep}[REDACTED]"),
            (r"(?i)(?P<keep>\bbasic\s+)[a-z0-9+/]{8,}=*", "${keep}[REDACTED]"),
            // key=value / key: value for secret-looking keys.
            (
                r#"(?i)(?P<keep>\b[a-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key)[a-z0-9_.\-]*["']?\s*[=:]\s*["']?)[^\s"',;&]+"#,
                "${keep}[REDACTED]",
            ),
            // Cloud and service keys with recognisable shapes.
            (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "[REDACTED]"),
            (r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", "[REDACTED]"),
            (r"\bxox[abposr]-[A-Za-z0-9\-]{10,}\b", "[REDACTED]"),
            (r"\bsk-[A-Za-z0-9_\-]{20,}\b", "[REDACTED]"),
            (r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\b", "[REDACTED]"),
            // A whole key on one line, or its header with whatever follows.
            (r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", "[REDACTED PRIVATE KEY]"),
        ];
        table
            .iter()
            .filter_map(|(re, rep)| Regex::new(re).ok().map(|r| (r, *rep)))
            .collect()
    })
}

fn ansi() -> &'static Regex {
    static ANSI: OnceLock<Regex> = OnceLock::new();
    // CSI and OSC sequences, and the two-byte escapes.
    ANSI.get_or_init(|| {
        Regex::new(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
            .expect("the ANSI pattern is a valid constant")
    })
}

/// Redact one line of log output; returns the line and how many secrets were
/// withheld.
pub fn redact_text(text: &str) -> (String, u32) {
    let mut out = text.to_string();
    let mut count = 0u32;
    for (re, rep) in log_patterns() {
        let n = re.find_iter(&out).count() as u32;
        if n > 0 {
            count += n;
            out = re.replace_all(&out, *rep).into_owned();
        }
    }
    (out, count)
}

/// Remove ANSI sequences and replace other control characters (tab kept) so
/// output cannot repaint an operator's terminal or smuggle hidden text.
pub fn neutralise_controls(text: &str) -> String {
    let stripped = ansi().replace_all(text, "");
    stripped
        .chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// Multi-line text (health probe output): each line neutralised and
/// redacted, line breaks kept, trailing whitespace dropped.
pub fn shape_multiline(text: &str) -> (String, u32) {
    let mut total = 0;
    let lines: Vec<String> = text
        .trim_end()
        .lines()
        .map(|l| {
            let (l, n) = redact_text(&neutralise_controls(l.trim_end_matches('\r')));
            total += n;
            l
        })
        .collect();
    (lines.join("\n"), total)
}

/// Shapes a sequence of log lines. Stateful because a PEM private key spans
/// lines: everything between its BEGIN and END lines is withheld.
#[derive(Default)]
pub struct LogShaper {
    in_private_key: bool,
    redactions: u32,
}

impl LogShaper {
    /// A shaper for one window of lines. A window that starts inside a key
    /// (its first marker is an END line: the tail cut the BEGIN off) is
    /// withheld up to that END line.
    pub fn for_window<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> LogShaper {
        let first_marker = lines.into_iter().find_map(|raw| {
            let text = String::from_utf8_lossy(raw);
            if !text.contains("PRIVATE KEY-----") {
                return None;
            }
            Some(text.contains("-----END") && !text.contains("-----BEGIN"))
        });
        LogShaper {
            in_private_key: first_marker.unwrap_or(false),
            redactions: 0,
        }
    }

    pub fn line(&mut self, raw: &[u8]) -> String {
        let text = String::from_utf8_lossy(raw);
        let text = neutralise_controls(text.trim_end_matches(['\n', '\r']));
        if self.in_private_key {
            if text.contains("-----END") && text.contains("PRIVATE KEY-----") {
                self.in_private_key = false;
            }
            self.redactions += 1;
            return REDACTED.to_string();
        }
        if text.contains("-----BEGIN")
            && text.contains("PRIVATE KEY-----")
            && !text.contains("-----END")
        {
            self.in_private_key = true;
        }
        let (line, n) = redact_text(&text);
        self.redactions += n;
        line
    }

    pub fn redactions(&self) -> u32 {
        self.redactions
    }
}

/// Bytes from Docker to a safe, redacted line.
pub fn shape_log_line(raw: &[u8]) -> (String, u32) {
    let text = String::from_utf8_lossy(raw);
    let trimmed = text.trim_end_matches(['\n', '\r']);
    redact_text(&neutralise_controls(trimmed))
}

pub fn is_secret_key(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    SECRET_KEY_PARTS.iter().any(|part| upper.contains(part))
}

/// `KEY=VALUE` from a container's environment, with the value withheld when
/// the key looks secret and credentials stripped from URLs otherwise.
pub fn redact_env(entry: &str) -> (String, u32) {
    let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
    let key = neutralise_controls(key);
    if is_secret_key(&key) && !value.is_empty() {
        return (format!("{key}={REDACTED}"), 1);
    }
    let (value, n) = redact_text(&neutralise_controls(value));
    (format!("{key}={value}"), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_of_secret_keys_are_withheld() {
        let cases = [
            ("DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED]", 1),
            ("API_TOKEN=abc", "API_TOKEN=[REDACTED]", 1),
            (
                "aws_secret_access_key=zzz",
                "aws_secret_access_key=[REDACTED]",
                1,
            ),
            (
                "DATABASE_URL=postgres://app:s3cret@db:5432/app",
                "DATABASE_URL=postgres://app:[REDACTED]@db:5432/app",
                1,
            ),
            ("PORT=8080", "PORT=8080", 0),
            ("EMPTY_SECRET=", "EMPTY_SECRET=", 0),
        ];
        for (input, want, n) in cases {
            assert_eq!(redact_env(input), (want.to_string(), n), "{input}");
        }
    }

    #[test]
    fn log_secrets_are_redacted() {
        let cases = [
            (
                "Authorization: Bearer eyJhbGciOi.abc",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "connecting to mysql://root:pw@db:3306/x",
                "connecting to mysql://root:[REDACTED]@db:3306/x",
            ),
            ("password=hunter2 user=bob", "password=[REDACTED] user=bob"),
            (
                "aws key AKIAIOSFODNN7EXAMPLE used",
                "aws key [REDACTED] used",
            ),
            (
                "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "token: [REDACTED]",
            ),
            ("-----BEGIN RSA PRIVATE KEY-----", "[REDACTED PRIVATE KEY]"),
            (
                "connection refused to db:5432",
                "connection refused to db:5432",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact_text(input).0, want, "{input}");
        }
        assert!(redact_text("password=a secret=b").1 >= 2);
    }

    #[test]
    fn controls_and_bad_utf8_are_neutralised() {
        assert_eq!(neutralise_controls("\x1b[31mred\x1b[0m"), "red");
        assert_eq!(
            neutralise_controls("a\x07b\rc\td"),
            "a\u{FFFD}b\u{FFFD}c\td"
        );
        assert_eq!(neutralise_controls("\x1b]0;title\x07x"), "x");
        let mut shaper = LogShaper::default();
        let lines: Vec<String> = [
            "key:",
            "-----BEGIN PRIVATE KEY-----",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
            "-----END PRIVATE KEY-----",
            "after",
        ]
        .iter()
        .map(|l| shaper.line(l.as_bytes()))
        .collect();
        assert_eq!(
            lines,
            [
                "key:",
                "[REDACTED PRIVATE KEY]",
                "[REDACTED]",
                "[REDACTED]",
                "after"
            ]
        );
        assert_eq!(shaper.redactions(), 3);
        let cut: [&[u8]; 3] = [
            b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
            b"-----END PRIVATE KEY-----",
            b"after",
        ];
        let mut shaper = LogShaper::for_window(cut);
        let lines: Vec<String> = cut.iter().map(|l| shaper.line(l)).collect();
        assert_eq!(
            lines,
            ["[REDACTED]", "[REDACTED]", "after"],
            "a window starting inside a key"
        );
        assert_eq!(
            redact_text("k=-----BEGIN PRIVATE KEY-----MIIEvQIB-----END PRIVATE KEY----- done").0,
            "k=[REDACTED PRIVATE KEY] done"
        );
        let (line, _) = shape_log_line(b"ok \xff\xfe end\n");
        assert_eq!(line, "ok \u{FFFD}\u{FFFD} end");
        assert_eq!(
            shape_multiline("HTTP 503\r\npassword=x\n\n"),
            ("HTTP 503\npassword=[REDACTED]".to_string(), 1)
        );
    }
}
