//! The agent's side of the executor contract. It presents the agent's client
//! certificate over mTLS; `pb::` types end here and become the agent's views.
//!
//! The engine and the model's tools talk to the executor through the
//! `Executor` trait (reads in `Reads`, which has no write), so they can be
//! driven by a scripted executor in tests; `ExecutorClient` is the one over
//! gRPC.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use drydock_proto::approval::{ContainerWrite, ServiceWrite, WriteAction};
use drydock_proto::pb;
use drydock_proto::pb::executor_client::ExecutorClient as PbClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::model::{
    ActionPolicy, ActionsView, ApproverView, BuildSourceView, ContainerEvent, ContainerState,
    ContainerSummaryView, ContainerView, DiskUsageView, EngineDiskView, EventAction,
    HealthProbeView, HealthStatus, HealthcheckView, HttpCheckView, ImageView, LogLineView,
    LogsView, MountUsageView, NodeView, PolicyView, RegistryView, ServiceSummaryView, ServiceView,
    StatsView, TaskView, Tier,
};

mod builds;
mod health;
mod swarm;
mod traits;
mod writes;
pub use writes::{BuiltImage, Written};

/// What authorises a write: a person's approval of this one step, or an
/// operator's automation grant plus the fault class it is used for.
#[derive(Debug, Clone)]
pub enum Authority {
    Approval {
        claims: Vec<u8>,
        signature: Vec<u8>,
        key_id: String,
        /// Further approvers' `(key id, signature)` over the same claims.
        cosigners: Vec<(String, Vec<u8>)>,
    },
    Grant {
        claims: Vec<u8>,
        signature: Vec<u8>,
        key_id: String,
        fault_class: String,
    },
}

/// A refusal or failure reported by the executor, with its gRPC code.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("executor {code:?}: {message}")]
pub struct ExecutorError {
    pub code: tonic::Code,
    pub message: String,
}

impl ExecutorError {
    pub fn new(code: tonic::Code, message: impl Into<String>) -> ExecutorError {
        ExecutorError {
            code,
            message: message.into(),
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code == tonic::Code::NotFound
    }

    /// The executor refused: its policy, an approval or a grant, or the
    /// container's state. Nothing was done.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self.code,
            tonic::Code::FailedPrecondition
                | tonic::Code::PermissionDenied
                | tonic::Code::InvalidArgument
                | tonic::Code::NotFound
                | tonic::Code::Unauthenticated
                | tonic::Code::ResourceExhausted
        )
    }

    /// Whether the executor, or the engine behind it, did not answer (as
    /// opposed to answering with a refusal or an error about the call).
    pub fn is_outage(&self) -> bool {
        use tonic::Code;
        matches!(
            self.code,
            Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Cancelled
        )
    }

    /// Whether a write that failed this way may still have happened: the
    /// answer was lost or the executor could not finish recording it, as
    /// opposed to a refusal, which changes nothing.
    pub fn outcome_in_doubt(&self) -> bool {
        use tonic::Code;
        match self.code {
            Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Unknown
            | Code::Cancelled
            | Code::Internal
            | Code::Aborted
            | Code::DataLoss => true,
            Code::Ok
            | Code::InvalidArgument
            | Code::NotFound
            | Code::AlreadyExists
            | Code::PermissionDenied
            | Code::ResourceExhausted
            | Code::FailedPrecondition
            | Code::OutOfRange
            | Code::Unimplemented
            | Code::Unauthenticated => false,
        }
    }
}

impl From<tonic::Status> for ExecutorError {
    fn from(s: tonic::Status) -> Self {
        ExecutorError::new(s.code(), s.message())
    }
}

/// An executor call in flight.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, ExecutorError>> + Send + 'a>>;

/// Live engine events of one container, as they happen.
pub type ContainerEvents = Pin<Box<dyn futures::Stream<Item = ContainerEvent> + Send>>;

