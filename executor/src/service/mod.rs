//! The gRPC service: every call runs the same pipeline, top to bottom,
//! authenticate → validate → resolve → policy (a `Permit`) → approval →
//! execute → shape (redact) → audit.
//!
//! This file holds the pipeline's frame: `begin` (identity), the per-RPC
//! body, `finish` (audit, then answer), and at the bottom the tonic trait,
//! where each RPC is exactly those three lines. The bodies live by kind:
//! `reads` (T0), `writes` (T1/T2, the approval check and the nonce), `shape`
//! (domain values to redacted wire values) and `validate` (bounded input).
//! The single conversion of errors into `tonic::Status` is `to_status`.

mod builds;
mod disk;
mod events;
mod identity;
mod images;
mod reads;
mod shape;
mod swarm;
mod updates;
pub mod validate;
mod writes;

use validate::*;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use drydock_proto::approval::{
    CommitId, ContainerAction, ContainerWrite, ImageId, ServiceAction, ServiceWrite, WriteAction,
};
use drydock_proto::pb;
use tonic::{Request, Response, Status};

use crate::approval::{ApprovalError, ApprovalInput, ApprovalVerifier};
use crate::audit::{self, AuditEntry, AuditError, AuditLog, Decision, NonceRecord};
use crate::config::LimitsConfig;
use crate::docker::{
    ContainerDetails, ContainerSummary, DockerAdapter, DockerError, Health, HealthcheckSpec,
    LogQuery, LogStream,
};
use crate::grants::{GrantInput, GrantRefusal, GrantVerifier};
use crate::http_check::{self, HttpTarget};
use crate::policy::{Permit, Policy, PolicyError, Read, ResolvedTarget, Tier, WritePermit};
use crate::ratelimit::{Admission, RateLimiter};
use crate::redact;

