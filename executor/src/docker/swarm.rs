//! Swarm services, their tasks and the cluster's nodes, on an engine that is
//! a Swarm manager.
//!
//! The engine's answers are read raw and parsed here (bollard's models
//! leave out `PreviousSpec`, which a rollback returns to). No reference a
//! caller gave reaches an engine path: a service is resolved by listing the
//! services and matching its name or id, and only a 25-character Swarm id
//! is ever put into a path.
//!
//! The two writes send the engine's own spec back whole, with the version
//! the permit was given at: the engine refuses ("update out of sequence")
//! if the spec changed since, so a write never acts on a spec other than
//! the one policy and the approval saw.

use std::collections::BTreeMap;
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptions;
use futures::StreamExt as _;
use serde::Deserialize;

use super::logs::{LineJoiner, LogQuery, LogStream, RawLogLine};
use super::{
    engine_message, DockerAdapter, DockerError, HealthcheckSpec, ServiceMode, TaskState,
    UpdateState,
};
use crate::policy::{
    ForceUpdate, Read, ResolvedService, ServicePermit, ServiceRollback, ServiceUpdate,
};

/// The most tasks `ServiceTasks` answers with (newest first).
pub const MAX_TASKS: usize = 100;

/// A service as `ListServices` and `InspectService` describe it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceInfo {
    pub id: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub image: String,
    pub mode: ServiceMode,
    pub desired: u64,
    pub running: u64,
    pub version: u64,
    pub update_state: UpdateState,
    pub update_message: String,
    pub update_started_at: String,
    pub update_completed_at: String,
    pub previous_image: Option<String>,
    pub constraints: Vec<String>,
    pub reserve_nano_cpus: i64,
    pub reserve_memory: i64,
    pub limit_nano_cpus: i64,
    pub limit_memory: i64,
    pub update_config: Option<UpdatePolicy>,
    pub rollback_config: Option<UpdatePolicy>,
    /// Raw here; the service redacts them.
    pub env: Vec<String>,
    pub healthcheck: Option<HealthcheckSpec>,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub restart_condition: String,
    pub created_at: String,
    pub updated_at: String,
    /// Its tasks' logs are one raw stream (no timestamps asked for).
    pub tty: bool,
}