/// The executor's read RPCs, as the agent uses them. Nothing here writes.
pub trait Reads: Send + Sync {
    fn list<'a>(&'a self, request_id: &'a str, all: bool) -> Call<'a, Vec<ContainerSummaryView>>;
    fn inspect<'a>(&'a self, request_id: &'a str, container: &'a str) -> Call<'a, ContainerView>;
    /// The last `tail` lines between `since` and `until` (unix seconds,
    /// `until`'s own second included; 0 for no bound).
    fn logs_window<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
        tail: u32,
        since: i64,
        until: i64,
    ) -> Call<'a, LogsView>;
    fn policy<'a>(&'a self, request_id: &'a str) -> Call<'a, PolicyView>;
    fn stats<'a>(&'a self, request_id: &'a str, container: &'a str) -> Call<'a, StatsView>;
    fn disk_usage<'a>(&'a self, request_id: &'a str, container: &'a str)
        -> Call<'a, DiskUsageView>;
    /// The container's engine events since `since_unix` (0: the last
    /// hour), the newest `limit` (at most 256), oldest first.
    fn container_events<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
        since_unix: i64,
        limit: u32,
    ) -> Call<'a, Vec<ContainerEvent>>;
    /// The operator-configured HTTP check for `service`.
    fn check_http<'a>(&'a self, request_id: &'a str, service: &'a str) -> Call<'a, HttpCheckView>;
    /// Whether an image (by content id) is on the engine, and its OCI
    /// labels.
    fn image<'a>(&'a self, request_id: &'a str, image_id: &'a str) -> Call<'a, ImageView>;
    /// The container's build context and the commit `revision` names in
    /// it (its checkout's HEAD when empty).
    fn build_source<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
        revision: &'a str,
    ) -> Call<'a, BuildSourceView>;
    /// The container's tag and the manifest digest its registry names by
    /// it now (PERMISSION_DENIED for a registry the executor does not
    /// allow).
    fn registry_digest<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
    ) -> Call<'a, RegistryView>;
    /// The Swarm services in scope (FAILED_PRECONDITION on an engine that
    /// is not a Swarm manager).
    fn services<'a>(&'a self, request_id: &'a str) -> Call<'a, Vec<ServiceSummaryView>>;
    fn service<'a>(&'a self, request_id: &'a str, service: &'a str) -> Call<'a, ServiceView>;
    /// A service's tasks, newest first.
    fn tasks<'a>(&'a self, request_id: &'a str, service: &'a str) -> Call<'a, Vec<TaskView>>;
    /// The last `tail` lines of a service's logs, from all its tasks.
    fn service_logs<'a>(
        &'a self,
        request_id: &'a str,
        service: &'a str,
        tail: u32,
    ) -> Call<'a, LogsView>;
    fn nodes<'a>(&'a self, request_id: &'a str) -> Call<'a, Vec<NodeView>>;
    /// The manifest digest the tag of a service's spec names in its
    /// registry now, beside the digest its spec is pinned to.
    fn service_registry_digest<'a>(
        &'a self,
        request_id: &'a str,
        service: &'a str,
    ) -> Call<'a, RegistryView>;

    /// One container's events from now on, as they happen (`WatchEvents`,
    /// kept to that container): what verification waits on. The executor
    /// caps streams per identity, so a refusal is expected and the caller
    /// polls instead; an executor client that has no stream says
    /// `UNIMPLEMENTED`.
    fn follow<'a>(
        &'a self,
        request_id: &'a str,
        container_id: &'a str,
    ) -> Call<'a, ContainerEvents> {
        let _ = (request_id, container_id);
        Box::pin(async {
            Err(ExecutorError::new(
                tonic::Code::Unimplemented,
                "no event stream",
            ))
        })
    }

    /// Whether the executor serves, as cheaply as it can be asked (the
    /// gRPC health service, which audits no successful probe).
    fn ping<'a>(&'a self) -> Call<'a, ()> {
        Box::pin(async move { self.policy("req-ping").await.map(|_| ()) })
    }

    /// The last `tail` lines of its logs.
    fn logs<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
        tail: u32,
    ) -> Call<'a, LogsView> {
        self.logs_window(request_id, container, tail, 0, 0)
    }
}

/// Every RPC the engine uses: the reads, and the writes a signed approval
/// or a grant authorises.
pub trait Executor: Reads {
    /// Send a write with what authorises it. The agent cannot make these
    /// bytes itself: only the operator's key can sign them.
    fn write<'a>(
        &'a self,
        request_id: &'a str,
        op: &'a WriteOp,
        authority: Authority,
    ) -> Call<'a, Written>;
}

/// A write as the executor's RPCs take it: on a container (a rollback with
/// the image it runs) or on a Swarm service, each by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    Container { id: String, write: ContainerWrite },
    Service { id: String, write: ServiceWrite },
}

impl WriteOp {
    pub fn action(&self) -> WriteAction {
        match self {
            WriteOp::Container { write, .. } => write.action().into(),
            WriteOp::Service { write, .. } => write.action().into(),
        }
    }

