//! Durations are written the way people write them: `5s`, `500ms`, `10m`.
//! Use as `#[serde(with = "drydock_daemon::duration")]`.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse(&text).map_err(serde::de::Error::custom)
}

pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}

/// Parse a human duration, with an error that shows the expected form.
pub fn parse(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration like 5s, 500ms or 10m ({e})"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_human_forms_and_explains_bad_ones() {
        assert_eq!(super::parse("500ms").unwrap().as_millis(), 500);
        assert_eq!(super::parse("10m").unwrap().as_secs(), 600);
        let err = super::parse("soon").unwrap_err();
        assert!(err.contains("`soon`") && err.contains("5s"), "{err}");
    }
}
