//! Updates found: containers whose tag names a newer image in its
//! registry than the one they run (`GET /api/v1/updates`).

use serde::{Deserialize, Serialize};

/// One container with an update available.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct UpdateFound {
    /// The host it is on (`local` for a lone unnamed executor).
    pub host: String,
    pub container: String,
    pub container_id: String,
    /// The tag it runs (`registry/repo:tag`).
    pub reference: String,
    /// The image it runs, and that image's version and revision labels.
    pub image_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The manifest digest the registry names by the tag now, and that
    /// image's version and revision labels, read from its config in the
    /// registry before any pull.
    pub registry_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_revision: Option<String>,
    /// Why the new image's labels could not be read (a registry the
    /// executor cannot reach itself, a TLS root it lacks), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels_unread: Option<String>,
    /// The newer tag of its line it would move to (`drydock.update=patch`
    /// or `minor`); absent: the tag it runs moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_tag: Option<String>,
    /// Its compose service (`project/service`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// When this digest was first seen (RFC 3339), and last checked.
    pub found_at: String,
    pub checked_at: String,
}

impl UpdateFound {
    /// How a command names the container: `NAME`, or `NAME@HOST` on a
    /// named host.
    pub fn command_name(&self) -> String {
        if self.host == "local" {
            self.container.clone()
        } else {
            format!("{}@{}", self.container, self.host)
        }
    }
}

/// A container the last check could not ask about, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct NotChecked {
    pub host: String,
    pub container: String,
    pub why: String,
}

/// What `GET /api/v1/updates` answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct UpdateList {
    pub updates: Vec<UpdateFound>,
    /// When the containers were last checked (none: never since start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<String>,
    /// Containers of an allowed registry the last check could not ask
    /// about (a registry that did not answer, an executor down).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_checked: Vec<NotChecked>,
}

pub use drydock_proto::approval::UPDATE_LABEL;