    /// The container's or the service's id.
    pub fn id(&self) -> &str {
        match self {
            WriteOp::Container { id, .. } | WriteOp::Service { id, .. } => id,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientSetupError {
    #[error("cannot read {key} file {path}: {source}")]
    Read {
        key: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("executor.endpoint `{0}` is invalid: {1}")]
    Endpoint(String, String),
}

#[derive(Clone)]
pub struct ExecutorClient {
    inner: PbClient<Channel>,
    /// The same channel, for the health service.
    channel: Channel,
    /// Writes wait for the container's own stop timeout (the executor
    /// honours it, up to `MAX_STOP_WAIT`), so they get a longer deadline.
    writes: PbClient<Channel>,
}

/// The longest a write may take from the agent's side: the executor's own
/// write deadline for the longest stop timeout it waits for, plus margin.
pub const WRITE_CALL_TIMEOUT: Duration = Duration::from_secs(360);

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, ClientSetupError> {
    std::fs::read(path).map_err(|source| ClientSetupError::Read {
        key,
        path: path.display().to_string(),
        source,
    })
}

impl ExecutorClient {
    /// Lazily connected: the agent starts even while the executor is down and
    /// reports UNAVAILABLE per call instead.
    pub fn new(
        endpoint: &str,
        server_name: &str,
        ca: &Path,
        cert: &Path,
        key: &Path,
    ) -> Result<ExecutorClient, ClientSetupError> {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read("executor.ca", ca)?))
            .identity(Identity::from_pem(
                read("executor.cert", cert)?,
                read("executor.key", key)?,
            ))
            .domain_name(server_name.to_string());
        let base = Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| ClientSetupError::Endpoint(endpoint.to_string(), e.to_string()))?
            .tls_config(tls)
            .map_err(|e| ClientSetupError::Endpoint(endpoint.to_string(), e.to_string()))?
            .connect_timeout(Duration::from_secs(5));
        let channel = base.clone().timeout(Duration::from_secs(60)).connect_lazy();
        let writes = base.timeout(WRITE_CALL_TIMEOUT).connect_lazy();
        Ok(ExecutorClient {
            inner: PbClient::new(channel.clone()),
            channel,
            writes: PbClient::new(writes),
        })
    }

    async fn list(
        &self,
        request_id: &str,
        all: bool,
    ) -> Result<Vec<ContainerSummaryView>, ExecutorError> {
        let r = self
            .inner
            .clone()
            .list_containers(pb::ListContainersRequest {
                request_id: request_id.into(),
                all,
                ..Default::default()
            })
            .await?
            .into_inner();
        Ok(r.containers
            .into_iter()
            .map(|c| ContainerSummaryView {
                id: c.id,
                name: c.name,
                image: c.image,
                state: ContainerState::parse(&c.state),
                status: c.status,
                labels: c.labels.into_iter().collect(),
                public_ports: c.public_ports,
                ip_addresses: c.ip_addresses,
                host: None,
            })
            .collect())
    }

