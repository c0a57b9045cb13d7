//! The gRPC service: every call runs the same pipeline, top to bottom,
//! authenticate → validate → resolve → policy (a `Permit`) → approval →
//! execute → shape (redact) → audit. The single conversion of errors into
//! `tonic::Status` is at the bottom of this file.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use tonic::{Request, Response, Status};

use crate::approval::{ApprovalError, ApprovalInput, ApprovalVerifier};
use crate::audit::{AuditEntry, AuditError, AuditLog};
use crate::config::LimitsConfig;
use crate::docker::{
    ContainerDetails, DockerAdapter, DockerError, Health, HealthcheckSpec, LogStream,
};
use crate::policy::{Policy, PolicyError, Tier};
use crate::redact;

const MAX_REQUEST_ID_LEN: usize = 128;
const MAX_CONTAINER_REF_LEN: usize = 128;

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
    Docker(#[from] DockerError),
    #[error("audit log unavailable: {0}")]
    Audit(#[from] AuditError),
    /// A container outside the selectors: reported exactly like a missing
    /// one, so reads cannot probe what exists; the audit keeps the reason.
    #[error("container {container} not found")]
    Invisible { container: String, why: PolicyError },
}

impl ExecError {
    fn code(&self) -> tonic::Code {
        use tonic::Code;
        match self {
            ExecError::Unauthenticated(_) => Code::Unauthenticated,
            ExecError::InvalidArgument(_) => Code::InvalidArgument,
            ExecError::Policy(_) => Code::PermissionDenied,
            ExecError::Approval(_) => Code::FailedPrecondition,
            ExecError::Docker(DockerError::NotFound(_)) => Code::NotFound,
            ExecError::Docker(DockerError::Timeout { .. }) => Code::DeadlineExceeded,
            ExecError::Docker(DockerError::Unavailable(_)) => Code::Unavailable,
            ExecError::Docker(DockerError::Rejected { .. }) => Code::FailedPrecondition,
            ExecError::Audit(_) => Code::Unavailable,
            ExecError::Invisible { .. } => Code::NotFound,
        }
    }

    /// What the audit log records: the whole truth, including what the
    /// caller is not told.
    fn audit_reason(&self) -> String {
        match self {
            ExecError::Invisible { why, .. } => {
                format!("hidden from the caller as not found: {why}")
            }
            other => other.to_string(),
        }
    }

    /// `denied` for refusals by drydock's own rules, `error` for failures.
    fn decision(&self) -> &'static str {
        match self {
            ExecError::Unauthenticated(_)
            | ExecError::InvalidArgument(_)
            | ExecError::Policy(_)
            | ExecError::Approval(_) => "denied",
            _ => "error",
        }
    }
}

pub struct ExecutorService {
    docker: DockerAdapter,
    policy: Policy,
    approvals: ApprovalVerifier,
    audit: Arc<AuditLog>,
    allowed_clients: HashSet<String>,
    limits: LimitsConfig,
}

/// One call in flight: who made it and what will be audited.
struct Call {
    started: Instant,
    caller: Result<String, String>,
    entry: AuditEntry,
}

impl Call {
    /// What the caller asked for, recorded before any check so that even an
    /// unauthenticated or malformed call leaves a useful audit row.
    fn record(&mut self, request_id: &str, target: &str) {
        self.entry.request_id = truncate_for_audit(request_id);
        self.entry.target = truncate_for_audit(target);
    }

    fn authenticated(&self) -> Result<(), ExecError> {
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

/// The client certificate's common name is its identity.
pub fn identity_from_cert(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    Some(cn)
}

fn validate_request_id(id: &str) -> Result<(), ExecError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_REQUEST_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ExecError::InvalidArgument(format!(
            "request_id must be 1 to {MAX_REQUEST_ID_LEN} characters of [A-Za-z0-9-_.:]"
        )))
    }
}