impl ServiceInfo {
    /// What policy decides on.
    pub fn resolved(&self) -> ResolvedService {
        ResolvedService {
            id: self.id.clone(),
            name: self.name.clone(),
            labels: self.labels.clone(),
            version: self.version,
            image: self.image.clone(),
            previous_image: self.previous_image.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpdatePolicy {
    pub parallelism: u64,
    pub delay: Duration,
    pub failure_action: String,
    pub monitor: Duration,
    pub max_failure_ratio: f64,
    pub order: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskInfo {
    pub id: String,
    pub slot: u64,
    pub node_id: String,
    pub state: TaskState,
    pub desired_state: TaskState,
    pub message: String,
    pub error: String,
    pub timestamp: String,
    pub created_at: String,
    pub exit_code: Option<i64>,
    pub container_id: String,
    pub image: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    pub id: String,
    pub hostname: String,
    pub role: String,
    pub state: String,
    pub availability: String,
    pub message: String,
    pub nano_cpus: i64,
    pub memory_bytes: i64,
    pub leader: bool,
    pub engine_version: String,
    pub labels: BTreeMap<String, String>,
}

// ---- The engine's JSON, the parts drydock reads. ----

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawVersion {
    index: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawService {
    #[serde(rename = "ID")]
    id: String,
    version: RawVersion,
    created_at: String,
    updated_at: String,
    spec: RawSpec,
    previous_spec: Option<RawSpec>,
    update_status: Option<RawUpdateStatus>,
    service_status: Option<RawServiceStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawSpec {
    name: String,
    labels: BTreeMap<String, String>,
    task_template: RawTaskTemplate,
    mode: serde_json::Map<String, serde_json::Value>,
    update_config: Option<RawUpdateConfig>,
    rollback_config: Option<RawUpdateConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawTaskTemplate {
    container_spec: RawContainerSpec,
    resources: RawResources,
    restart_policy: RawRestartPolicy,
    placement: RawPlacement,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawContainerSpec {
    image: String,
    env: Vec<String>,
    command: Vec<String>,
    args: Vec<String>,
    health_check: Option<RawHealthcheck>,
    #[serde(rename = "TTY")]
    tty: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawHealthcheck {
    test: Vec<String>,
    interval: i64,
    timeout: i64,
    retries: u32,
    start_period: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawResources {
    limits: RawResourceObject,
    reservations: RawResourceObject,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawResourceObject {
    nano_cpus: i64,
    memory_bytes: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawRestartPolicy {
    condition: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawPlacement {
    constraints: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawUpdateConfig {
    parallelism: u64,
    delay: i64,
    failure_action: String,
    monitor: i64,
    max_failure_ratio: f64,
    order: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawUpdateStatus {
    state: String,
    started_at: String,
    completed_at: String,
    message: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawServiceStatus {
    running_tasks: u64,
    desired_tasks: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawTask {
    #[serde(rename = "ID")]
    id: String,
    created_at: String,
    slot: u64,
    #[serde(rename = "NodeID")]
    node_id: String,
    #[serde(rename = "ServiceID")]
    service_id: String,
    status: RawTaskStatus,
    desired_state: String,
    spec: RawTaskTemplate,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawTaskStatus {
    timestamp: String,
    state: String,
    message: String,
    err: String,
    container_status: Option<RawContainerStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawContainerStatus {
    #[serde(rename = "ContainerID")]
    container_id: String,
    exit_code: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawNode {
    #[serde(rename = "ID")]
    id: String,
    spec: RawNodeSpec,
    description: RawNodeDescription,
    status: RawNodeStatus,
    manager_status: Option<RawManagerStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawNodeSpec {
    labels: BTreeMap<String, String>,
    role: String,
    availability: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawNodeDescription {
    hostname: String,
    resources: RawResourceObject,
    engine: RawEngine,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawEngine {
    engine_version: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawNodeStatus {
    state: String,
    message: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct RawManagerStatus {
    leader: bool,
}

fn ns(v: i64) -> Duration {
    Duration::from_nanos(v.max(0) as u64)
}

fn update_policy(c: Option<RawUpdateConfig>) -> Option<UpdatePolicy> {
    c.map(|c| UpdatePolicy {
        parallelism: c.parallelism,
        delay: ns(c.delay),
        failure_action: c.failure_action,
        monitor: ns(c.monitor),
        max_failure_ratio: c.max_failure_ratio,
        order: c.order,
    })
}

/// `replicated`, `global`, `replicated-job` or `global-job`.
fn mode_name(mode: &serde_json::Map<String, serde_json::Value>) -> String {
    match mode.keys().next().map(String::as_str) {
        Some("Replicated") => "replicated",
        Some("Global") => "global",
        Some("ReplicatedJob") => "replicated-job",
        Some("GlobalJob") => "global-job",
        _ => "unknown",
    }
    .to_string()
}

fn service_info(s: RawService) -> ServiceInfo {
    let status = s.service_status.unwrap_or_default();
    let update = s.update_status.unwrap_or_default();
    let spec = s.spec;
    let c = spec.task_template.container_spec;
    ServiceInfo {
        id: s.id,
        name: spec.name,
        labels: spec.labels,
        image: c.image,
        mode: ServiceMode::parse(&mode_name(&spec.mode)),
        desired: status.desired_tasks,
        running: status.running_tasks,
        version: s.version.index,
        update_state: UpdateState::parse(&update.state),
        update_message: update.message,
        update_started_at: update.started_at,
        update_completed_at: update.completed_at,
        previous_image: s
            .previous_spec
            .map(|p| p.task_template.container_spec.image)
            .filter(|i| !i.is_empty()),
        constraints: spec.task_template.placement.constraints,
        reserve_nano_cpus: spec.task_template.resources.reservations.nano_cpus,
        reserve_memory: spec.task_template.resources.reservations.memory_bytes,
        limit_nano_cpus: spec.task_template.resources.limits.nano_cpus,
        limit_memory: spec.task_template.resources.limits.memory_bytes,
        update_config: update_policy(spec.update_config),
        rollback_config: update_policy(spec.rollback_config),
        env: c.env,
        healthcheck: c.health_check.map(|h| HealthcheckSpec {
            test: h.test,
            interval: ns(h.interval),
            timeout: ns(h.timeout),
            retries: h.retries,
            start_period: ns(h.start_period),
        }),
        command: c.command,
        args: c.args,
        restart_condition: spec.task_template.restart_policy.condition,
        created_at: s.created_at,
        updated_at: s.updated_at,
        tty: c.tty,
    }
}

/// The engine's `/services?status=true` answer.
pub(crate) fn parse_services(body: &[u8]) -> Result<Vec<ServiceInfo>, String> {
    let raw: Vec<RawService> = serde_json::from_slice(body)
        .map_err(|e| format!("the engine's service list is not as expected: {e}"))?;
    Ok(raw.into_iter().map(service_info).collect())
}

/// The engine's `/tasks` answer, for one service, newest first.
/// `1.41` → 1.41; anything else is not an API version.
pub(crate) fn parse_api_version(text: &str) -> Option<bollard::ClientVersion> {
    let (major, minor) = text.split_once('.')?;
    Some(bollard::ClientVersion {
        major_version: major.parse().ok()?,
        minor_version: minor.parse().ok()?,
    })
}

/// An id the engine gave, checked before it goes into a path: only a Swarm
/// id (25 lowercase letters and digits) ever does.
fn swarm_id<'a>(operation: &'static str, id: &'a str) -> Result<&'a str, DockerError> {
    if drydock_proto::approval::is_swarm_id(id) {
        Ok(id)
    } else {
        Err(DockerError::Rejected {
            operation,
            message: "the engine named a service by an id that is not a Swarm id".into(),
        })
    }
}

pub(crate) fn parse_tasks(body: &[u8], service_id: &str) -> Result<Vec<TaskInfo>, String> {
    let raw: Vec<RawTask> = serde_json::from_slice(body)
        .map_err(|e| format!("the engine's task list is not as expected: {e}"))?;
    let mut tasks: Vec<TaskInfo> = raw
        .into_iter()
        .filter(|t| t.service_id == service_id)
        .map(|t| {
            let container = t.status.container_status.unwrap_or_default();
            TaskInfo {
                id: t.id,
                slot: t.slot,
                node_id: t.node_id,
                state: TaskState::parse(&t.status.state),
                desired_state: TaskState::parse(&t.desired_state),
                message: t.status.message,
                error: t.status.err,
                timestamp: t.status.timestamp,
                created_at: t.created_at,
                exit_code: container.exit_code,
                container_id: container.container_id,
                image: t.spec.container_spec.image,
            }
        })
        .collect();
    // RFC 3339 with the same zone sorts as text.
    tasks.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then(b.id.cmp(&a.id)));
    Ok(tasks)
}

/// The engine's `/nodes` answer.
pub(crate) fn parse_nodes(body: &[u8]) -> Result<Vec<NodeInfo>, String> {
    let raw: Vec<RawNode> = serde_json::from_slice(body)
        .map_err(|e| format!("the engine's node list is not as expected: {e}"))?;
    Ok(raw
        .into_iter()
        .map(|n| NodeInfo {
            id: n.id,
            hostname: n.description.hostname,
            role: n.spec.role,
            state: n.status.state,
            availability: n.spec.availability,
            message: n.status.message,
            nano_cpus: n.description.resources.nano_cpus,
            memory_bytes: n.description.resources.memory_bytes,
            leader: n.manager_status.is_some_and(|m| m.leader),
            engine_version: n.description.engine.engine_version,
            labels: n.spec.labels,
        })
        .collect())
}

/// What an engine error says, as a `DockerError`: a node that is not a
/// manager (or in no swarm) is told so plainly; a spec that changed under
/// a write is a refusal, not an outage.
fn swarm_error(operation: &'static str, status: http::StatusCode, body: &[u8]) -> DockerError {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Message {
        message: String,
    }
    let message = serde_json::from_slice::<Message>(body)
        .map(|m| m.message)
        .unwrap_or_else(|_| String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned());
    if message.contains("not a swarm manager") || message.contains("not part of a swarm") {
        return DockerError::NotSwarmManager(engine_message(&message));
    }
    if message.contains("out of sequence") {
        return DockerError::Rejected {
            operation,
            message: "the service's spec changed since it was read (update out of sequence); nothing was done".into(),
        };
    }
    if status == http::StatusCode::NOT_FOUND {
        return DockerError::NotFound(operation.to_string());
    }
    if status.is_server_error() {
        return DockerError::Unavailable(format!(
            "{operation}: engine error {status}: {}",
            engine_message(&message)
        ));
    }
    DockerError::Rejected {
        operation,
        message: engine_message(&message),
    }
}

/// `filters={"key":["value"]}`, percent-encoded for a query string.
fn filter_query(key: &str, value: &str) -> String {
    let json = serde_json::json!({ key: [value] }).to_string();
    let mut out = String::with_capacity(json.len() * 3);
    for b in json.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    format!("filters={out}")
}

impl DockerAdapter {
    /// A raw GET under the read deadline and the read retry rule.
    async fn swarm_get(&self, operation: &'static str, path: &str) -> Result<Vec<u8>, DockerError> {
        self.read(operation, self.timeouts.read, || async move {
            let version = self.client().client_version();
            let (status, body) = self.raw.get(&version, path).await.map_err(|e| match e {
                super::transport::RawError::Connection(e) => {
                    DockerError::Unavailable(format!("{operation}: {e}"))
                }
                super::transport::RawError::Answer(e) => DockerError::Rejected {
                    operation,
                    message: e,
                },
            })?;
            if !status.is_success() {
                return Err(swarm_error(operation, status, &body));
            }
            Ok(body.to_vec())
        })
        .await
    }

    /// Every service of the cluster with its task counts. Used before the
    /// policy check, which needs the names and labels.
    pub async fn list_services(&self) -> Result<Vec<ServiceInfo>, DockerError> {
        let body = self
            .swarm_get("list_services", "/services?status=true")
            .await?;
        parse_services(&body).map_err(|message| DockerError::Rejected {
            operation: "list_services",
            message,
        })
    }

    /// The permitted service, read now.
    pub async fn service(&self, permit: &ServicePermit<Read>) -> Result<ServiceInfo, DockerError> {
        self.service_by_id(permit.service_id()).await
    }

    async fn service_by_id(&self, id: &str) -> Result<ServiceInfo, DockerError> {
        self.list_services()
            .await?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| DockerError::NotFound(id.to_string()))
    }

    /// The permitted service's tasks, newest first.
    pub async fn service_tasks(
        &self,
        permit: &ServicePermit<Read>,
    ) -> Result<Vec<TaskInfo>, DockerError> {
        let id = swarm_id("service_tasks", permit.service_id())?;
        let body = self
            .swarm_get(
                "service_tasks",
                &format!("/tasks?{}", filter_query("service", id)),
            )
            .await?;
        parse_tasks(&body, id).map_err(|message| DockerError::Rejected {
            operation: "service_tasks",
            message,
        })
    }

    /// The cluster's nodes.
    pub async fn list_nodes(&self) -> Result<Vec<NodeInfo>, DockerError> {
        let body = self.swarm_get("list_nodes", "/nodes").await?;
        parse_nodes(&body).map_err(|message| DockerError::Rejected {
            operation: "list_nodes",
            message,
        })
    }

    /// The permitted service's logs, from all its tasks, bounded like a
    /// container's.
    pub async fn service_logs(
        &self,
        permit: &ServicePermit<Read>,
        query: LogQuery,
        max_bytes: usize,
    ) -> Result<(Vec<RawLogLine>, bool), DockerError> {
        let id = swarm_id("service_logs", permit.service_id())?;
        self.read("service_logs", self.timeouts.logs, || async move {
            let mut stream = self.client().service_logs(
                id,
                Some(LogsOptions {
                    stdout: query.stdout,
                    stderr: query.stderr,
                    since: i32::try_from(query.since).unwrap_or(i32::MAX),
                    timestamps: query.timestamps,
                    tail: query.tail.to_string(),
                    ..Default::default()
                }),
            );
            let mut lines = LineJoiner::new(query.tail as usize, max_bytes, query.timestamps);
            while let Some(item) = stream.next().await {
                let (kind, message) =
                    match item.map_err(|e| match super::classify("service_logs", id, e) {
                        DockerError::Unavailable(m) if m.contains("not a swarm manager") => {
                            DockerError::NotSwarmManager(m)
                        }
                        other => other,
                    })? {
                        LogOutput::StdOut { message } | LogOutput::Console { message } => {
                            (LogStream::Stdout, message)
                        }
                        LogOutput::StdErr { message } => (LogStream::Stderr, message),
                        LogOutput::StdIn { .. } => continue,
                    };
                lines.push(kind, &message);
            }
            Ok(lines.finish())
        })
        .await
    }
}

mod writes;

#[cfg(test)]
mod tests;
