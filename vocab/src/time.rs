//! The two clocks the API speaks: RFC 3339 text for people, unix seconds for
//! arithmetic.

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