    async fn inspect(
        &self,
        request_id: &str,
        container: &str,
    ) -> Result<ContainerView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .inspect_container(pb::ContainerRequest {
                request_id: request_id.into(),
                container: container.into(),
            })
            .await?
            .into_inner();
        let state = r.state.unwrap_or_default();
        let health = r.health.unwrap_or_default();
        Ok(ContainerView {
            id: r.id,
            name: r.name,
            image: r.image,
            status: ContainerState::parse(&state.status),
            running: state.running,
            restarting: state.restarting,
            oom_killed: state.oom_killed,
            exit_code: state.exit_code,
            error: state.error,
            started_at: state.started_at,
            finished_at: state.finished_at,
            health_status: if health.status.is_empty() {
                HealthStatus::None
            } else {
                HealthStatus::parse(&health.status)
            },
            failing_streak: health.failing_streak,
            health_log: health
                .log
                .into_iter()
                .map(|p| HealthProbeView {
                    exit_code: p.exit_code,
                    output: p.output,
                })
                .collect(),
            healthcheck: r.healthcheck.map(|h| HealthcheckView {
                test: h.test,
                interval_ms: h.interval_ms,
                timeout_ms: h.timeout_ms,
                retries: h.retries,
                start_period_ms: h.start_period_ms,
            }),
            labels: r.labels.into_iter().collect(),
            env: r.env,
            restart_count: r.restart_count,
            restart_policy: r.restart_policy,
            restart_max_retries: r.restart_max_retries,
            read_only_rootfs: r.read_only_rootfs,
            networks: r.networks,
            aliases: r.aliases,
            redactions: r.redactions,
            memory_limit_bytes: r.memory_limit_bytes,
            stop_timeout_secs: r.stop_timeout_secs,
            requested_host_ports: r.requested_host_ports,
            ip_addresses: r.ip_addresses,
            mounts: r
                .mounts
                .into_iter()
                .map(|m| crate::model::MountView {
                    kind: m.r#type,
                    source: m.source,
                    destination: m.destination,
                    rw: m.rw,
                })
                .collect(),
            entrypoint: r.entrypoint,
            command: r.command,
            user: r.user,
            working_dir: r.working_dir,
            image_id: r.image_id,
            network_mode: r.network_mode,
            image_missing: r.image_missing,
            created: r.created,
            env_hashes: r.env_hashes.into_iter().map(|h| (h.name, h.hash)).collect(),
        })
    }

    /// The last `tail` lines between `since` and `until` (unix seconds,
    /// `until`'s own second included; 0 for no bound): what a container
    /// said before a moment.
    async fn logs_window(
        &self,
        request_id: &str,
        container: &str,
        tail: u32,
        since: i64,
        until: i64,
    ) -> Result<LogsView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .container_logs(pb::LogsRequest {
                request_id: request_id.into(),
                container: container.into(),
                tail,
                since,
                until,
                ..Default::default()
            })
            .await?
            .into_inner();
        Ok(logs_view(r))
    }

    async fn policy(&self, request_id: &str) -> Result<PolicyView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .get_policy(pb::GetPolicyRequest {
                request_id: request_id.into(),
            })
            .await?
            .into_inner();
        // Each action the executor reports, by its word; one this release
        // does not know is left out (never enabled).
        let actions = ActionsView::new(r.actions.iter().filter_map(|a| {
            Some((
                WriteAction::parse(&a.action)?,
                ActionPolicy {
                    enabled: a.enabled,
                    tier: Tier::from_number(a.tier),
                },
            ))
        }));
        let approvers_required = r
            .actions
            .iter()
            .filter(|a| a.approvers_required > 1)
            .filter_map(|a| Some((WriteAction::parse(&a.action)?, a.approvers_required)))
            .collect();
        Ok(PolicyView {
            approvers_required,
            actions,
            approver_ids: r.approver_ids,
            logs_max_lines: r.logs_max_lines,
            http_checks: r.http_checks,
            approvers: r
                .approvers
                .into_iter()
                .map(|a| ApproverView {
                    id: a.id,
                    public_key: a.public_key,
                })
                .collect(),
            allow_names: r
                .scope
                .as_ref()
                .map(|s| s.allow_names.clone())
                .unwrap_or_default(),
            automation_enabled: r.automation.as_ref().is_some_and(|a| a.enabled),
            update_grants: r.automation.as_ref().is_some_and(|a| a.update_grants),
            utc_offset_secs: r.automation.as_ref().map_or(0, |a| a.utc_offset_secs),
            max_grant_ttl_secs: r.automation.as_ref().map_or(0, |a| a.max_grant_ttl_secs),
            revoked_grants: r.automation.map(|a| a.revoked).unwrap_or_default(),
            services_in_scope: r.scope.as_ref().is_some_and(|s| {
                !s.allow_service_names.is_empty()
                    || !s.allow_service_labels.is_empty()
                    || !s.allow_stacks.is_empty()
            }),
            allow_service_names: r
                .scope
                .as_ref()
                .map(|s| s.allow_service_names.clone())
                .unwrap_or_default(),
            host: r.host,
            host_required: r.host_required,
        })
    }

    /// Where one container's disk goes, and the engine's totals.
    async fn disk_usage(
        &self,
        request_id: &str,
        container: &str,
    ) -> Result<DiskUsageView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .disk_usage(pb::ContainerRequest {
                request_id: request_id.into(),
                container: container.into(),
            })
            .await?
            .into_inner();
        Ok(DiskUsageView {
            container_id: r.container_id,
            writable_layer_bytes: r.writable_layer_bytes,
            root_fs_bytes: r.root_fs_bytes,
            mounts: r
                .mounts
                .into_iter()
                .map(|m| MountUsageView {
                    kind: m.r#type,
                    source: m.source,
                    destination: m.destination,
                    used_bytes: m.used_bytes,
                    limit_bytes: m.limit_bytes,
                })
                .collect(),
            log_driver: r.log_driver,
            log_max_size: r.log_max_size,
            engine: r.engine.map(|e| EngineDiskView {
                images_bytes: e.images_bytes,
                build_cache_bytes: e.build_cache_bytes,
                reclaimable_bytes: e.reclaimable_bytes,
                images: e.images,
            }),
            engine_error: r.engine_error,
        })
    }

    /// One container's engine events of the last hour, oldest first.
    /// The container's engine events since `since_unix` (0: the last
    /// hour), the newest `limit` (at most 256).
    async fn container_events(
        &self,
        request_id: &str,
        container: &str,
        since_unix: i64,
        limit: u32,
    ) -> Result<Vec<ContainerEvent>, ExecutorError> {
        let r = self
            .inner
            .clone()
            .container_events(pb::ContainerEventsRequest {
                request_id: request_id.into(),
                container: container.into(),
                since_unix,
                limit,
            })
            .await?
            .into_inner();
        Ok(r.events.into_iter().map(container_event).collect())
    }

    /// The executor's event stream from `since_nanos` (0: live only).
    pub async fn watch_events(
        &self,
        since_nanos: i64,
    ) -> Result<tonic::Streaming<pb::ContainerEvent>, ExecutorError> {
        self.events_for("watch", since_nanos).await
    }

    async fn events_for(
        &self,
        request_id: &str,
        since_nanos: i64,
    ) -> Result<tonic::Streaming<pb::ContainerEvent>, ExecutorError> {
        Ok(self
            .inner
            .clone()
            .watch_events(pb::WatchEventsRequest {
                request_id: request_id.into(),
                since_unix_nanos: since_nanos,
            })
            .await?
            .into_inner())
    }

    async fn stats(&self, request_id: &str, container: &str) -> Result<StatsView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .container_stats(pb::ContainerRequest {
                request_id: request_id.into(),
                container: container.into(),
            })
            .await?
            .into_inner();
        Ok(StatsView {
            cpu_percent: r.cpu_percent,
            memory_usage_bytes: r.memory_usage_bytes,
            memory_limit_bytes: r.memory_limit_bytes,
            memory_percent: r.memory_percent,
            network_rx_bytes: r.network_rx_bytes,
            network_tx_bytes: r.network_tx_bytes,
            block_read_bytes: r.block_read_bytes,
            block_write_bytes: r.block_write_bytes,
            pids: r.pids,
        })
    }

    /// The operator-configured HTTP check for `service`.
    async fn check_http(
        &self,
        request_id: &str,
        service: &str,
    ) -> Result<HttpCheckView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .check_http(pb::CheckHttpRequest {
                request_id: request_id.into(),
                service: service.into(),
            })
            .await?
            .into_inner();
        Ok(HttpCheckView {
            service: r.service,
            ok: r.ok,
            status_code: r.status_code,
            latency_ms: r.latency_ms,
            error: r.error,
            body_snippet: r.body_snippet,
        })
    }

    async fn registry_digest(
        &self,
        request_id: &str,
        container: &str,
    ) -> Result<RegistryView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .registry_digest(pb::ContainerRequest {
                request_id: request_id.into(),
                container: container.into(),
            })
            .await?
            .into_inner();
        Ok(swarm::registry_view(r))
    }

    async fn image(&self, request_id: &str, image_id: &str) -> Result<ImageView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .inspect_image(pb::ImageRequest {
                request_id: request_id.into(),
                image_id: image_id.into(),
            })
            .await?
            .into_inner();
        Ok(ImageView {
            present: r.present,
            id: r.id,
            repo_tags: r.repo_tags,
            created: r.created,
            oci_labels: r.oci_labels.into_iter().collect(),
        })
    }
}

