//! Swarm services, their tasks and the cluster's nodes, as the executor
//! reports them (redacted) and the agent serves them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::container::HealthcheckView;
use drydock_proto::docker::{NodeAvailability, NodeState, ServiceMode, TaskState, UpdateState};

/// The Swarm stack label (`docker stack deploy` sets it on every service).
pub const STACK_NAMESPACE_LABEL: &str = "com.docker.stack.namespace";
/// The labels Swarm puts on a task's container.
pub const SWARM_SERVICE_ID_LABEL: &str = "com.docker.swarm.service.id";
pub const SWARM_SERVICE_NAME_LABEL: &str = "com.docker.swarm.service.name";
pub const SWARM_TASK_ID_LABEL: &str = "com.docker.swarm.task.id";

/// One service in the executor's scope.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ServiceSummaryView {
    pub id: String,
    pub name: String,
    /// Its stack, or "".
    #[serde(default)]
    pub stack: String,
    pub image: String,
    /// `replicated`, `global`, `replicated-job` or `global-job`.
    pub mode: ServiceMode,
    pub desired: u64,
    pub running: u64,
    /// The last update: "" (none), `updating`, `paused`, `completed`,
    /// `rollback_started`, `rollback_paused` or `rollback_completed`.
    #[serde(default)]
    pub update_state: UpdateState,
    /// The spec version; an approval binds it.
    pub version: u64,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// How Swarm rolls an update (or a rollback) out.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct UpdatePolicyView {
    pub parallelism: u64,
    pub delay_ms: u64,
    /// `pause`, `continue` or `rollback`.
    pub failure_action: String,
    pub monitor_ms: u64,
    pub max_failure_ratio: f64,
    pub order: String,
}

/// One service's definition, redacted like a container's inspect.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ServiceView {
    #[serde(flatten)]
    pub summary: ServiceSummaryView,
    #[serde(default)]
    pub constraints: Vec<String>,
    #[serde(default)]
    pub reserve_nano_cpus: i64,
    #[serde(default)]
    pub reserve_memory_bytes: i64,
    #[serde(default)]
    pub limit_nano_cpus: i64,
    #[serde(default)]
    pub limit_memory_bytes: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_config: Option<UpdatePolicyView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_config: Option<UpdatePolicyView>,
    /// `KEY=VALUE`, values redacted by the executor's rules.
    #[serde(default)]
    pub env: Vec<String>,
    /// Each variable's name with a keyed hash of its value.
    #[serde(default)]
    pub env_hashes: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<HealthcheckView>,
    #[serde(default)]
    pub update_message: String,
    #[serde(default)]
    pub update_started_at: String,
    #[serde(default)]
    pub update_completed_at: String,
    /// The previous spec's image: what a rollback returns to ("" when
    /// there is no previous spec).
    #[serde(default)]
    pub previous_image: String,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// `none`, `on-failure` or `any`.
    #[serde(default)]
    pub restart_condition: String,
    #[serde(default)]
    pub redactions: u32,
}

/// One task of a service.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct TaskView {
    pub id: String,
    #[serde(default)]
    pub slot: u64,
    #[serde(default)]
    pub node_id: String,
    /// `pending`, `running`, `failed`, `rejected`, `shutdown`, ...
    pub state: TaskState,
    pub desired_state: TaskState,
    /// The engine's words (`no suitable node (...)`), redacted.
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub error: String,
    /// When its state last changed (RFC 3339).
    #[serde(default)]
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(default)]
    pub container_id: String,
    #[serde(default)]
    pub image: String,
}

impl TaskView {
    /// The engine's reason, whichever field it put it in.
    pub fn reason(&self) -> &str {
        if self.error.is_empty() {
            &self.message
        } else {
            &self.error
        }
    }

    /// A task that ended badly: it failed, or no node would take it.
    pub fn failed(&self) -> bool {
        self.state.is_failure()
    }
}

/// One node of the cluster.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct NodeView {
    pub id: String,
    pub hostname: String,
    /// `manager` or `worker`.
    pub role: String,
    /// `ready`, `down`, `disconnected` or `unknown`.
    pub state: NodeState,
    /// `active`, `pause` or `drain`.
    pub availability: NodeAvailability,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub nano_cpus: i64,
    #[serde(default)]
    pub memory_bytes: i64,
    #[serde(default)]
    pub leader: bool,
    #[serde(default)]
    pub engine_version: String,
    /// Only when the executor is configured to show them.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl NodeView {
    /// Whether Swarm may place tasks on it now.
    pub fn schedulable(&self) -> bool {
        self.state == NodeState::Ready && self.availability == NodeAvailability::Active
    }
}

/// `GET /api/v1/services`: the services in the executor's scope and the
/// cluster's nodes, or why there are none to show.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ServiceList {
    /// The executor's engine is a Swarm manager with services in scope.
    pub swarm: bool,
    /// Why `swarm` is false, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    #[serde(default)]
    pub services: Vec<ServiceSummaryView>,
    #[serde(default)]
    pub nodes: Vec<NodeView>,
}

/// `GET /api/v1/services/{service}/tasks`: one service and its tasks,
/// newest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ServiceTaskList {
    pub service: ServiceView,
    pub tasks: Vec<TaskView>,
}
