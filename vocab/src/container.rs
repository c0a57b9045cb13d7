//! What the executor reports, as the agent records it in evidence: the
//! views of its read RPCs (`pb::` types stop at the agent's gRPC client and
//! become these), and one container event as the agent's journal keeps it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::WriteAction;
use drydock_proto::docker::{ContainerState, EventAction, HealthStatus};

/// One engine event of a visible container, as the executor streams it
/// (`WatchEvents`, `ContainerEvents`) and the agent's journal keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct ContainerEvent {
    pub time_nanos: i64,
    pub container_id: String,
    pub name: String,
    /// A container's: create, start, die, oom, kill, health_status,
    /// restart, rename, destroy or stop. Its image's: image_pull,
    /// image_tag, image_untag, image_delete. A Swarm service's or node's
    /// (whose id `container_id` then holds): service_create,
    /// service_update, service_remove, node_create, node_update,
    /// node_remove.
    pub action: EventAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signal: String,
    /// A `health_status` event's verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthStatus>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub project: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service: String,
    /// The host whose engine it happened on (several executors only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ContainerSummaryView {
    pub id: String,
    pub name: String,
    pub image: String,
    pub state: ContainerState,
    /// `docker ps`'s words (`Up 5 minutes (unhealthy)`).
    pub status: String,
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub public_ports: Vec<u32>,
    #[serde(default)]
    pub ip_addresses: Vec<String>,
    /// The host whose executor listed it (several executors only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct HealthProbeView {
    pub exit_code: i64,
    pub output: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct HealthcheckView {
    pub test: Vec<String>,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    pub retries: u32,
    pub start_period_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ContainerView {
    pub id: String,
    pub name: String,
    pub image: String,
    pub status: ContainerState,
    pub running: bool,
    pub restarting: bool,
    pub oom_killed: bool,
    pub exit_code: i64,
    pub error: String,
    pub started_at: String,
    pub finished_at: String,
    /// `none`, `starting`, `healthy`, `unhealthy`.
    pub health_status: HealthStatus,
    pub failing_streak: u32,
    pub health_log: Vec<HealthProbeView>,
    pub healthcheck: Option<HealthcheckView>,
    pub labels: BTreeMap<String, String>,
    pub env: Vec<String>,
    pub restart_count: i64,
    pub restart_policy: String,
    pub networks: Vec<String>,
    pub aliases: Vec<String>,
    pub redactions: u32,
    /// 0 when unlimited.
    #[serde(default)]
    pub memory_limit_bytes: i64,
    /// The container's StopTimeout; 0 when it sets none (10 s then).
    #[serde(default)]
    pub stop_timeout_secs: u32,
    #[serde(default)]
    pub requested_host_ports: Vec<u32>,
    #[serde(default)]
    pub ip_addresses: Vec<String>,
    #[serde(default)]
    pub mounts: Vec<MountView>,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub command: Vec<String>,
    /// "" is the image's default user (usually root).
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub working_dir: String,
    /// The image by content, `sha256:…`.
    #[serde(default)]
    pub image_id: String,
    /// `container:<id>` when it shares another container's network
    /// (compose `network_mode: service:X`).
    #[serde(default)]
    pub network_mode: String,
    /// The engine no longer has the image it was created from (asked only
    /// when it is not running).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub image_missing: bool,
    /// When the container was created (RFC 3339, as the engine says).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub created: String,
    /// Each environment variable's name with a keyed hash of its value
    /// (the executor's key): a changed value shows, the value never does.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_hashes: BTreeMap<String, String>,
    /// Its root filesystem is read-only (`--read-only`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only_rootfs: bool,
    /// `on-failure:N`'s N; 0 when unbounded or another policy.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restart_max_retries: i64,
}

impl ContainerView {
    /// Who the container's process runs as, in words.
    pub fn run_as(&self) -> String {
        if self.user.is_empty() {
            "the image's default user (usually root)".into()
        } else {
            format!("user `{}`", self.user)
        }
    }

    /// Its mounts, in words: where each comes from and whether it is
    /// writable.
    pub fn mounts_said(&self) -> String {
        if self.mounts.is_empty() {
            return "; it has no mounts".into();
        }
        let list: Vec<String> = self
            .mounts
            .iter()
            .take(8)
            .map(|m| {
                format!(
                    "{} ({} {}, {})",
                    m.destination,
                    m.kind,
                    m.source,
                    if m.rw { "read-write" } else { "read-only" }
                )
            })
            .collect();
        format!("; its mounts: {}", list.join(", "))
    }
}

impl ContainerSummaryView {
    /// Broken as `docker ps` shows it: not running, or unhealthy.
    pub fn is_broken(&self) -> bool {
        self.state != ContainerState::Running || self.health() == HealthStatus::Unhealthy
    }

    /// Its health as `docker ps` shows it (`Up 5 minutes (unhealthy)`),
    /// `None` without a healthcheck: the one reader of those words.
    pub fn health(&self) -> HealthStatus {
        let status = self.status.as_str();
        if status.contains("(unhealthy)") {
            HealthStatus::Unhealthy
        } else if status.contains("(healthy)") {
            HealthStatus::Healthy
        } else if status.contains("(health: starting)") {
            HealthStatus::Starting
        } else {
            HealthStatus::None
        }
    }

    /// Restarting, as the list says it (the state, or a status that
    /// starts `Restarting`).
    pub fn restarting(&self) -> bool {
        self.state == ContainerState::Restarting || self.status.starts_with("Restarting")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct MountView {
    /// bind, volume, tmpfs…
    #[serde(rename = "type")]
    pub kind: String,
    pub source: String,
    pub destination: String,
    pub rw: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct LogLineView {
    pub stream: String,
    pub text: String,
    /// When the engine received the line, in unix nanoseconds; 0 when it
    /// gave no time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub time_unix_nanos: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// What the target logged before a death the engine recorded, when that
/// death is not the state it is in now (it was started again since, or a
/// question asked about an earlier one): evidence `death_logs`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct DeathLogs {
    /// The `die` event's time, in unix nanoseconds.
    pub died_at_unix_nanos: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Its lines up to that moment (none of the run after it).
    pub logs: LogsView,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct LogsView {
    pub lines: Vec<LogLineView>,
    pub truncated: bool,
    pub redactions: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct PolicyView {
    /// Each write action: whether the executor enables it, and its tier.
    /// On the wire (and in stored evidence) as `<action>_enabled` and a
    /// `tiers` map, as it always was.
    #[serde(flatten)]
    pub actions: ActionsView,
    pub approver_ids: Vec<String>,
    #[serde(default)]
    pub logs_max_lines: u32,
    /// Services the executor has an HTTP check for.
    #[serde(default)]
    pub http_checks: Vec<String>,
    /// Trusted approvers' public keys (`ed25519:<base64>`), by id.
    #[serde(default)]
    pub approvers: Vec<ApproverView>,
    /// Name selectors of the executor's target scope (`*` is everything).
    #[serde(default)]
    pub allow_names: Vec<String>,
    /// Whether the executor accepts automation grants.
    #[serde(default)]
    pub automation_enabled: bool,
    /// Grant ids on the executor's revocation list.
    #[serde(default)]
    pub revoked_grants: Vec<String>,
    /// The longest grant the executor accepts.
    #[serde(default)]
    pub max_grant_ttl_secs: u64,
    /// Whether any Swarm service is in the executor's scope.
    #[serde(default)]
    pub services_in_scope: bool,
    /// Name selectors of the executor's Swarm service scope.
    #[serde(default)]
    pub allow_service_names: Vec<String>,
    /// The executor's host name (empty without one): the approvals and
    /// grants made for it name it.
    #[serde(default)]
    pub host: String,
    /// Whether the executor refuses approvals and grants naming no host.
    #[serde(default)]
    pub host_required: bool,
    /// The actions that need more than one approver there
    /// (`approvals.required`), with how many.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approvers_required: BTreeMap<WriteAction, u32>,
    /// Whether a grant may update there (`actions.update.grants`).
    #[serde(default)]
    pub update_grants: bool,
    /// The executor host's offset from UTC when asked, in seconds: a
    /// grant's hours are its local time.
    #[serde(default)]
    pub utc_offset_secs: i32,
}

impl PolicyView {
    /// The minutes after midnight on the executor's host at `now` (unix
    /// seconds), as its offset was when asked.
    pub fn local_minute(&self, now: i64) -> u16 {
        let local = now.saturating_add(i64::from(self.utc_offset_secs));
        u16::try_from(local.rem_euclid(86_400) / 60).unwrap_or(0)
    }
}

/// How disruptive a call is, as the executor ranks it: `T0` reads, `T1`
/// changes (start, restart, force update), `T2` disruptive writes (stop,
/// rollbacks). Written as its label (`T1`), the way a plan step's `risk`
/// always was.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Tier {
    #[serde(rename = "T0")]
    Read,
    #[serde(rename = "T1")]
    Change,
    #[serde(rename = "T2")]
    Disruptive,
}

impl Tier {
    /// The executor's number for it (`GetPolicy`'s `tier`).
    pub const fn number(self) -> u32 {
        match self {
            Tier::Read => 0,
            Tier::Change => 1,
            Tier::Disruptive => 2,
        }
    }

    /// A number the executor reported; anything above is disruptive.
    pub const fn from_number(n: u32) -> Tier {
        match n {
            0 => Tier::Read,
            1 => Tier::Change,
            _ => Tier::Disruptive,
        }
    }

    pub const fn label(self) -> &'static str {
        match self {
            Tier::Read => "T0",
            Tier::Change => "T1",
            Tier::Disruptive => "T2",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// One write action as the executor's policy has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionPolicy {
    pub enabled: bool,
    pub tier: Tier,
}

/// The executor's policy for each write action. An action it did not
/// report is disabled and ranked disruptive.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ActionsView(BTreeMap<WriteAction, ActionPolicy>);

impl ActionsView {
    pub fn new(actions: impl IntoIterator<Item = (WriteAction, ActionPolicy)>) -> ActionsView {
        ActionsView(actions.into_iter().collect())
    }

    /// These actions enabled, at the tiers drydock's executor gives them;
    /// the rest reported disabled.
    pub fn enabling(enabled: &[WriteAction]) -> ActionsView {
        ActionsView::new(WriteAction::ALL.map(|a| {
            (
                a,
                ActionPolicy {
                    enabled: enabled.contains(&a),
                    tier: default_tier(a),
                },
            )
        }))
    }

    pub fn get(&self, action: WriteAction) -> ActionPolicy {
        self.0.get(&action).copied().unwrap_or(ActionPolicy {
            enabled: false,
            tier: Tier::Disruptive,
        })
    }

    pub fn enabled(&self, action: WriteAction) -> bool {
        self.get(action).enabled
    }

    pub fn tier(&self, action: WriteAction) -> Tier {
        self.get(action).tier
    }

    /// Enable or disable one action, keeping its tier (or giving it the
    /// one drydock's executor gives it).
    pub fn set_enabled(&mut self, action: WriteAction, enabled: bool) {
        let tier = self.0.get(&action).map_or(default_tier(action), |p| p.tier);
        self.0.insert(action, ActionPolicy { enabled, tier });
    }
}

/// The tier drydock's executor gives each action.
pub const fn default_tier(action: WriteAction) -> Tier {
    match action {
        WriteAction::Start | WriteAction::Restart | WriteAction::ForceUpdate => Tier::Change,
        WriteAction::Stop
        | WriteAction::Rollback
        | WriteAction::ServiceRollback
        | WriteAction::Update
        | WriteAction::ServiceUpdate
        | WriteAction::Build => Tier::Disruptive,
    }
}

/// The wire keys: `start_enabled`, ..., and `tiers: {"start": 1, ...}`.
impl Serialize for ActionsView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(None)?;
        for action in WriteAction::ALL {
            map.serialize_entry(&format!("{action}_enabled"), &self.enabled(action))?;
        }
        let tiers: BTreeMap<&str, u32> = self
            .0
            .iter()
            .map(|(a, p)| (a.as_str(), p.tier.number()))
            .collect();
        map.serialize_entry("tiers", &tiers)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for ActionsView {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ActionsView, D::Error> {
        let fields: BTreeMap<String, serde_json::Value> = BTreeMap::deserialize(d)?;
        let tiers: BTreeMap<String, u32> = fields
            .get("tiers")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(serde::de::Error::custom)?
            .unwrap_or_default();
        let mut out = BTreeMap::new();
        for action in WriteAction::ALL {
            let enabled = fields
                .get(&format!("{action}_enabled"))
                .and_then(serde_json::Value::as_bool);
            let tier = tiers.get(action.as_str()).copied().map(Tier::from_number);
            if enabled.is_some() || tier.is_some() {
                out.insert(
                    action,
                    ActionPolicy {
                        enabled: enabled.unwrap_or(false),
                        tier: tier.unwrap_or(Tier::Disruptive),
                    },
                );
            }
        }
        Ok(ActionsView(out))
    }
}

impl schemars::JsonSchema for ActionsView {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ActionsView".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut properties = serde_json::Map::new();
        for action in WriteAction::ALL {
            properties.insert(
                format!("{action}_enabled"),
                serde_json::json!({"type": "boolean", "description": format!("Whether the executor enables `{action}`.")}),
            );
        }
        properties.insert(
            "tiers".into(),
            serde_json::json!({
                "type": "object",
                "description": "The executor's risk tier per action (`start` → 1, `stop` → 2).",
                "additionalProperties": {"type": "integer", "minimum": 0},
            }),
        );
        schemars::json_schema!({"type": "object", "properties": properties})
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ApproverView {
    pub id: String,
    pub public_key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct StatsView {
    pub cpu_percent: f64,
    pub memory_usage_bytes: u64,
    pub memory_limit_bytes: u64,
    pub memory_percent: f64,
    pub network_rx_bytes: u64,
    pub network_tx_bytes: u64,
    pub block_read_bytes: u64,
    pub block_write_bytes: u64,
    pub pids: u64,
}

/// Where one container's disk goes, and what the engine holds that belongs
/// to no container (`DiskUsage`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct DiskUsageView {
    pub container_id: String,
    /// -1: the engine did not say.
    pub writable_layer_bytes: i64,
    pub root_fs_bytes: i64,
    pub mounts: Vec<MountUsageView>,
    pub log_driver: String,
    /// Empty: no max-size (json-file and local then grow without bound).
    pub log_max_size: String,
    pub engine: Option<EngineDiskView>,
    pub engine_error: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct MountUsageView {
    #[serde(rename = "type")]
    pub kind: String,
    pub source: String,
    pub destination: String,
    /// -1: the engine does not measure it.
    pub used_bytes: i64,
    /// A tmpfs's size limit; -1: none known.
    pub limit_bytes: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct EngineDiskView {
    pub images_bytes: i64,
    pub build_cache_bytes: i64,
    /// Images no container uses and build cache not in use.
    pub reclaimable_bytes: i64,
    pub images: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct HttpCheckView {
    pub service: String,
    pub ok: bool,
    pub status_code: u32,
    pub latency_ms: u64,
    pub error: String,
    pub body_snippet: String,
}

pub const COMPOSE_SERVICE_LABEL: &str = "com.docker.compose.service";
pub use drydock_proto::grant::COMPOSE_PROJECT_LABEL;

/// A container's tag and what its registry names by it now
/// (`RegistryDigest`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct RegistryView {
    pub container_id: String,
    /// The reference the container runs (`registry/repo:tag`).
    pub reference: String,
    /// The manifest digest the registry names by that tag now.
    pub registry_digest: String,
    /// The image the container runs, and its manifest digests.
    pub image_id: String,
    #[serde(default)]
    pub running_digests: Vec<String>,
    /// The running image's OCI labels.
    #[serde(default)]
    pub oci_labels: BTreeMap<String, String>,
    /// The registry's digest is none of the running image's.
    pub update_available: bool,
    /// With an update available: the new image's OCI labels, read from
    /// its config in the registry, or why they could not be read.
    #[serde(default)]
    pub new_oci_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub new_labels_unread: String,
    /// For a container labelled `drydock.update=patch` or `minor`: the
    /// newest newer tag of its line (`registry_digest` is that tag's);
    /// empty when the tag it runs is followed. `tags_unread`: why the
    /// repository's tags could not be listed, if so.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub new_tag: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tags_unread: String,
}

impl RegistryView {
    /// The running image's `org.opencontainers.image.version`, if any.
    pub fn version(&self) -> Option<&str> {
        self.oci_labels.get(OCI_VERSION).map(String::as_str)
    }

    /// The running image's revision label, if any.
    pub fn revision(&self) -> Option<&str> {
        self.oci_labels.get(OCI_REVISION).map(String::as_str)
    }

    /// The newer tag an update moves to, when not the tag it runs.
    pub fn to_tag(&self) -> Option<&str> {
        Some(self.new_tag.as_str()).filter(|t| !t.is_empty())
    }

    /// The new image's version label, if read.
    pub fn new_version(&self) -> Option<&str> {
        self.new_oci_labels.get(OCI_VERSION).map(String::as_str)
    }

    /// The new image's revision label, if read.
    pub fn new_revision(&self) -> Option<&str> {
        self.new_oci_labels.get(OCI_REVISION).map(String::as_str)
    }
}

/// An image as `InspectImage` says it (named by content id only).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ImageView {
    pub present: bool,
    pub id: String,
    /// Only the names a visible container uses.
    #[serde(default)]
    pub repo_tags: Vec<String>,
    #[serde(default)]
    pub created: String,
    /// `org.opencontainers.image.{revision,source,created,version}`.
    #[serde(default)]
    pub oci_labels: BTreeMap<String, String>,
}

/// The OCI label naming an image's version.
pub const OCI_VERSION: &str = "org.opencontainers.image.version";
/// The OCI label naming the commit an image was built from.
pub const OCI_REVISION: &str = "org.opencontainers.image.revision";
/// The OCI label naming where the image's source lives.
pub const OCI_SOURCE: &str = "org.opencontainers.image.source";
/// The compose label that changes when a service's definition does.
pub const COMPOSE_CONFIG_HASH_LABEL: &str = "com.docker.compose.config-hash";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_comes_from_the_status_text() {
        for (status, want) in [
            ("Up 5 minutes (unhealthy)", "unhealthy"),
            ("Up 2 seconds (healthy)", "healthy"),
            ("Up 1 second (health: starting)", "starting"),
            ("Up 3 hours", "none"),
            ("Exited (137) 2 minutes ago", "none"),
        ] {
            let c = ContainerSummaryView {
                status: status.into(),
                ..Default::default()
            };
            assert_eq!(c.health().as_str(), want, "{status}");
        }
    }
}
