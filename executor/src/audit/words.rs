//! The words a row records as its decision and its status code. They are
//! stored, exported and hashed as text (`as_str`), and those texts never
//! change: every stored hash covers them.

use serde::Serialize;

/// What the executor decided on a call, or what a row of its own records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call was answered.
    Allowed,
    /// Refused by drydock's own rules: identity, input, policy, approval,
    /// grant, limits.
    Denied,
    /// Failed: Docker, the store, a deadline. Also what a row says until
    /// its outcome is set.
    #[default]
    Error,
    /// A write about to be sent to Docker, its approval or grant use spent.
    Intent,
    /// Closes an intent whose outcome the executor never saw.
    Unknown,
    /// The first row of a new store.
    Init,
    /// A signed checkpoint of the chain's head.
    Checkpoint,
    /// The live store starting again after its prefix moved to a segment.
    Rotated,
    /// A segment deleted by retention.
    Retention,
    /// The store restored from a backup.
    Restored,
}

impl Decision {
    pub const ALL: [Decision; 10] = [
        Decision::Allowed,
        Decision::Denied,
        Decision::Error,
        Decision::Intent,
        Decision::Unknown,
        Decision::Init,
        Decision::Checkpoint,
        Decision::Rotated,
        Decision::Retention,
        Decision::Restored,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::Error => "error",
            Decision::Intent => "intent",
            Decision::Unknown => "unknown",
            Decision::Init => "init",
            Decision::Checkpoint => "checkpoint",
            Decision::Rotated => "rotated",
            Decision::Retention => "retention",
            Decision::Restored => "restored",
        }
    }

    pub fn parse(s: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The gRPC status a call was answered with; `None` for an intent and the
/// executor's own rows (stored as the empty text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Code(pub Option<tonic::Code>);

/// Each status's text as the audit has always written it: `OK`, then the
/// codes' names.
const CODES: [(tonic::Code, &str); 17] = [
    (tonic::Code::Ok, "OK"),
    (tonic::Code::Cancelled, "Cancelled"),
    (tonic::Code::Unknown, "Unknown"),
    (tonic::Code::InvalidArgument, "InvalidArgument"),
    (tonic::Code::DeadlineExceeded, "DeadlineExceeded"),
    (tonic::Code::NotFound, "NotFound"),
    (tonic::Code::AlreadyExists, "AlreadyExists"),
    (tonic::Code::PermissionDenied, "PermissionDenied"),
    (tonic::Code::ResourceExhausted, "ResourceExhausted"),
    (tonic::Code::FailedPrecondition, "FailedPrecondition"),
    (tonic::Code::Aborted, "Aborted"),
    (tonic::Code::OutOfRange, "OutOfRange"),
    (tonic::Code::Unimplemented, "Unimplemented"),
    (tonic::Code::Internal, "Internal"),
    (tonic::Code::Unavailable, "Unavailable"),
    (tonic::Code::DataLoss, "DataLoss"),
    (tonic::Code::Unauthenticated, "Unauthenticated"),
];

impl Code {
    pub const NONE: Code = Code(None);

    pub const fn of(code: tonic::Code) -> Code {
        Code(Some(code))
    }

    pub fn as_str(self) -> &'static str {
        match self.0 {
            None => "",
            Some(code) => CODES
                .iter()
                .find(|(c, _)| *c == code)
                .map_or("Unknown", |(_, name)| name),
        }
    }

    pub fn parse(s: &str) -> Option<Code> {
        if s.is_empty() {
            return Some(Code::NONE);
        }
        CODES
            .iter()
            .find(|(_, name)| *name == s)
            .map(|(c, _)| Code::of(*c))
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A word read back from a store that this release does not know: a newer
/// release wrote it.
fn unknown_word(what: &str, text: &str) -> rusqlite::types::FromSqlError {
    rusqlite::types::FromSqlError::Other(
        format!(
            "a row's {what} is `{}`, which this release does not know (a newer drydock-executor wrote it)",
            text.chars().take(40).collect::<String>()
        )
        .into(),
    )
}

impl rusqlite::types::FromSql for Decision {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = v.as_str()?;
        Decision::parse(text).ok_or_else(|| unknown_word("decision", text))
    }
}

impl rusqlite::types::ToSql for Decision {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl rusqlite::types::FromSql for Code {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = v.as_str()?;
        Code::parse(text).ok_or_else(|| unknown_word("status code", text))
    }
}

impl rusqlite::types::ToSql for Code {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_read_back_as_written_and_keep_their_texts() {
        for d in Decision::ALL {
            assert_eq!(Decision::parse(d.as_str()), Some(d));
            assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
        }
        for (code, name) in CODES {
            assert_eq!(Code::parse(name), Some(Code::of(code)));
            assert_eq!(Code::of(code).as_str(), name);
        }
        assert_eq!(Code::parse(""), Some(Code::NONE));
        assert_eq!(Code::parse("Ok"), None, "the success code is written OK");
        assert_eq!(Decision::parse("maybe"), None);
        // The texts stored hashes cover.
        assert_eq!(
            Decision::ALL.map(Decision::as_str).join(" "),
            "allowed denied error intent unknown init checkpoint rotated retention restored"
        );
    }

    /// docs/api.md's `decision` bullet names every decision, each at the
    /// start of a clause (after `: ` or `; `), and no other.
    #[test]
    fn every_decision_is_in_the_api_reference_and_no_other() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md"),
        )
        .unwrap();
        let line = doc
            .lines()
            .find(|l| l.starts_with("- `decision`:"))
            .expect("docs/api.md has the `decision` bullet");
        let documented: Vec<&str> = line
            .split(['`'])
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[0].ends_with(": ") || w[0].ends_with("; "))
            .map(|w| w[1])
            .collect();
        let known: Vec<&str> = Decision::ALL.map(Decision::as_str).to_vec();
        let missing: Vec<&&str> = known.iter().filter(|k| !documented.contains(k)).collect();
        let stale: Vec<&&str> = documented.iter().filter(|d| !known.contains(d)).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "docs/api.md's decisions: missing {missing:?}, no such decision {stale:?}"
        );
    }
}