/// Docker names: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, ids: hex. A leading `/` is
/// accepted because inspect output carries one.
fn validate_container_ref(name: &str) -> Result<(), ExecError> {
    let body = name.strip_prefix('/').unwrap_or(name);
    let ok = !body.is_empty()
        && body.len() <= MAX_CONTAINER_REF_LEN
        && body.as_bytes()[0].is_ascii_alphanumeric()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ExecError::InvalidArgument(format!(
            "container must be a container name or id (1 to {MAX_CONTAINER_REF_LEN} characters of [a-zA-Z0-9_.-])"
        )))
    }
}

fn truncate_for_audit(s: &str) -> String {
    const MAX: usize = 512;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

impl ExecutorService {
    pub fn new(
        docker: DockerAdapter,
        policy: Policy,
        approvals: ApprovalVerifier,
        audit: Arc<AuditLog>,
        allowed_clients: impl IntoIterator<Item = String>,
        limits: LimitsConfig,
    ) -> ExecutorService {
        ExecutorService {
            docker,
            policy,
            approvals,
            audit,
            allowed_clients: allowed_clients.into_iter().collect(),
            limits,
        }
    }

    /// Step 1 of the pipeline. The TLS layer already required a certificate
    /// from the configured CA; here its identity must be on the allow list.
    fn begin<T>(&self, request: &Request<T>, action: &str, tier: Tier) -> Call {
        let caller = match request
            .peer_certs()
            .as_ref()
            .and_then(|c| c.first().cloned())
        {
            None => Err("no client certificate presented".to_string()),
            Some(cert) => match identity_from_cert(cert.as_ref()) {
                None => Err("client certificate has no common name".to_string()),
                Some(id) if self.allowed_clients.contains(&id) => Ok(id),
                Some(id) => Err(format!(
                    "client identity `{id}` is not on the executor's allow list"
                )),
            },
        };
        let caller_name = match &caller {
            Ok(id) => id.clone(),
            Err(_) => request
                .peer_certs()
                .as_ref()
                .and_then(|c| c.first().and_then(|d| identity_from_cert(d.as_ref())))
                .unwrap_or_else(|| "unknown".to_string()),
        };
        Call {
            started: Instant::now(),
            caller,
            entry: AuditEntry {
                caller: caller_name,
                action: action.to_string(),
                tier: tier as u32,
                ..Default::default()
            },
        }
    }

    /// Step 7: audit the outcome, then answer. If the audit row cannot be
    /// written the caller gets an error, never an unaudited success.
    // `tonic::Status` is large, but it is the type tonic's handlers return.
    #[allow(clippy::result_large_err)]
    fn finish<T>(
        &self,
        mut call: Call,
        result: Result<T, ExecError>,
    ) -> Result<Response<T>, Status> {
        call.entry.duration_ms = call.started.elapsed().as_millis() as u64;
        match &result {
            Ok(_) => {
                call.entry.decision = "allowed".into();
                call.entry.code = "OK".into();
            }
            Err(e) => {
                call.entry.decision = e.decision().into();
                call.entry.code = format!("{:?}", e.code());
                call.entry.reason = e.audit_reason();
            }
        }
        let e = &call.entry;
        match self.audit.append(e) {
            Ok(seq) => {
                tracing::info!(
                    audit_seq = seq, request_id = %e.request_id, caller = %e.caller, action = %e.action,
                    container_id = %e.container_id, decision = %e.decision, code = %e.code, reason = %e.reason,
                    duration_ms = e.duration_ms, "call"
                );
            }
            Err(err) => {
                tracing::error!(request_id = %e.request_id, action = %e.action, error = %err, "audit write failed");
                return Err(Status::unavailable(
                    "audit log unavailable; the call was not completed",
                ));
            }
        }
        result.map(Response::new).map_err(to_status)
    }

    /// Resolve and permit a read; a target outside the selectors looks
    /// exactly like a missing one.
    async fn permit_read(
        &self,
        call: &mut Call,
        container: &str,
    ) -> Result<crate::policy::Permit, ExecError> {
        validate_container_ref(container)?;
        let target = self.docker.resolve(container).await?;
        call.entry.container_id = target.id.clone();
        self.policy
            .permit_read(&target)
            .map_err(|why| ExecError::Invisible {
                container: container.to_string(),
                why,
            })
    }

    async fn inspect(
        &self,
        call: &mut Call,
        req: pb::ContainerRequest,
    ) -> Result<pb::InspectContainerResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let permit = self.permit_read(call, &req.container).await?;
        let details = self.docker.inspect(&permit).await?;
        let shaped = shape_inspect(details);
        call.entry.result = format!(
            "state={} redactions={}",
            shaped
                .state
                .as_ref()
                .map(|s| s.status.as_str())
                .unwrap_or(""),
            shaped.redactions
        );
        Ok(shaped)
    }

    async fn health(
        &self,
        call: &mut Call,
        req: pb::ContainerRequest,
    ) -> Result<pb::HealthResponse, ExecError> {
        let inspected = self.inspect(call, req).await?;
        call.entry.result = format!(
            "health={}",
            inspected
                .health
                .as_ref()
                .map(|h| h.status.as_str())
                .unwrap_or("none")
        );
        Ok(pb::HealthResponse {
            container_id: inspected.id,
            health: inspected.health,
            healthcheck: inspected.healthcheck,
            redactions: inspected.redactions,
        })
    }

    async fn logs(
        &self,
        call: &mut Call,
        req: pb::LogsRequest,
    ) -> Result<pb::LogsResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.entry.input = format!("tail={}", req.tail);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        if req.tail > self.limits.logs_max_lines {
            return Err(ExecError::InvalidArgument(format!(
                "tail {} exceeds the executor's limit of {} lines",
                req.tail, self.limits.logs_max_lines
            )));
        }
        let tail = if req.tail == 0 {
            self.limits.logs_default_tail
        } else {
            req.tail
        };
        let permit = self.permit_read(call, &req.container).await?;
        let (raw, truncated) = self
            .docker
            .logs(&permit, tail, self.limits.logs_max_bytes as usize)
            .await?;
        let mut redactions = 0;
        let lines = raw
            .into_iter()
            .map(|l| {
                let (text, n) = redact::shape_log_line(&l.bytes);
                redactions += n;
                pb::LogLine {
                    stream: if l.stream == LogStream::Stderr {
                        "stderr"
                    } else {
                        "stdout"
                    }
                    .into(),
                    text,
                }
            })
            .collect::<Vec<_>>();
        call.entry.result = format!(
            "lines={} truncated={truncated} redactions={redactions}",
            lines.len()
        );
        Ok(pb::LogsResponse {
            lines,
            truncated,
            redactions,
        })
    }

    async fn list(
        &self,
        call: &mut Call,
        req: pb::ListContainersRequest,
    ) -> Result<pb::ListContainersResponse, ExecError> {
        call.record(&req.request_id, "");
        call.entry.input = format!("all={}", req.all);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let containers: Vec<pb::ContainerSummary> = self
            .docker
            .list(req.all)
            .await?
            .into_iter()
            .filter(|c| self.policy.target_allowed(&c.name, &c.labels))
            .map(|c| pb::ContainerSummary {
                id: c.id,
                name: redact::neutralise_controls(&c.name),
                image: redact::neutralise_controls(&c.image),
                state: c.state,
                status: c.status,
                labels: c
                    .labels
                    .into_iter()
                    .map(|(k, v)| {
                        (
                            redact::neutralise_controls(&k),
                            redact::redact_text(&redact::neutralise_controls(&v)).0,
                        )
                    })
                    .collect(),
            })
            .collect();
        call.entry.result = format!("containers={}", containers.len());
        Ok(pb::ListContainersResponse { containers })
    }

    fn get_policy(
        &self,
        call: &mut Call,
        req: pb::GetPolicyRequest,
    ) -> Result<pb::PolicyResponse, ExecError> {
        call.record(&req.request_id, "");
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let action = |name: &str, a: WriteAction| pb::ActionPolicy {
            action: name.into(),
            enabled: self.policy.action_enabled(a),
            tier: Tier::Change as u32,
            approval_required: true,
        };
        Ok(pb::PolicyResponse {
            actions: vec![
                action("start", WriteAction::Start),
                action("restart", WriteAction::Restart),
            ],
            logs_max_lines: self.limits.logs_max_lines,
            logs_max_bytes: self.limits.logs_max_bytes,
            approver_ids: self.approvals.approver_ids(),
        })
    }

    /// The write path. Order matters: the target is resolved to its id now
    /// (so a recreated container does not match an old approval), policy
    /// comes before the approval (a disabled action is refused whatever was
    /// signed), and the nonce is consumed last, just before Docker is called,
    /// so a refused call does not burn a valid approval.
    async fn write(
        &self,
        call: &mut Call,
        req: pb::WriteRequest,
        action: WriteAction,
    ) -> Result<pb::WriteResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        validate_container_ref(&req.container)?;
        if let Some(a) = &req.approval {
            call.entry.key_id = truncate_for_audit(&a.key_id);
        }
        let target = self.docker.resolve(&req.container).await?;
        call.entry.container_id = target.id.clone();
        let permit = self.policy.permit_write(action, &target)?;
        let input = req.approval.as_ref().map(|a| ApprovalInput {
            claims: &a.claims,
            signature: &a.signature,
            key_id: &a.key_id,
        });
        let approved =
            self.approvals
                .verify(input, action, &target, &req.request_id, unix_now())?;
        call.entry.approval_id = truncate_for_audit(&approved.claims.approval_id);
        call.entry.input = format!(
            "plan_digest={} expires_at={}",
            truncate_for_audit(&approved.claims.plan_digest),
            approved.claims.expires_at
        );
        self.audit
            .consume_nonce(
                &approved.claims.nonce,
                &approved.claims.approval_id,
                approved.claims.expires_at,
            )
            .map_err(|e| match e {
                AuditError::NonceReplayed => ExecError::Approval(ApprovalError::Replayed),
                other => ExecError::Audit(other),
            })?;
        match action {
            WriteAction::Restart => self.docker.restart(&permit).await?,
            WriteAction::Start => self.docker.start(&permit).await?,
        }
        call.entry.result = format!("{action} done");
        Ok(pb::WriteResponse {
            container_id: target.id,
            action: action.as_str().into(),
            approval_id: approved.claims.approval_id,
        })
    }
}

