//! What a container was, and what changed between two incarnations of one
//! service: the agent's memory of definitions (`Fingerprint`) and the
//! `change` evidence a diagnosis may cite (`Change`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A container's definition as the agent remembers it. Environment values
/// are never kept: only each variable's name and the executor's keyed hash
/// of its value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct Fingerprint {
    pub container_id: String,
    pub name: String,
    /// The image as it was named (`shop/api:latest`).
    pub image: String,
    /// The image by content (`sha256:…`).
    pub image_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// Variable name → keyed hash of its value.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// `type source:destination` (with `:ro` when read-only).
    #[serde(default)]
    pub mounts: Vec<String>,
    /// Host ports it asks to publish.
    #[serde(default)]
    pub ports: Vec<u32>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// When the engine created it, and last started it (RFC 3339).
    #[serde(default)]
    pub created: String,
    #[serde(default)]
    pub started_at: String,
    /// The OCI labels of its image, when the image carries them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// One incarnation of a service, as a change names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct Incarnation {
    pub container_id: String,
    pub name: String,
    pub image: String,
    pub image_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(default)]
    pub created: String,
}

/// `change` evidence: what differs between the failing container and the
/// last incarnation of the same service that ran well, and when.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct Change {
    /// `project/service`, or the container name.
    pub service: String,
    pub previous: Incarnation,
    pub current: Incarnation,
    pub image_changed: bool,
    /// The same image name now means another image (a tag that moved).
    pub tag_moved: bool,
    pub config_hash_changed: bool,
    #[serde(default)]
    pub env_added: Vec<String>,
    #[serde(default)]
    pub env_removed: Vec<String>,
    /// Variables whose value changed (by name; values are never known).
    #[serde(default)]
    pub env_changed: Vec<String>,
    pub command_changed: bool,
    pub entrypoint_changed: bool,
    #[serde(default)]
    pub mounts_added: Vec<String>,
    #[serde(default)]
    pub mounts_removed: Vec<String>,
    #[serde(default)]
    pub ports_added: Vec<u32>,
    #[serde(default)]
    pub ports_removed: Vec<u32>,
    /// How long the previous container ran without a failure, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_ran_secs: Option<i64>,
    /// How soon after the change the new one failed, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_after_secs: Option<i64>,
    /// Whether the previous image is still on the engine (a rollback needs
    /// it); `None` when the executor could not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_image_present: Option<bool>,
    /// The change in words, for a cause and a notification.
    pub said: String,
    /// The drydock request whose write (an update, a rollback) made the
    /// current container, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by: Option<MadeBy>,
}

/// A drydock write that made a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MadeBy {
    pub request_id: String,
    /// `update` or `rollback`.
    pub action: String,
}

impl Change {
    /// Whether the image is what changed (a rollback could undo it).
    pub fn image_rollback_possible(&self) -> bool {
        self.image_changed && self.previous_image_present == Some(true)
    }
}
