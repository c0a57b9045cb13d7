//! What a build's approval names: the source by content (a full commit,
//! its tree), the context it comes from and the tag it gets.

use serde::{Deserialize, Serialize};

use super::{is_image_id, ApprovalClaims, ApprovalFormatError, WriteAction};

/// A git commit's full id (40 lowercase hex digits, or 64 in a SHA-256
/// repository), checked when made: a build names its source by content,
/// never by a branch or a tag that can move.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "String", into = "String")]
pub struct CommitId(String);

impl CommitId {
    pub fn parse(id: &str) -> Option<CommitId> {
        is_commit_id(id).then(|| CommitId(id.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 digits, as a build's tag names it.
    pub fn short(&self) -> &str {
        &self.0[..12]
    }
}

impl TryFrom<String> for CommitId {
    type Error = String;
    fn try_from(id: String) -> Result<CommitId, String> {
        CommitId::parse(&id).ok_or_else(|| {
            format!(
                "`{}` is not a full commit id (40 or 64 lowercase hex digits)",
                id.chars().take(80).collect::<String>()
            )
        })
    }
}

impl From<CommitId> for String {
    fn from(id: CommitId) -> String {
        id.0
    }
}

impl std::fmt::Display for CommitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// 40 or 64 lowercase hex digits: a git object's full id.
pub fn is_commit_id(id: &str) -> bool {
    (id.len() == 40 || id.len() == 64)
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A revision as a person names one: a commit id, a branch or a tag, of
/// letters, digits, `.`, `_`, `-` and `/` (never an option, a range or a
/// reflog expression).
pub fn is_revision(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 128
        && !r.starts_with(['-', '.', '/'])
        && !r.contains("..")
        && !r.ends_with(['/', '.'])
        && r.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
}

/// A build context's name in executor.yaml, which its images' repository
/// carries: 1 to 63 lowercase letters, digits, `-`, `_` and `.`, starting
/// with a letter or digit.
pub fn is_context_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_' || b == b'.'
        })
}

/// The tag the executor gives what it builds from `commit` of `context`:
/// a repository of drydock's own, so a build never moves a tag someone
/// else uses.
pub fn build_tag(context: &str, commit: &CommitId) -> String {
    format!("drydock/{context}:{}", commit.short())
}

/// What a build's approval binds, and an update to a built image's: the
/// source, by content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BuildClaims {
    /// The build context's name in executor.yaml (`build.contexts`).
    pub context: String,
    /// The commit built: a full id.
    pub commit: CommitId,
    /// The commit's tree id: what the build reads, by content.
    pub tree: String,
    /// The Dockerfile's path in the tree.
    pub dockerfile: String,
    /// The tag the image gets (`build_tag`).
    pub tag: String,
    /// Shown to the human: the commit's subject and author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

impl BuildClaims {
    fn check(&self) -> Result<(), String> {
        if !is_context_name(&self.context) {
            return Err(
                "a build's context is 1 to 63 lowercase letters, digits, `-`, `_` and `.`".into(),
            );
        }
        let commit = &self.commit;
        if !is_commit_id(&self.tree) {
            return Err("a build's tree is a full tree id (40 or 64 lowercase hex digits)".into());
        }
        if self.dockerfile.is_empty()
            || self.dockerfile.len() > 255
            || self.dockerfile.starts_with('/')
            || self
                .dockerfile
                .split('/')
                .any(|p| p == ".." || p.is_empty())
        {
            return Err("a build's dockerfile is a relative path inside the context".into());
        }
        if self.tag != build_tag(&self.context, commit) {
            return Err(format!(
                "a build's tag is {}",
                build_tag(&self.context, commit)
            ));
        }
        Ok(())
    }
}

impl ApprovalClaims {
    /// A build names its source and nothing else; an update names either
    /// a registry's tag and digest (`update`) or a built source (`build`),
    /// with the image the container runs now; no other action names a
    /// build.
    pub(super) fn check_build(&self) -> Result<(), ApprovalFormatError> {
        let malformed = |m: String| Err(ApprovalFormatError::Malformed(m));
        let Some(build) = &self.build else {
            return match self.action {
                WriteAction::Build => malformed("a build names its context and commit".into()),
                _ => Ok(()),
            };
        };
        build.check().map_err(ApprovalFormatError::Malformed)?;
        match self.action {
            WriteAction::Build => match (
                &self.image_id,
                &self.from_image_id,
                &self.update,
                &self.service,
            ) {
                (None, None, None, None) => Ok(()),
                _ => malformed(
                    "a build names no image_id, from_image_id, update or service".into(),
                ),
            },
            WriteAction::Update => match (&self.image_id, &self.from_image_id, &self.update) {
                (None, Some(from), None) if is_image_id(from) => Ok(()),
                _ => malformed(
                    "an update to a built image names from_image_id (sha256: and 64 hex digits), and no image_id or update"
                        .into(),
                ),
            },
            other => malformed(format!("a {other} names no build")),
        }
    }
}