fn shape_health(h: Health) -> pb::HealthState {
    pb::HealthState {
        status: h.status,
        failing_streak: h.failing_streak,
        log: h
            .log
            .into_iter()
            .map(|p| pb::HealthLogEntry {
                exit_code: p.exit_code,
                output: redact::shape_multiline(&p.output).0,
                start: p.start,
                end: p.end,
            })
            .collect(),
    }
}

fn shape_healthcheck(h: HealthcheckSpec) -> pb::HealthcheckConfig {
    pb::HealthcheckConfig {
        test: h
            .test
            .iter()
            .map(|t| redact::redact_text(&redact::neutralise_controls(t)).0)
            .collect(),
        interval_ms: h.interval.as_millis() as u64,
        timeout_ms: h.timeout.as_millis() as u64,
        retries: h.retries,
        start_period_ms: h.start_period.as_millis() as u64,
    }
}

/// Step 6 for inspect: nothing secret or terminal-hostile leaves.
fn shape_inspect(d: ContainerDetails) -> pb::InspectContainerResponse {
    let mut redactions = 0;
    let env = d
        .env
        .iter()
        .map(|e| {
            let (line, n) = redact::redact_env(e);
            redactions += n;
            line
        })
        .collect();
    let labels = d
        .labels
        .into_iter()
        .map(|(k, v)| {
            let (v, n) = if redact::is_secret_key(&k) && !v.is_empty() {
                (redact::REDACTED.to_string(), 1)
            } else {
                redact::redact_text(&redact::neutralise_controls(&v))
            };
            redactions += n;
            (redact::neutralise_controls(&k), v)
        })
        .collect();
    let (error, n) = redact::redact_text(&redact::neutralise_controls(&d.state.error));
    redactions += n;
    pb::InspectContainerResponse {
        id: d.id,
        name: redact::neutralise_controls(&d.name),
        image: redact::neutralise_controls(&d.image),
        state: Some(pb::ContainerState {
            status: d.state.status,
            running: d.state.running,
            restarting: d.state.restarting,
            oom_killed: d.state.oom_killed,
            dead: d.state.dead,
            exit_code: d.state.exit_code,
            error,
            started_at: d.state.started_at,
            finished_at: d.state.finished_at,
        }),
        health: Some(shape_health(d.health)),
        healthcheck: d.healthcheck.map(shape_healthcheck),
        labels,
        env,
        restart_count: d.restart_count,
        restart_policy: d.restart_policy,
        networks: d.networks,
        aliases: d.aliases,
        created: d.created,
        redactions,
    }
}

