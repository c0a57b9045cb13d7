//! Text for the terminal: whatever the agent says is untrusted and shown
//! safely, what a person types is checked before it reaches the agent, and
//! times are said absolutely and relatively.

use anyhow::Context as _;
use drydock_vocab::{span, Status};

/// Text from the agent is untrusted: control characters (terminal escape
/// sequences) are shown as `?`, never interpreted by the terminal.
pub fn safe(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Like `safe`, keeping line breaks (multi-line error reports).
pub fn safe_lines(text: &str) -> String {
    text.lines().map(safe).collect::<Vec<_>>().join("\n")
}

/// The first 12 characters of an id, made safe.
pub fn short(id: &str) -> String {
    safe(&id.chars().take(12).collect::<String>())
}

/// `restart` → `Restart`.
pub fn capitalized(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// An id as the agent makes them (`req-…`, `apr-…`, `grt-…`): safe in a
/// path.
pub fn is_plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// A Swarm service's name or id as Docker allows them (a letter or digit,
/// then letters, digits, `_`, `.` and `-`; at most 63): safe in a path.
pub fn is_service_ref(s: &str) -> bool {
    s.len() <= 63
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// An id as a person typed it, checked before it goes into the agent's
/// paths (a clap value parser).
pub fn plain_id(id: &str) -> anyhow::Result<String> {
    if is_plain_id(id) {
        Ok(id.to_string())
    } else {
        anyhow::bail!(
            "`{}` is not an id like req-…, apr-… or grt-… (letters, digits, `-` and `_`)",
            safe(&id.chars().take(40).collect::<String>())
        )
    }
}

/// A request state as a person or an assistant names it; the error lists
/// the states.
pub fn parse_status(s: &str) -> anyhow::Result<Status> {
    Status::parse(s).with_context(|| {
        format!(
            "`{}` is not a request state: one of {}",
            safe(&s.chars().take(40).collect::<String>()),
            Status::ALL.map(Status::as_str).join(", ")
        )
    })
}

/// A schedule's cadence (`30s`, `15m`, `1h`, `1d`) in whole seconds,
/// within what the agent keeps.
pub fn parse_every(s: &str) -> anyhow::Result<u64> {
    use drydock_vocab::{MAX_SCHEDULE_SECS, MIN_SCHEDULE_SECS};
    let every = humantime::parse_duration(s).map_err(|e| {
        anyhow::anyhow!(
            "`{}` is not a duration ({e}): write it like 30s, 15m, 1h or 1d",
            safe(&s.chars().take(40).collect::<String>())
        )
    })?;
    let secs = every.as_secs();
    if !(MIN_SCHEDULE_SECS..=MAX_SCHEDULE_SECS).contains(&secs) {
        anyhow::bail!(
            "a schedule runs every {MIN_SCHEDULE_SECS} s at the most often and every 30 days at the least, not every {}",
            humantime::format_duration(every)
        );
    }
    Ok(secs)
}

pub fn unix_now() -> i64 {
    drydock_vocab::unix_now()
}

/// The latest time humantime (and RFC 3339) can write: 9999-12-31T23:59:59Z.
pub const LAST_WRITABLE_SECOND: i64 = 253_402_300_799;

/// `2026-11-30T21:09:00Z (in 9 min)`: absolute and relative, and never a
/// panic, whatever the agent put in the claims.
pub fn describe_time(t: i64, now: i64) -> String {
    if !(0..=LAST_WRITABLE_SECOND).contains(&t) {
        return format!("at unix time {t}, which is not a real date");
    }
    let absolute = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.unsigned_abs()),
    );
    let delta = t.saturating_sub(now);
    let relative = if delta >= 0 {
        format!("in {}", span(delta))
    } else {
        format!("{} ago", span(delta))
    };
    format!("{absolute} ({relative})")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    #[test]
    fn times_are_described_absolutely_and_relatively() {
        assert_eq!(
            describe_time(NOW + 540, NOW),
            "2027-01-15T08:09:00Z (in 9 min)"
        );
        assert!(describe_time(NOW - 120, NOW).ends_with("(2 min ago)"));
        assert!(describe_time(LAST_WRITABLE_SECOND + 1, NOW).contains("not a real date"));
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(safe("ok\u{1b}[31mred"), "ok?[31mred");
        assert_eq!(safe_lines("a\nb\u{7}"), "a\nb?");
    }
}
