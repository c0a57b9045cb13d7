//! The agent's domain: requests, evidence, diagnoses, plans, approvals. These
//! types are also the JSON shape of the REST API (`GET /api/v1/requests/{id}`),
//! which scripts and the CLI rely on; add fields, never rename them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Observing,
    Diagnosing,
    Planning,
    WaitingApproval,
    Executing,
    Verifying,
    Completed,
    Failed,
    NeedsClarification,
    Rejected,
    Canceled,
}

impl Status {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Completed
                | Status::Failed
                | Status::NeedsClarification
                | Status::Rejected
                | Status::Canceled
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Observing => "observing",
            Status::Diagnosing => "diagnosing",
            Status::Planning => "planning",
            Status::WaitingApproval => "waiting_approval",
            Status::Executing => "executing",
            Status::Verifying => "verifying",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::NeedsClarification => "needs_clarification",
            Status::Rejected => "rejected",
            Status::Canceled => "canceled",
        }
    }
}

/// The stable fault vocabulary from DESIGN.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultClass {
    DependencyUnavailable,
    ConfigError,
    PortConflict,
    OomKilled,
    Crash,
    CrashLoop,
    Unhealthy,
    HealthcheckBroken,
    PermissionDenied,
    DiskFull,
    Stopped,
    Healthy,
    Unknown,
}