/// Everything that can stop a call, each mapped to one status code.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{0}")]
    Unauthenticated(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    #[error(transparent)]
    Grant(#[from] GrantRefusal),
    #[error(transparent)]
    Docker(#[from] DockerError),
    /// A container whose image is not a tag of an allowed registry.
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryRefusal),
    #[error("audit log unavailable: {0}")]
    Audit(#[from] AuditError),
    /// A container outside the selectors: reported exactly like a missing
    /// one, so reads cannot probe what exists; the audit keeps the reason.
    #[error("container {container} not found")]
    Invisible { container: String, why: PolicyError },
    /// A Swarm service that is missing, or outside `targets.services`
    /// (`why`): the caller is told the same either way.
    #[error("service {service} not found")]
    ServiceNotFound {
        service: String,
        why: Option<PolicyError>,
    },
    /// Something the operator did not configure (an HTTP check).
    #[error("{0}")]
    NotConfigured(String),
    /// Over the caller's rate limit; nothing was done.
    #[error("rate limit exceeded for {0}; slow down")]
    RateLimited(String),
    /// Too many event streams open for one identity.
    #[error("{0}")]
    TooManyStreams(String),
    /// A build, or an update to a built image, that cannot go ahead.
    #[error(transparent)]
    Build(#[from] builds::BuildRefusal),
}

impl From<crate::build::git::GitError> for ExecError {
    fn from(e: crate::build::git::GitError) -> ExecError {
        ExecError::Build(builds::BuildRefusal::Source(e))
    }
}

impl ExecError {
    fn code(&self) -> tonic::Code {
        use tonic::Code;
        match self {
            ExecError::Unauthenticated(_) => Code::Unauthenticated,
            ExecError::InvalidArgument(_) => Code::InvalidArgument,
            ExecError::Policy(_) | ExecError::Registry(_) => Code::PermissionDenied,
            ExecError::Approval(_) | ExecError::Grant(_) => Code::FailedPrecondition,
            ExecError::Docker(DockerError::NotFound(_)) => Code::NotFound,
            ExecError::Docker(DockerError::Timeout { .. }) => Code::DeadlineExceeded,
            ExecError::Docker(DockerError::Unavailable(_)) => Code::Unavailable,
            ExecError::Docker(DockerError::Rejected { .. }) => Code::FailedPrecondition,
            ExecError::Docker(DockerError::Ambiguous(_)) => Code::InvalidArgument,
            ExecError::Docker(DockerError::NotSwarmManager(_)) => Code::FailedPrecondition,
            ExecError::Audit(_) => Code::Unavailable,
            ExecError::Invisible { .. } | ExecError::ServiceNotFound { .. } => Code::NotFound,
            ExecError::NotConfigured(_) => Code::NotFound,
            ExecError::RateLimited(_) | ExecError::TooManyStreams(_) => Code::ResourceExhausted,
            ExecError::Build(b) => b.code(),
        }
    }

    /// What the audit log records: the whole truth, including what the
    /// caller is not told.
    fn audit_reason(&self) -> String {
        match self {
            ExecError::Invisible { why, .. }
            | ExecError::ServiceNotFound { why: Some(why), .. } => {
                format!("hidden from the caller as not found: {why}")
            }
            other => other.to_string(),
        }
    }

    /// `Denied` for refusals by drydock's own rules, `Error` for failures.
    fn decision(&self) -> Decision {
        match self {
            ExecError::Unauthenticated(_)
            | ExecError::InvalidArgument(_)
            | ExecError::Policy(_)
            | ExecError::Registry(_)
            | ExecError::Approval(_)
            | ExecError::Grant(_)
            | ExecError::Invisible { .. }
            | ExecError::ServiceNotFound { .. }
            | ExecError::NotConfigured(_)
            | ExecError::RateLimited(_)
            | ExecError::TooManyStreams(_) => Decision::Denied,
            ExecError::Build(b) if !b.is_failure() => Decision::Denied,
            _ => Decision::Error,
        }
    }
}

pub struct ExecutorService {
    docker: DockerAdapter,
    policy: Policy,
    approvals: ApprovalVerifier,
    grants: GrantVerifier,
    audit: Arc<AuditLog>,
    allowed_clients: HashSet<String>,
    limits: LimitsConfig,
    http_checks: BTreeMap<String, HttpTarget>,
    http_timeout: Duration,
    rate: Arc<RateLimiter>,
    /// Event streams open per identity.
    streams: Arc<std::sync::Mutex<HashMap<String, usize>>>,
    /// Fires at shutdown: open event streams end, so shutdown can finish.
    shutdown: tokio::sync::watch::Receiver<bool>,
    /// Which environment values an inspect shows (`redact.env`).
    env_policy: redact::EnvPolicy,
    /// The registries an update may pull from, and how it is held.
    registries: Arc<crate::registry::Registries>,
    update: crate::registry::UpdateConfig,
    /// The contexts a build may read, and its limits.
    build: crate::build::BuildConfig,
    /// One build source read at a time (each holds a context in memory).
    build_gate: tokio::sync::Semaphore,
    /// The key of the environment values' keyed hashes, read from the
    /// audit store at first use (its HMAC state is computed once).
    env_key: std::sync::OnceLock<ring::hmac::Key>,
}

/// One call in flight: who made it and what will be audited.
struct Call {
    started: Instant,
    caller: Result<String, String>,
    /// Refused by the rate limiter; `Some(false)` means this refusal is
    /// counted, not written (a summary row covers it).
    limited: Option<bool>,
    /// Refusals of this caller counted since the last summary.
    suppressed: u64,
    entry: AuditEntry,
}

impl Call {
    /// What the caller asked for, recorded before any check so that even an
    /// unauthenticated or malformed call leaves a useful audit row.
    fn record(&mut self, request_id: &str, target: &str) {
        self.entry.request_id = truncate_for_audit(request_id);
        self.entry.target = truncate_for_audit(target);
    }

    /// What every write does first, on a container or a service, in this
    /// order: what was asked is recorded (so even a refusal's row says it),
    /// the caller must be authenticated and not rate limited, the request
    /// id well formed, and exactly one of an approval and a grant may come;
    /// the key id that signed it goes into the row.
    fn open_write(
        &mut self,
        request_id: &str,
        target: &str,
        approval: Option<&pb::Approval>,
        grant: Option<&pb::Grant>,
    ) -> Result<(), ExecError> {
        self.record(request_id, target);
        self.authenticated()?;
        validate_request_id(request_id)?;
        if approval.is_some() && grant.is_some() {
            return Err(GrantRefusal::Both.into());
        }
        // Every signer an approval names (its cosigners too), as claimed:
        // a refusal's row says who was claimed to have signed.
        let signers = approval.map(|a| crate::approval::ApprovalInput::of(a).signers());
        if let Some(key_id) = signers.or(grant.map(|g| g.key_id.clone())) {
            self.entry.key_id = truncate_for_audit(&redact::neutralise_controls(&key_id));
        }
        Ok(())
    }

    fn authenticated(&self) -> Result<(), ExecError> {
        if self.limited.is_some() {
            return Err(ExecError::RateLimited(self.entry.caller.clone()));
        }
        self.caller
            .as_ref()
            .map(|_| ())
            .map_err(|e| ExecError::Unauthenticated(e.clone()))
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Everything the service is made of, assembled at start-up.
pub struct ServiceParts {
    pub docker: DockerAdapter,
    pub policy: Policy,
    pub approvals: ApprovalVerifier,
    pub grants: GrantVerifier,
    pub audit: Arc<AuditLog>,
    pub allowed_clients: HashSet<String>,
    pub limits: LimitsConfig,
    pub http_checks: BTreeMap<String, HttpTarget>,
    pub http_timeout: Duration,
    pub rate: Arc<RateLimiter>,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    pub env_policy: redact::EnvPolicy,
    pub registries: crate::registry::Registries,
    pub update: crate::registry::UpdateConfig,
    pub build: crate::build::BuildConfig,
}

impl ExecutorService {
    pub fn new(p: ServiceParts) -> ExecutorService {
        ExecutorService {
            docker: p.docker,
            policy: p.policy,
            approvals: p.approvals,
            grants: p.grants,
            audit: p.audit,
            allowed_clients: p.allowed_clients,
            limits: p.limits,
            http_checks: p.http_checks,
            http_timeout: p.http_timeout,
            rate: p.rate,
            streams: Arc::default(),
            shutdown: p.shutdown,
            env_policy: p.env_policy,
            registries: Arc::new(p.registries),
            update: p.update,
            build: p.build,
            build_gate: tokio::sync::Semaphore::new(1),
            env_key: std::sync::OnceLock::new(),
        }
    }

    fn env_key(&self) -> Result<&ring::hmac::Key, ExecError> {
        if let Some(key) = self.env_key.get() {
            return Ok(key);
        }
        let key = self.audit.env_hash_key()?;
        Ok(self
            .env_key
            .get_or_init(|| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key)))
    }

    pub fn allowed_clients(&self) -> HashSet<String> {
        self.allowed_clients.clone()
    }

    /// Step 1 of the pipeline. The TLS layer already required a certificate
    /// from the configured CA; here its identity must be on the allow list.
    fn begin<T>(&self, request: &Request<T>, action: &str, tier: Tier) -> Call {
        // From here on this call is audited by the pipeline itself.
        if let Some(h) = request.extensions().get::<crate::prehandler::Handled>() {
            h.mark();
        }
        let certs = request.peer_certs();
        let (caller_name, caller) = match Self::check_identity(
            &self.allowed_clients,
            certs.as_deref().map(Vec::as_slice),
        ) {
            Ok(id) => (id.clone(), Ok(id)),
            Err((name, why)) => (name, Err(why)),
        };
        let limited = match self.rate.admit(&caller_name) {
            Admission::Allowed => None,
            Admission::Limited { audit } => Some(audit),
        };
        // Counted refusals are summarized by the next row this caller gets.
        let suppressed = if limited == Some(false) {
            0
        } else {
            self.rate.take_suppressed(&caller_name)
        };
        Call {
            started: Instant::now(),
            caller,
            limited,
            suppressed,
            entry: AuditEntry {
                caller: caller_name,
                action: action.to_string(),
                tier: tier as u32,
                ..Default::default()
            },
        }
    }

    /// Step 7: audit the outcome, then answer.
    // `tonic::Status` is large, but it is the type tonic's handlers return.
    #[allow(clippy::result_large_err)]
    async fn finish<T>(
        &self,
        call: Call,
        result: Result<T, ExecError>,
    ) -> Result<Response<T>, Status> {
        finish_call(self.audit.clone(), call, result).await
    }

    /// Every container write RPC: the preamble, then authorise (which
    /// spends the approval or the grant's use), then run the write to
    /// completion. `write` is what was asked for, or why it cannot be: a
    /// malformed part is refused after the preamble, so an unauthenticated
    /// caller learns nothing from it.
    async fn write_rpc(
        &self,
        request: Request<pb::WriteRequest>,
        action: ContainerAction,
        write: Result<ContainerWrite, ExecError>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let action = WriteAction::from(action);
        let mut call = self.begin(&request, action.as_str(), Policy::tier(action));
        let req = request.into_inner();
        let authorized = match call
            .open_write(
                &req.request_id,
                &req.container,
                req.approval.as_ref(),
                req.grant.as_ref(),
            )
            .and(write)
        {
            Ok(write) => self.authorize_write(&mut call, req, write).await,
            Err(e) => Err(e),
        };
        match authorized {
            Ok(write) => self.run_write(call, write).await,
            Err(e) => self.finish(call, Err(e)).await,
        }
    }

    /// `RollbackContainer`: the write path, with the image the approval
    /// must name; approval only.
    async fn rollback_rpc(
        &self,
        request: Request<pb::RollbackRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let to_image = content_id(
            &request.get_ref().image_id,
            "image_id",
            "an image's content id",
            "a rollback names the image to run by content, never by name or tag",
        );
        let request = request.map(|req| approval_only(req.request_id, req.container, req.approval));
        let write = to_image.map(|to_image| ContainerWrite::Rollback { to_image });
        self.write_rpc(request, ContainerAction::Rollback, write)
            .await
    }
}

/// Audit the outcome, then answer. If the audit row cannot be written the
/// caller gets an error, never an unaudited success.
#[allow(clippy::result_large_err)]
async fn finish_call<T>(
    audit: Arc<AuditLog>,
    mut call: Call,
    result: Result<T, ExecError>,
) -> Result<Response<T>, Status> {
    call.entry.duration_ms = call.started.elapsed().as_millis() as u64;
    if call.limited == Some(false) {
        // Counted for the next summary row; a flood cannot fill the disk.
        return result.map(Response::new).map_err(to_status);
    }
    let summary = (call.suppressed > 0)
        .then(|| crate::ratelimit::summary_entry(&call.entry.caller, call.suppressed));
    match &result {
        Ok(_) => {
            call.entry.decision = Decision::Allowed;
            call.entry.code = audit::Code::of(tonic::Code::Ok);
        }
        Err(e) => {
            call.entry.decision = e.decision();
            call.entry.code = audit::Code::of(e.code());
            call.entry.reason = e.audit_reason();
        }
    }
    let mut entry = call.entry;
    redact::withhold_in(&mut [&mut entry.reason, &mut entry.result, &mut entry.input]);
    // Only answered reads are deferred: a refusal's row (someone probing)
    // is committed before the refusal is answered.
    if answered_read(&entry) && summary.is_none() {
        // Its line is at `debug`: copied only when that level is on.
        let logged = tracing::enabled!(tracing::Level::DEBUG).then(|| entry.clone());
        // A read's row is queued before the answer leaves and committed
        // straight after it (the rule is in audit/commit.rs).
        match audit.append_deferred(entry) {
            Ok(()) => {
                if let Some(logged) = logged {
                    log_call(None, &logged);
                }
                return result.map(Response::new).map_err(to_status);
            }
            Err(back) => entry = *back,
        }
    }
    // SQLite with fsync: on a blocking thread, never on the async workers
    // that serve the other calls.
    let appended = tokio::task::spawn_blocking(move || {
        if let Some(summary) = summary {
            if let Err(err) = audit.append(&summary) {
                tracing::error!(error = %err, "audit write failed for a rate-limit summary");
            }
        }
        let seq = audit.append(&entry);
        (seq, entry)
    })
    .await;
    let (appended, e) = match appended {
        Ok((seq, entry)) => (seq, entry),
        Err(join) => {
            tracing::error!(error = %join, "audit task failed");
            return Err(Status::unavailable(
                "audit log unavailable; the call's outcome could not be recorded",
            ));
        }
    };
    match appended {
        Ok(seq) => log_call(Some(seq), &e),
        Err(err) => {
            tracing::error!(request_id = %e.request_id, action = %e.action, error = %err, "audit write failed");
            return Err(Status::unavailable(
                "audit log unavailable; the call's outcome could not be recorded",
            ));
        }
    }
    result.map(Response::new).map_err(to_status)
}

/// One log line per call; `audit_seq` is absent for a read whose row is
/// still queued.
/// A read that was answered: the one kind of row that may be committed
/// just after its answer (`audit/commit.rs`), and logged at `debug`.
fn answered_read(e: &AuditEntry) -> bool {
    e.tier == Tier::Read as u32 && e.decision == Decision::Allowed
}

/// Every call's line in the log: at `info` for a write or a refusal, at
/// `debug` for an answered read (its audit row is the record; a line per
/// read at info cost as much as the row).
fn log_call(seq: Option<i64>, e: &AuditEntry) {
    macro_rules! call_line {
        ($level:ident) => {
            tracing::$level!(
                audit_seq = seq, request_id = %e.request_id, caller = %e.caller, action = %e.action,
                container_id = %e.container_id, decision = %e.decision, code = %e.code, reason = %e.reason,
                duration_ms = e.duration_ms, "call"
            )
        };
    }
    if answered_read(e) {
        call_line!(debug);
    } else {
        call_line!(info);
    }
}

/// The one place errors become gRPC statuses. Messages are precise but do not
/// include engine internals beyond what the error variant carries.
fn to_status(e: ExecError) -> Status {
    Status::new(e.code(), redact::withhold_known(&e.to_string()).0)
}

#[tonic::async_trait]
impl pb::executor_server::Executor for ExecutorService {
    async fn list_containers(
        &self,
        request: Request<pb::ListContainersRequest>,
    ) -> Result<Response<pb::ListContainersResponse>, Status> {
        let mut call = self.begin(&request, "list", Tier::Read);
        let result = self.list(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn inspect_container(
        &self,
        request: Request<pb::ContainerRequest>,
    ) -> Result<Response<pb::InspectContainerResponse>, Status> {
        let mut call = self.begin(&request, "inspect", Tier::Read);
        let result = self.inspect(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn container_logs(
        &self,
        request: Request<pb::LogsRequest>,
    ) -> Result<Response<pb::LogsResponse>, Status> {
        let mut call = self.begin(&request, "logs", Tier::Read);
        let result = self.logs(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn container_health(
        &self,
        request: Request<pb::ContainerRequest>,
    ) -> Result<Response<pb::HealthResponse>, Status> {
        let mut call = self.begin(&request, "health", Tier::Read);
        let result = self.health(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn get_policy(
        &self,
        request: Request<pb::GetPolicyRequest>,
    ) -> Result<Response<pb::PolicyResponse>, Status> {
        let mut call = self.begin(&request, "get_policy", Tier::Read);
        let result = self.get_policy(&mut call, request.into_inner());
        self.finish(call, result).await
    }

    async fn start_container(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        self.write_rpc(request, ContainerAction::Start, Ok(ContainerWrite::Start))
            .await
    }

    async fn restart_container(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        self.write_rpc(
            request,
            ContainerAction::Restart,
            Ok(ContainerWrite::Restart),
        )
        .await
    }

    async fn stop_container(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        self.write_rpc(request, ContainerAction::Stop, Ok(ContainerWrite::Stop))
            .await
    }

    async fn rollback_container(
        &self,
        request: Request<pb::RollbackRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        self.rollback_rpc(request).await
    }

    async fn registry_digest(
        &self,
        request: Request<pb::ContainerRequest>,
    ) -> Result<Response<pb::RegistryDigestResponse>, Status> {
        let mut call = self.begin(&request, "registry_digest", Tier::Read);
        let result = self.registry_digest(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn update_container(
        &self,
        request: Request<pb::UpdateRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        self.update_rpc(request).await
    }

    async fn build_source(
        &self,
        request: Request<pb::BuildSourceRequest>,
    ) -> Result<Response<pb::BuildSourceResponse>, Status> {
        let mut call = self.begin(&request, "build_source", Tier::Read);
        let result = self.build_source(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn build_image(
        &self,
        request: Request<pb::BuildRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let commit = commit_argument(&request.get_ref().commit);
        let request = request.map(|req| approval_only(req.request_id, req.container, req.approval));
        let write = commit.map(|commit| ContainerWrite::Build { commit });
        self.write_rpc(request, ContainerAction::Build, write).await
    }

    async fn inspect_image(
        &self,
        request: Request<pb::ImageRequest>,
    ) -> Result<Response<pb::ImageResponse>, Status> {
        let mut call = self.begin(&request, "inspect_image", Tier::Read);
        let result = self.inspect_image(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn container_stats(
        &self,
        request: Request<pb::ContainerRequest>,
    ) -> Result<Response<pb::StatsResponse>, Status> {
        let mut call = self.begin(&request, "stats", Tier::Read);
        let result = self.stats(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn check_http(
        &self,
        request: Request<pb::CheckHttpRequest>,
    ) -> Result<Response<pb::CheckHttpResponse>, Status> {
        let mut call = self.begin(&request, "check_http", Tier::Read);
        let result = self.check_http(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn container_events(
        &self,
        request: Request<pb::ContainerEventsRequest>,
    ) -> Result<Response<pb::ContainerEventsResponse>, Status> {
        let mut call = self.begin(&request, "events", Tier::Read);
        let result = self.container_events(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn disk_usage(
        &self,
        request: Request<pb::ContainerRequest>,
    ) -> Result<Response<pb::DiskUsageResponse>, Status> {
        let mut call = self.begin(&request, "disk_usage", Tier::Read);
        let result = self.disk_usage(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn list_services(
        &self,
        request: Request<pb::ListServicesRequest>,
    ) -> Result<Response<pb::ListServicesResponse>, Status> {
        let mut call = self.begin(&request, "list_services", Tier::Read);
        let result = self.list_services(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn inspect_service(
        &self,
        request: Request<pb::ServiceRequest>,
    ) -> Result<Response<pb::InspectServiceResponse>, Status> {
        let mut call = self.begin(&request, "inspect_service", Tier::Read);
        let result = self.inspect_service(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn service_tasks(
        &self,
        request: Request<pb::ServiceRequest>,
    ) -> Result<Response<pb::ServiceTasksResponse>, Status> {
        let mut call = self.begin(&request, "service_tasks", Tier::Read);
        let result = self.service_tasks(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn service_logs(
        &self,
        request: Request<pb::ServiceLogsRequest>,
    ) -> Result<Response<pb::LogsResponse>, Status> {
        let mut call = self.begin(&request, "service_logs", Tier::Read);
        let result = self.service_logs(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn list_nodes(
        &self,
        request: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        let mut call = self.begin(&request, "list_nodes", Tier::Read);
        let result = self.list_nodes(&mut call, request.into_inner()).await;
        self.finish(call, result).await
    }

    async fn force_update_service(
        &self,
        request: Request<pb::ServiceWriteRequest>,
    ) -> Result<Response<pb::ServiceWriteResponse>, Status> {
        let write = Ok(ServiceWrite::ForceUpdate);
        self.service_write_rpc(request, ServiceAction::ForceUpdate, write)
            .await
    }

    async fn rollback_service(
        &self,
        request: Request<pb::ServiceWriteRequest>,
    ) -> Result<Response<pb::ServiceWriteResponse>, Status> {
        let write = Ok(ServiceWrite::Rollback);
        self.service_write_rpc(request, ServiceAction::Rollback, write)
            .await
    }

    async fn service_registry_digest(
        &self,
        request: Request<pb::ServiceRequest>,
    ) -> Result<Response<pb::RegistryDigestResponse>, Status> {
        let mut call = self.begin(&request, "service_registry_digest", Tier::Read);
        let result = self
            .service_registry_digest(&mut call, request.into_inner())
            .await;
        self.finish(call, result).await
    }

    async fn update_service(
        &self,
        request: Request<pb::ServiceUpdateRequest>,
    ) -> Result<Response<pb::ServiceWriteResponse>, Status> {
        self.update_service_rpc(request).await
    }

    type WatchEventsStream = events::EventStream;

    async fn watch_events(
        &self,
        request: Request<pb::WatchEventsRequest>,
    ) -> Result<Response<Self::WatchEventsStream>, Status> {
        let mut call = self.begin(&request, "watch_events", Tier::Read);
        let result = self.watch_events(&mut call, request.into_inner());
        self.finish(call, result).await
    }
}
