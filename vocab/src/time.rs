//! The two clocks the API speaks: RFC 3339 text for people, unix seconds for
//! arithmetic; and a span of seconds in words.

/// Now, as RFC 3339 with milliseconds (`2026-12-02T01:10:27.123Z`).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Now, in unix seconds (0 if the clock is before 1970).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A span of seconds as people say it: `40 s`, `12 min`, `3 h`, `6 days`
/// (the sign is dropped: the caller says "ago" or "in").
pub fn span(secs: i64) -> String {
    let secs = secs.unsigned_abs();
    match secs {
        0..=89 => format!("{secs} s"),
        90..=5399 => format!("{} min", (secs + 30) / 60),
        5400..=129_599 => format!("{} h", (secs + 1800) / 3600),
        _ => format!("{} days", (secs + 43_200) / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_people_say_them() {
        assert_eq!(span(40), "40 s");
        assert_eq!(span(-40), "40 s");
        assert_eq!(span(600), "10 min");
        assert_eq!(span(3 * 3600), "3 h");
        assert_eq!(span(6 * 86_400), "6 days");
    }
}