impl FaultClass {
    /// Faults a restart cannot fix: the plan for them has no write step.
    pub fn restart_cannot_fix(self) -> bool {
        matches!(
            self,
            FaultClass::ConfigError
                | FaultClass::OomKilled
                | FaultClass::PortConflict
                | FaultClass::PermissionDenied
                | FaultClass::DiskFull
                | FaultClass::HealthcheckBroken
                | FaultClass::CrashLoop
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Target {
    /// `container` now; `service` once compose services are targeted whole.
    pub kind: String,
    pub container_id: String,
    pub container_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Candidate {
    pub container_id: String,
    pub container_name: String,
    pub image: String,
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub score: u32,
    pub why: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evidence {
    pub id: String,
    /// `container_list`, `inspect`, `logs`, `health`, `policy`, `verification`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The executor RPC that produced it.
    pub source: String,
    pub timestamp: String,
    pub data: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cause {
    pub class: FaultClass,
    pub reason: String,
    pub confidence: f32,
    pub evidence_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Diagnosis {
    pub summary: String,
    pub confidence: f32,
    pub causes: Vec<Cause>,
    /// `rules` or the model's name.
    pub engine: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlanStep {
    /// An executor action: `start` or `restart`.
    pub action: String,
    pub target: Target,
    pub reason: String,
    /// `T1` (change) for start/restart.
    pub risk: String,
    pub expected_effect: String,
    pub rollback: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Plan {
    /// sha256 over the steps; bound into every approval.
    pub digest: String,
    pub steps: Vec<PlanStep>,
    /// What a human must do; no executor action can.
    pub advice: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Rejected,
    Expired,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApprovalRecord {
    pub id: String,
    pub request_id: String,
    pub step: usize,
    pub status: ApprovalStatus,
    /// base64 of the encoded claims: exactly the bytes the approver signs.
    pub claims: String,
    pub expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// base64 signature, kept (in the store only) until execution; the API
    /// never returns it (see `Request::for_api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// Set when an automation grant, not a person, authorised this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutionRecord {
    pub step: usize,
    pub action: String,
    pub container_id: String,
    pub approval_id: String,
    pub ok: bool,
    pub message: String,
    pub at: String,
    /// The executor's answer was lost (it stopped, or the connection did):
    /// the write may or may not have happened. It is never sent again; the
    /// container's state decides.
    #[serde(default)]
    pub in_doubt: bool,
    /// The automation grant that authorised it, when no person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerificationCheck {
    /// `running`, `healthy`, `http`.
    pub level: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verification {
    pub ok: bool,
    pub checks: Vec<VerificationCheck>,
    pub evidence_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RequestOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(default)]
    pub diagnose_only: bool,
    /// The asker's offset from UTC, in minutes, so a time in a question
    /// ("at 3 am") is read as their clock says; UTC when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc_offset_minutes: Option<i32>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum RequestSource {
    #[default]
    Ask,
    Watch,
    Alert,
}

impl RequestSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestSource::Ask => "ask",
            RequestSource::Watch => "watch",
            RequestSource::Alert => "alert",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Request {
    pub id: String,
    pub message: String,
    /// Who opened it: a person (`ask`), the watcher, or an alert.
    #[serde(default)]
    pub source: RequestSource,
    pub status: Status,
    pub created_at: String,
    pub updated_at: String,
    pub options: RequestOptions,
    pub target: Option<Target>,
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    pub diagnosis: Option<Diagnosis>,
    /// With a model configured: what the rules engine concluded on its own.
    /// Writes on the target are bounded by it whatever the model says, and
    /// the rules planner plans from it when the model's plan is refused.
    #[serde(default)]
    pub rules_diagnosis: Option<Diagnosis>,
    pub plan: Option<Plan>,
    #[serde(default)]
    pub approvals: Vec<ApprovalRecord>,
    #[serde(default)]
    pub execution: Vec<ExecutionRecord>,
    pub verification: Option<Verification>,
    #[serde(default)]
    pub iterations: u32,
    /// Final words for the human: what happened and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tokens the model API reported for this request (absent without a
    /// model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_usage: Option<LlmUsage>,
}

/// Token accounting from the model API's own usage fields, summed over the
/// request's model calls.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct LlmUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub model_calls: u32,
}

impl Request {
    /// The request as the API shows it: signatures stay inside the agent.
    pub fn for_api(mut self) -> Request {
        for a in &mut self.approvals {
            a.signature = None;
        }
        self
    }
}

/// One entry of a request's durable event stream.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub request_id: String,
    pub ts: String,
    pub kind: String,
    pub data: serde_json::Value,
}

// ---- What the executor reports, as the agent sees it. ----

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ContainerSummaryView {
    pub id: String,
    pub name: String,
    pub image: String,
    pub state: String,
    pub status: String,
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub public_ports: Vec<u32>,
    #[serde(default)]
    pub ip_addresses: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HealthProbeView {
    pub exit_code: i64,
    pub output: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HealthcheckView {
    pub test: Vec<String>,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    pub retries: u32,
    pub start_period_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ContainerView {
    pub id: String,
    pub name: String,
    pub image: String,
    pub status: String,
    pub running: bool,
    pub restarting: bool,
    pub oom_killed: bool,
    pub exit_code: i64,
    pub error: String,
    pub started_at: String,
    pub finished_at: String,
    /// `none`, `starting`, `healthy`, `unhealthy`.
    pub health_status: String,
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
        self.state != "running" || self.status.contains("(unhealthy)")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct MountView {
    /// bind, volume, tmpfs…
    #[serde(rename = "type")]
    pub kind: String,
    pub source: String,
    pub destination: String,
    pub rw: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DeathLogs {
    /// The `die` event's time, in unix nanoseconds.
    pub died_at_unix_nanos: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Its lines up to that moment (none of the run after it).
    pub logs: LogsView,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LogsView {
    pub lines: Vec<LogLineView>,
    pub truncated: bool,
    pub redactions: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PolicyView {
    pub start_enabled: bool,
    pub restart_enabled: bool,
    #[serde(default)]
    pub stop_enabled: bool,
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
    /// The executor's risk tier per action (`start` → 1, `stop` → 2).
    #[serde(default)]
    pub tiers: std::collections::BTreeMap<String, u32>,
    /// Whether the executor accepts automation grants.
    #[serde(default)]
    pub automation_enabled: bool,
    /// Grant ids on the executor's revocation list.
    #[serde(default)]
    pub revoked_grants: Vec<String>,
    /// The longest grant the executor accepts.
    #[serde(default)]
    pub max_grant_ttl_secs: u64,
}

impl PolicyView {
    /// `T1`, `T2`: the tier the executor gives `action`. An action the
    /// executor did not report is shown at the highest write tier.
    pub fn tier_label(&self, action: &str) -> String {
        format!("T{}", self.tiers.get(action).copied().unwrap_or(2))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ApproverView {
    pub id: String,
    pub public_key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct EngineDiskView {
    pub images_bytes: i64,
    pub build_cache_bytes: i64,
    /// Images no container uses and build cache not in use.
    pub reclaimable_bytes: i64,
    pub images: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HttpCheckView {
    pub service: String,
    pub ok: bool,
    pub status_code: u32,
    pub latency_ms: u64,
    pub error: String,
    pub body_snippet: String,
}

pub const COMPOSE_SERVICE_LABEL: &str = "com.docker.compose.service";
pub const COMPOSE_PROJECT_LABEL: &str = "com.docker.compose.project";

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