/// The one place errors become gRPC statuses. Messages are precise but do not
/// include engine internals beyond what the error variant carries.
fn to_status(e: ExecError) -> Status {
    Status::new(e.code(), e.to_string())
}

#[tonic::async_trait]
impl pb::executor_server::Executor for ExecutorService {
    async fn list_containers(
        &self,
        request: Request<pb::ListContainersRequest>,
    ) -> Result<Response<pb::ListContainersResponse>, Status> {
        let mut call = self.begin(&request, "list", Tier::Read);
        let result = self.list(&mut call, request.into_inner()).await;
        self.finish(call, result)
    }

    async fn inspect_container(
        &self,
        request: Request<pb::ContainerRequest>,
    ) -> Result<Response<pb::InspectContainerResponse>, Status> {
        let mut call = self.begin(&request, "inspect", Tier::Read);
        let result = self.inspect(&mut call, request.into_inner()).await;
        self.finish(call, result)
    }

    async fn container_logs(
        &self,
        request: Request<pb::LogsRequest>,
    ) -> Result<Response<pb::LogsResponse>, Status> {
        let mut call = self.begin(&request, "logs", Tier::Read);
        let result = self.logs(&mut call, request.into_inner()).await;
        self.finish(call, result)
    }

    async fn container_health(
        &self,
        request: Request<pb::ContainerRequest>,
    ) -> Result<Response<pb::HealthResponse>, Status> {
        let mut call = self.begin(&request, "health", Tier::Read);
        let result = self.health(&mut call, request.into_inner()).await;
        self.finish(call, result)
    }