/// Log lines as the executor answered them.
fn logs_view(r: pb::LogsResponse) -> LogsView {
    LogsView {
        lines: r
            .lines
            .into_iter()
            .map(|l| LogLineView {
                stream: l.stream,
                text: l.text,
                time_unix_nanos: l.time_unix_nanos,
            })
            .collect(),
        truncated: r.truncated,
        redactions: r.redactions,
    }
}

/// One engine event as the executor streamed it, as the agent keeps it. A
/// Swarm service's or node's event keeps its object's id as the
/// `container_id` and its scope in the action (`service_update`,
/// `node_update`), as an image's event does (`image_pull`).
pub fn container_event(e: pb::ContainerEvent) -> ContainerEvent {
    let (id, action) = match e.scope.as_str() {
        "service" => (e.service_id, format!("service_{}", e.action)),
        "node" => (e.node_id, format!("node_{}", e.action)),
        _ => (e.container_id, e.action),
    };
    let action = EventAction::parse(&action);
    ContainerEvent {
        time_nanos: e.time_unix_nanos,
        container_id: id,
        name: e.name,
        action,
        exit_code: e.has_exit_code.then_some(e.exit_code),
        signal: e.signal,
        health: (!e.health_status.is_empty()).then(|| HealthStatus::parse(&e.health_status)),
        image: e.image,
        project: e.compose_project,
        service: e.compose_service,
        host: String::new(),
    }
}

#[cfg(test)]
mod tests;
