//! The agent API's answers other than a request itself: pending approvals,
//! containers at a glance, grants, and the executor's reachability.

use serde::{Deserialize, Serialize};

use crate::container::PolicyView;
use crate::request::{ApprovalRecord, PlanStep, Status};
use crate::FaultClass;

pub use drydock_proto::grant::GrantClaims;

/// One entry of `GET /api/v1/approvals`: a pending approval (without its
/// signature) and what it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingApproval {
    pub approval: ApprovalRecord,
    pub request_id: String,
    pub message: String,
    #[serde(default)]
    pub step: Option<PlanStep>,
}

/// One container of `GET /api/v1/containers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContainerRow {
    /// From the newest inspect drydock made of it: Docker's list has no
    /// restart count.
    pub restarts: Option<Restarts>,
    pub id: String,
    pub name: String,
    pub image: String,
    pub state: drydock_proto::docker::ContainerState,
    pub status: String,
    /// `healthy`, `unhealthy`, `starting` or `none`, from Docker's status.
    pub health: drydock_proto::docker::HealthStatus,
    pub project: Option<String>,
    pub service: Option<String>,
    pub last_request: Option<LastRequest>,
    /// The host it is on (several hosts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Restarts {
    pub count: i64,
    pub as_of: String,
}

/// The newest request that targeted a container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LastRequest {
    pub id: String,
    pub status: Status,
    pub created_at: String,
    pub class: Option<FaultClass>,
    pub summary: Option<String>,
}

/// `GET /api/v1/containers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContainerList {
    pub containers: Vec<ContainerRow>,
    /// Hosts whose executor did not answer, so their containers are
    /// missing from the list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreachable: Vec<HostDown>,
}

/// A host that could not be asked, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostDown {
    pub host: String,
    pub error: String,
}

/// A grant as the agent keeps it, decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrantRecord {
    pub id: String,
    pub key_id: String,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
    pub claims: GrantClaims,
}

/// Whether a grant can still authorise anything (by the agent's record and
/// the executor's revocation list, which is what counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrantStatus {
    Active,
    Expired,
    Revoked,
}

impl GrantStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            GrantStatus::Active => "active",
            GrantStatus::Expired => "expired",
            GrantStatus::Revoked => "revoked",
        }
    }
}

/// One grant with its status: an entry of `GET /api/v1/grants`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrantRow {
    pub grant: GrantRecord,
    pub status: GrantStatus,
}

/// The answer to `POST /api/v1/grants`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrantAdded {
    pub grant: GrantRecord,
    pub status: GrantStatus,
    /// Set when the executor has automation off: the grant authorises
    /// nothing until its operator turns it on.
    pub warning: Option<String>,
}

/// `GET /api/v1/grants`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrantList {
    pub grants: Vec<GrantRow>,
    /// `None` when the executor could not be asked.
    pub executor_automation_enabled: Option<bool>,
}

/// `GET /api/v1/executor`, when the executor answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExecutorReach {
    pub reachable: bool,
    pub latency_ms: u64,
    pub policy: PolicyView,
    /// With several hosts (`hosts:`), the host this answer is about, and
    /// every host as the agent last reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostView>,
}

/// One Docker host's executor, as the agent last reached it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostView {
    pub name: String,
    pub endpoint: String,
    /// `false` until the first answer, and while calls fail.
    pub reachable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// Why the last call failed, while it is down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it was last asked, and since when it has been down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_since: Option<String>,
}

/// `POST /api/v1/requests/{id}/followups`: where the follow-up landed. Its
/// event's `seq` is where to follow the request's events from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FollowUpAdded {
    pub seq: i64,
    pub round: u32,
    /// Whether it reopened a finished request as a new round.
    pub reopened: bool,
    pub request: crate::request::Request,
}

/// An operator's note on a container or a service (`drydock note add`):
/// shown with every diagnosis of that target as evidence, and given to a
/// model as context, never as instructions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Note {
    pub id: String,
    /// A container's name, a compose `project/service`, or a Swarm
    /// service's name.
    pub target: String,
    pub text: String,
    pub created_at: String,
}

/// `GET /api/v1/notes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NoteList {
    pub notes: Vec<Note>,
}

/// The longest message a person asks with (a request's, a follow-up's, a
/// schedule's), in bytes.
pub const MAX_MESSAGE_LEN: usize = 2000;

/// The shortest cadence of a schedule: each run is a whole diagnosis,
/// with the executor's reads and rate limits.
pub const MIN_SCHEDULE_SECS: u64 = 10;
/// The longest cadence of a schedule, 30 days.
pub const MAX_SCHEDULE_SECS: u64 = 30 * 24 * 3600;

/// What a schedule's last run found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing wrong was found.
    Healthy,
    /// A fault was named.
    Broken,
}

impl Verdict {
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::Broken => "broken",
        }
    }

    pub fn parse(s: &str) -> Option<Verdict> {
        [Verdict::Healthy, Verdict::Broken]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// A schedule (`drydock schedule add --every 1h "is the shop healthy?"`):
/// a diagnose-only request every `every_secs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Schedule {
    pub id: String,
    pub message: String,
    pub every_secs: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub created_at: String,
    /// When it last ran (unix seconds), the request it opened, and what
    /// that request found (absent until one has, or when it could not
    /// tell: the target was unclear, or a read failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_unix: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verdict: Option<Verdict>,
}

/// `GET /api/v1/schedules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScheduleList {
    pub schedules: Vec<Schedule>,
}