    async fn get_policy(
        &self,
        request: Request<pb::GetPolicyRequest>,
    ) -> Result<Response<pb::PolicyResponse>, Status> {
        let mut call = self.begin(&request, "get_policy", Tier::Read);
        let result = self.get_policy(&mut call, request.into_inner());
        self.finish(call, result)
    }

    async fn start_container(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let mut call = self.begin(&request, "start", Tier::Change);
        let result = self
            .write(&mut call, request.into_inner(), WriteAction::Start)
            .await;
        self.finish(call, result)
    }

    async fn restart_container(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let mut call = self.begin(&request, "restart", Tier::Change);
        let result = self
            .write(&mut call, request.into_inner(), WriteAction::Restart)
            .await;
        self.finish(call, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_validation_table() {
        for good in [
            "backend",
            "/shop-prod-backend-1",
            "a.b_c-d",
            &"f".repeat(64),
        ] {
            assert!(validate_container_ref(good).is_ok(), "{good}");
        }
        for bad in ["", "/", "-x", "a b", "a/b", "x;rm", &"a".repeat(129), "ü"] {
            assert!(validate_container_ref(bad).is_err(), "{bad}");
        }
        for good in ["req-1", "01J:abc.def_1"] {
            assert!(validate_request_id(good).is_ok(), "{good}");
        }
        for bad in ["", "a b", "x\n", &"r".repeat(129)] {
            assert!(validate_request_id(bad).is_err(), "{bad}");
        }
    }
}
