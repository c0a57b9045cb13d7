//! Errors the program got over. A long-running service logs failures it
//! retries and recovers from ("failed to refresh license cache" … "license
//! cache refreshed"; "update check failed" … "update check will run again
//! in 24h"). A person reading the log passes over them: what the program
//! itself said it recovered from is no cause of a later failure. An error
//! counts as recovered when a later line, not itself a warning or an
//! error, speaks of the same thing (two words of the error's own, not
//! levels or common words) and says it succeeded or will simply be tried
//! again later.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::salient::{severity, Severity};
use crate::model::LogsView;

/// How many words of its own an error and the line that recovers it
/// share: one is too little (`bootstrap check failure` is not recovered
/// by `update check will run again`).
const SHARED: usize = 2;

/// How far after an error the line that says it recovered may come.
const WITHIN: usize = 40;

/// A line that says something worked, or will simply run again.
static RECOVERY: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)
        \bsucceeded\b | \bsuccessful(?:ly)?\b | \brefreshed\b | \bdelivered\b
        | \breconnected\b | \bre-?established\b | \brecovered\b | \brestored\b
        | \bresumed\b | \bon\ retry\b | \bafter\ \d+\ (?:retries|attempts)\b
        | \bwill\ (?:run|try|be\ tried)\ again\b | \bback\ (?:online|up|to\ normal)\b
        ",
    )
    .ok()
});

/// A line that says something did not work ("not refreshed").
static NEGATED: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(?:not|never|no longer|un(?:able|successful))\b").ok());

/// Words every kind of line shares: levels, verbs of failure and retry,
/// connectives. A line sharing only these with an error is not about
/// the same thing.
const COMMON: &[&str] = &[
    "trace", "debug", "info", "notice", "warn", "warning", "error", "fatal", "critical", "level",
    "msg", "message", "failed", "failure", "fails", "retry", "retrying", "retries", "again",
    "will", "with", "from", "that", "this", "then", "after", "attempt", "main", "thread", "http",
    "https", "true", "false", "null", "none", "time", "when", "into", "there", "their", "have",
    "been", "could", "cannot", "unable", "because", "while", "after", "before", "seconds",
    "minutes",
];

/// The words a line speaks of: lowercase runs of letters, digits, `_` and
/// `.` of four characters or more that are not common words.
fn subject_words(line: &str) -> BTreeSet<String> {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .map(|w| w.trim_matches('.').to_lowercase())
        .filter(|w| w.chars().count() >= 4 && w.chars().any(char::is_alphabetic))
        .filter(|w| !COMMON.contains(&w.as_str()))
        .collect()
}

/// The logs without the errors the program recovered from.
pub fn without_recovered(logs: &LogsView) -> LogsView {
    let texts: Vec<&str> = logs.lines.iter().map(|l| l.text.as_str()).collect();
    let marks = recovered(&texts);
    LogsView {
        lines: logs
            .lines
            .iter()
            .zip(marks)
            .filter(|(_, gone)| !gone)
            .map(|(l, _)| l.clone())
            .collect(),
        ..logs.clone()
    }
}

/// For each line, whether it is an error or warning the program later
/// said it recovered from.
pub fn recovered(lines: &[&str]) -> Vec<bool> {
    let severities: Vec<Severity> = lines.iter().map(|l| severity(l)).collect();
    // Each line that says something recovered, with its words: read once.
    let recoveries: Vec<Option<BTreeSet<String>>> = lines
        .iter()
        .zip(&severities)
        .map(|(l, sev)| {
            let says = *sev == Severity::Info
                && RECOVERY.as_ref().is_some_and(|r| r.is_match(l))
                && NEGATED.as_ref().is_some_and(|r| !r.is_match(l));
            says.then(|| subject_words(l))
        })
        .collect();
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            if severities[i] < Severity::Warn {
                return false;
            }
            let about = subject_words(line);
            !about.is_empty()
                && recoveries
                    .iter()
                    .skip(i + 1)
                    .take(WITHIN)
                    .flatten()
                    .any(|later| later.intersection(&about).count() >= SHARED)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(lines: &[&str]) -> Vec<usize> {
        recovered(lines)
            .iter()
            .enumerate()
            .filter(|(_, r)| **r)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn an_error_the_program_said_it_recovered_from_is_marked() {
        for (error, later) in [
            (
                "[error] telemetry: POST https://t.example.net/v1/events failed: context deadline exceeded (will retry)",
                "[info] telemetry: delivered 12 queued events",
            ),
            (
                r#"level=error msg="failed to refresh license cache" err="dial tcp 10.96.0.15:443: i/o timeout""#,
                r#"level=info msg="license cache refreshed" entries=1"#,
            ),
            (
                "ERROR [scheduler-1] o.e.jobs.Cleanup - Cleanup job failed: java.net.SocketTimeoutException: Read timed out",
                "INFO  [scheduler-1] o.e.jobs.Cleanup - Cleanup job finished on retry (removed 0 stale sessions)",
            ),
            (
                r#"Error: update check failed: Get "https://updates.example.net/latest": net/http: TLS handshake timeout"#,
                "Update check will run again in 24h",
            ),
            (
                "WARN  redis: connection to cache:6379 lost, reconnecting",
                "INFO  redis: reconnected to cache:6379",
            ),
            (
                "[error] telemetry: POST https://t.example.net/v1/events failed (will retry)",
                "[info] telemetry: POST https://t.example.net/v1/events delivered",
            ),
        ] {
            assert_eq!(marks(&["INFO starting", error, "INFO serving", later]), [1], "{error}");
        }
    }

    #[test]
    fn an_error_nothing_later_recovers_stays() {
        // The same subject, but no word of recovery.
        assert!(marks(&[
            "ERROR database connection failed: connection refused",
            "INFO database pool size 10",
        ])
        .is_empty());
        // A recovery of something else.
        assert!(marks(&[
            "ERROR could not open /data/db.sqlite: permission denied",
            "INFO telemetry delivered 3 events",
        ])
        .is_empty());
        // Only common words shared.
        assert!(marks(&[
            "ERROR failed with error, will retry",
            "INFO will retry: succeeded",
        ])
        .is_empty());
        // Saying it did not work is no recovery.
        assert!(marks(&[
            "WARN license cache refresh failed",
            "INFO license cache was not refreshed; keeping the old one",
        ])
        .is_empty());
        // One word in common is not the same thing.
        assert!(marks(&[
            "bootstrap check failure [1] of [1]: max virtual memory areas vm.max_map_count [65530] is too low",
            "Update check will run again in 24h",
        ])
        .is_empty());
        // A later error does not recover an earlier one.
        assert!(marks(&[
            "ERROR license cache refresh failed",
            "ERROR license cache refresh failed again, not refreshed",
        ])
        .is_empty());
    }
}
