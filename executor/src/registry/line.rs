//! Which newer tags count for a container (`drydock.update`): `digest`
//! (the default) follows the tag it runs; `patch` and `minor` move to a
//! newer version tag of the running tag's line. A version tag is
//! `[v]MAJOR.MINOR.PATCH[-variant]`; its line keeps the prefix, the
//! variant (`-alpine`) and the major version (and, for `patch`, the minor).

use std::cmp::Ordering;
use std::collections::BTreeMap;

pub use drydock_proto::approval::UPDATE_LABEL;

/// What a container's label asks to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    Digest,
    Patch,
    Minor,
    None,
}

impl Follow {
    /// The container's label; an absent or unknown value follows the tag.
    pub fn of(labels: &BTreeMap<String, String>) -> Follow {
        match labels.get(UPDATE_LABEL).map(String::as_str) {
            Some("patch") => Follow::Patch,
            Some("minor") => Follow::Minor,
            Some("none") => Follow::None,
            _ => Follow::Digest,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Follow::Digest => "digest",
            Follow::Patch => "patch",
            Follow::Minor => "minor",
            Follow::None => "none",
        }
    }
}

/// A version tag taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version<'a> {
    prefix: &'a str,
    numbers: [u64; 3],
    variant: &'a str,
}

fn parse(tag: &str) -> Option<Version<'_>> {
    let (prefix, rest) = match tag.strip_prefix('v') {
        Some(r) => ("v", r),
        None => ("", tag),
    };
    let (core, variant) = match rest.find('-') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let mut parts = core.split('.');
    let mut numbers = [0u64; 3];
    for n in &mut numbers {
        let part = parts.next()?;
        // `01` is not a version number.
        if part.is_empty()
            || part.len() > 9
            || !part.bytes().all(|b| b.is_ascii_digit())
            || (part.len() > 1 && part.starts_with('0'))
        {
            return None;
        }
        *n = part.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Version {
        prefix,
        numbers,
        variant,
    })
}

/// `candidate` is newer than `current` and of its line under `follow`.
pub fn newer_in_line(current: &str, candidate: &str, follow: Follow) -> bool {
    let (Some(c), Some(n)) = (parse(current), parse(candidate)) else {
        return false;
    };
    let same = match follow {
        Follow::Patch => c.numbers[..2] == n.numbers[..2],
        Follow::Minor => c.numbers[0] == n.numbers[0],
        Follow::Digest | Follow::None => return false,
    };
    same && c.prefix == n.prefix
        && c.variant == n.variant
        && n.numbers.cmp(&c.numbers) == Ordering::Greater
}

/// The newest of `tags` newer than `current` in its line, if any.
pub fn newest<'a>(current: &str, tags: &'a [String], follow: Follow) -> Option<&'a str> {
    tags.iter()
        .filter(|t| newer_in_line(current, t, follow))
        .max_by_key(|t| parse(t).map(|v| v.numbers))
        .map(String::as_str)
}

/// Whether a container's running tag has a line to follow under `follow`.
pub fn has_line(current: &str, follow: Follow) -> bool {
    matches!(follow, Follow::Patch | Follow::Minor) && parse(current).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_keeps_its_prefix_variant_and_major() {
        let tags: Vec<String> = [
            "1.4.2",
            "1.4.3",
            "1.4.10",
            "1.5.0",
            "1.5.1-alpine",
            "2.0.0",
            "v1.4.9",
            "1.4.11-rc1",
            "1.4",
            "latest",
            "1.04.12",
            "1.4.12.1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(newest("1.4.2", &tags, Follow::Patch), Some("1.4.10"));
        assert_eq!(newest("1.4.2", &tags, Follow::Minor), Some("1.5.0"));
        assert_eq!(newest("1.4.2", &tags, Follow::Digest), None);
        assert_eq!(
            newest("1.5.0-alpine", &tags, Follow::Patch),
            Some("1.5.1-alpine")
        );
        assert_eq!(newest("v1.4.2", &tags, Follow::Minor), Some("v1.4.9"));
        assert_eq!(
            newest("1.4.10", &tags, Follow::Patch),
            None,
            "the newest already"
        );
        assert_eq!(newest("latest", &tags, Follow::Minor), None);
        assert!(!newer_in_line("1.4.2", "1.4.1", Follow::Patch));
        assert!(!newer_in_line("1.4.2", "2.0.0", Follow::Minor));
        assert!(newer_in_line("1.4.2", "1.9.0", Follow::Minor));
        assert!(!newer_in_line("1.4.2", "1.9.0", Follow::Patch));
        assert!(has_line("1.4.2", Follow::Patch) && !has_line("stable", Follow::Patch));
    }

    #[test]
    fn the_label_chooses_and_anything_else_follows_the_tag() {
        let labels = |v: &str| BTreeMap::from([(UPDATE_LABEL.to_string(), v.to_string())]);
        assert_eq!(Follow::of(&labels("patch")), Follow::Patch);
        assert_eq!(Follow::of(&labels("minor")), Follow::Minor);
        assert_eq!(Follow::of(&labels("none")), Follow::None);
        assert_eq!(Follow::of(&labels("major")), Follow::Digest);
        assert_eq!(Follow::of(&BTreeMap::new()), Follow::Digest);
    }
}
