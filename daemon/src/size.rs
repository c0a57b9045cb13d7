//! Sizes are written the way people write them: `64MiB`, `512KiB`, `1GB`,
//! or a plain number of bytes. Use as `#[serde(with = "drydock_daemon::size")]`.

use serde::{Deserialize, Deserializer, Serializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum Raw {
    Bytes(u64),
    Text(String),
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match Raw::deserialize(d)? {
        Raw::Bytes(n) => Ok(n),
        Raw::Text(t) => parse(&t).map_err(serde::de::Error::custom),
    }
}

pub fn serialize<S: Serializer>(n: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(*n)
}

/// Parse a human size, with an error that shows the expected form.
pub fn parse(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a size like 64MiB, 512KiB, 1GB or 1048576");
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    number.checked_mul(factor).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_human_forms_and_explains_bad_ones() {
        assert_eq!(super::parse("64MiB").unwrap(), 64 << 20);
        assert_eq!(super::parse("512 KiB").unwrap(), 512 << 10);
        assert_eq!(super::parse("1GB").unwrap(), 1_000_000_000);
        assert_eq!(super::parse("4096").unwrap(), 4096);
        for bad in ["big", "12XB", "-5MiB", "99999999999999999999GiB", ""] {
            let err = super::parse(bad).unwrap_err();
            assert!(err.contains("64MiB"), "{bad}: {err}");
        }
    }
}
