//! A build a person asks for, and the source the executor reads for it.

use serde::{Deserialize, Serialize};

/// `drydock build NAME [--at REV]`, "rebuild the api at 9c2d1e0": build
/// the target's image from its build context and deploy it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildOptions {
    /// A commit id (7 hex digits or more), a branch or a tag of the
    /// context's checkout; empty: its HEAD.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub at: String,
}

/// A container's build context and the commit a revision names in it, as
/// a build's approval binds it (`BuildSource`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct BuildSourceView {
    pub container_id: String,
    /// The context's name in the executor's `build.contexts`.
    pub context: String,
    /// The commit (a full id) and its tree.
    pub commit: String,
    pub tree: String,
    pub dockerfile: String,
    /// The tag a build of it gets: `drydock/<context>:<short commit>`.
    pub tag: String,
    pub subject: String,
    pub author: String,
    pub date: String,
    /// The checkout's HEAD, and whether its tracked files differ from it.
    pub head: String,
    pub dirty: bool,
    /// The image a build of this commit made, when it is on the engine.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub built_image_id: String,
    /// The commit the running image was built from, when the checkout has
    /// it, and the files changed from it to `commit`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub running_revision: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_files: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub changed_files_more: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl BuildSourceView {
    /// The commit's first 12 digits.
    pub fn short(&self) -> &str {
        self.commit.get(..12).unwrap_or(&self.commit)
    }
}
