//! The gRPC service: every call runs the same pipeline, top to bottom,
//! authenticate → validate → resolve → policy (a `Permit`) → approval →
//! execute → shape (redact) → audit. The single conversion of errors into
//! `tonic::Status` is at the bottom of this file.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use tonic::{Request, Response, Status};

use crate::approval::{ApprovalError, ApprovalInput, ApprovalVerifier};
use crate::audit::{AuditEntry, AuditError, AuditLog, NonceRecord};
use crate::config::LimitsConfig;
use crate::docker::{
    ContainerDetails, ContainerSummary, DockerAdapter, DockerError, Health, HealthcheckSpec,
    LogQuery, LogStream,
};
use crate::http_check::{self, HttpTarget};
use crate::policy::{Permit, Policy, PolicyError, ResolvedTarget, Tier};
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
    /// Something the operator did not configure (an HTTP check).
    #[error("{0}")]
    NotConfigured(String),
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
            ExecError::NotConfigured(_) => Code::NotFound,
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
            | ExecError::Approval(_)
            | ExecError::Invisible { .. }
            | ExecError::NotConfigured(_) => "denied",
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
    http_checks: BTreeMap<String, HttpTarget>,
    http_timeout: Duration,
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

/// Everything the service is made of, assembled at start-up.
pub struct ServiceParts {
    pub docker: DockerAdapter,
    pub policy: Policy,
    pub approvals: ApprovalVerifier,
    pub audit: Arc<AuditLog>,
    pub allowed_clients: HashSet<String>,
    pub limits: LimitsConfig,
    pub http_checks: BTreeMap<String, HttpTarget>,
    pub http_timeout: Duration,
}

impl ExecutorService {
    pub fn new(p: ServiceParts) -> ExecutorService {
        ExecutorService {
            docker: p.docker,
            policy: p.policy,
            approvals: p.approvals,
            audit: p.audit,
            allowed_clients: p.allowed_clients,
            limits: p.limits,
            http_checks: p.http_checks,
            http_timeout: p.http_timeout,
        }
    }

    /// The interceptor for the gRPC health service: it reveals nothing, but
    /// it still answers only known identities.
    // `tonic::Status` is large, but it is what interceptors return.
    #[allow(clippy::result_large_err)]
    pub fn health_gate(
        allowed: HashSet<String>,
        audit: Arc<AuditLog>,
    ) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
        move |req: Request<()>| {
            let certs = req.peer_certs();
            match Self::check_identity(&allowed, certs.as_deref().map(Vec::as_slice)) {
                // Successful probes run on a timer and reveal nothing: not
                // audited. Refusals are.
                Ok(_) => Ok(req),
                Err((caller, why)) => {
                    let entry = AuditEntry {
                        caller,
                        action: "health".into(),
                        decision: "denied".into(),
                        code: "Unauthenticated".into(),
                        reason: why.clone(),
                        ..Default::default()
                    };
                    if let Err(e) = audit.append(&entry) {
                        tracing::error!(error = %e, "audit write failed for a refused health check");
                    }
                    Err(Status::unauthenticated(why))
                }
            }
        }
    }

    /// The identity of the caller if it is on the allow list. Also used by
    /// the health service's interceptor.
    pub fn check_identity(
        allowed: &HashSet<String>,
        certs: Option<&[tonic::transport::CertificateDer<'static>]>,
    ) -> Result<String, (String, String)> {
        match certs.and_then(|c| c.first()) {
            None => Err((
                "unknown".into(),
                "no client certificate presented".to_string(),
            )),
            Some(cert) => match identity_from_cert(cert.as_ref()) {
                None => Err((
                    "unknown".into(),
                    "client certificate has no common name".to_string(),
                )),
                Some(id) if allowed.contains(&id) => Ok(id),
                Some(id) => {
                    let shown = truncate_for_audit(&redact::neutralise_controls(&id));
                    Err((
                        shown.clone(),
                        format!("client identity `{shown}` is not on the executor's allow list"),
                    ))
                }
            },
        }
    }

    pub fn allowed_clients(&self) -> HashSet<String> {
        self.allowed_clients.clone()
    }

    /// Step 1 of the pipeline. The TLS layer already required a certificate
    /// from the configured CA; here its identity must be on the allow list.
    fn begin<T>(&self, request: &Request<T>, action: &str, tier: Tier) -> Call {
        let certs = request.peer_certs();
        let (caller_name, caller) = match Self::check_identity(
            &self.allowed_clients,
            certs.as_deref().map(Vec::as_slice),
        ) {
            Ok(id) => (id.clone(), Ok(id)),
            Err((name, why)) => (name, Err(why)),
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
                    "audit log unavailable; the call's outcome could not be recorded",
                ));
            }
        }
        result.map(Response::new).map_err(to_status)
    }

    /// Resolve a name or id to the container as it is now. A target outside
    /// the selectors is reported exactly like a missing one, for reads and
    /// writes alike, so a caller cannot learn what exists beyond its policy.
    async fn resolve(&self, call: &mut Call, container: &str) -> Result<ResolvedTarget, ExecError> {
        validate_container_ref(container)?;
        let target = self.docker.resolve(container).await?;
        call.entry.container_id = target.id.clone();
        Ok(target)
    }

    async fn permit_read(&self, call: &mut Call, container: &str) -> Result<Permit, ExecError> {
        let target = self.resolve(call, container).await?;
        self.policy
            .permit_read(&target)
            .map_err(|why| invisible(container, why))
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

    async fn stats(
        &self,
        call: &mut Call,
        req: pb::ContainerRequest,
    ) -> Result<pb::StatsResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let permit = self.permit_read(call, &req.container).await?;
        let s = self.docker.stats(&permit).await?;
        let memory_percent = if s.memory_limit > 0 {
            s.memory_usage as f64 / s.memory_limit as f64 * 100.0
        } else {
            0.0
        };
        call.entry.result = format!("cpu={:.1}% mem={}B", s.cpu_percent, s.memory_usage);
        Ok(pb::StatsResponse {
            container_id: permit.container_id().to_string(),
            cpu_percent: s.cpu_percent,
            online_cpus: s.online_cpus,
            memory_usage_bytes: s.memory_usage,
            memory_limit_bytes: s.memory_limit,
            memory_percent,
            network_rx_bytes: s.network_rx,
            network_tx_bytes: s.network_tx,
            block_read_bytes: s.block_read,
            block_write_bytes: s.block_write,
            pids: s.pids,
        })
    }

    async fn logs(
        &self,
        call: &mut Call,
        req: pb::LogsRequest,
    ) -> Result<pb::LogsResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.entry.input = format!(
            "tail={} since={} streams={}",
            req.tail, req.since, req.streams
        );
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        if req.tail > self.limits.logs_max_lines {
            return Err(ExecError::InvalidArgument(format!(
                "tail {} exceeds the executor's limit of {} lines",
                req.tail, self.limits.logs_max_lines
            )));
        }
        if req.since < 0 || req.since > unix_now() + 86_400 {
            return Err(ExecError::InvalidArgument(format!(
                "since {} must be a unix time in seconds, 0 for no bound",
                req.since
            )));
        }
        let (stdout, stderr) = match pb::LogStreams::try_from(req.streams) {
            Ok(pb::LogStreams::Both) => (true, true),
            Ok(pb::LogStreams::Stdout) => (true, false),
            Ok(pb::LogStreams::Stderr) => (false, true),
            Err(_) => {
                return Err(ExecError::InvalidArgument(format!(
                    "streams {} is not a known value",
                    req.streams
                )))
            }
        };
        let tail = if req.tail == 0 {
            self.limits.logs_default_tail
        } else {
            req.tail
        };
        let permit = self.permit_read(call, &req.container).await?;
        let query = LogQuery {
            tail,
            since: req.since,
            stdout,
            stderr,
        };
        let (raw, truncated) = self
            .docker
            .logs(&permit, query, self.limits.logs_max_bytes as usize)
            .await?;
        let mut shaper = redact::LogShaper::for_window(raw.iter().map(|l| l.bytes.as_slice()));
        let lines: Vec<pb::LogLine> = raw
            .into_iter()
            .map(|l| pb::LogLine {
                stream: if l.stream == LogStream::Stderr {
                    "stderr"
                } else {
                    "stdout"
                }
                .into(),
                text: shaper.line(&l.bytes),
            })
            .collect();
        let redactions = shaper.redactions();
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
        call.record(&req.request_id, &req.name);
        call.entry.input = format!(
            "all={} name={} labels={} compose_project={} status={}",
            req.all,
            truncate_for_audit(&req.name),
            req.labels.len(),
            truncate_for_audit(&req.compose_project),
            truncate_for_audit(&req.status)
        );
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        validate_filters(&req)?;
        let containers: Vec<pb::ContainerSummary> = self
            .docker
            .list(req.all)
            .await?
            .into_iter()
            .filter(|c| self.policy.target_allowed(&c.name, &c.labels))
            .filter(|c| matches_filters(c, &req))
            .map(|c| {
                let (labels, _) = shape_labels(c.labels);
                pb::ContainerSummary {
                    id: c.id,
                    name: redact::neutralise_controls(&c.name),
                    image: redact::neutralise_controls(&c.image),
                    state: c.state,
                    status: c.status,
                    labels,
                    public_ports: c.public_ports,
                    ip_addresses: c.ip_addresses,
                }
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
        let actions = [WriteAction::Start, WriteAction::Restart, WriteAction::Stop]
            .into_iter()
            .map(|a| pb::ActionPolicy {
                action: a.as_str().into(),
                enabled: self.policy.action_enabled(a),
                tier: Policy::tier(a) as u32,
                approval_required: true,
            })
            .collect();
        Ok(pb::PolicyResponse {
            actions,
            logs_max_lines: self.limits.logs_max_lines,
            logs_max_bytes: self.limits.logs_max_bytes,
            approver_ids: self.approvals.approver_ids(),
            http_checks: self.http_checks.keys().cloned().collect(),
        })
    }

    /// Only endpoints from the executor's config: the caller names a service.
    async fn check_http(
        &self,
        call: &mut Call,
        req: pb::CheckHttpRequest,
    ) -> Result<pb::CheckHttpResponse, ExecError> {
        call.record(&req.request_id, &req.service);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let Some(target) = self.http_checks.get(&req.service) else {
            return Err(ExecError::NotConfigured(format!(
                "no HTTP check is configured for service `{}`",
                truncate_for_audit(&redact::neutralise_controls(&req.service))
            )));
        };
        let outcome = http_check::check(target, self.http_timeout).await;
        call.entry.result = format!(
            "ok={} status={} latency_ms={} {}",
            outcome.ok,
            outcome.status_code,
            outcome.latency.as_millis(),
            outcome.error
        );
        Ok(pb::CheckHttpResponse {
            service: req.service,
            ok: outcome.ok,
            status_code: outcome.status_code,
            latency_ms: outcome.latency.as_millis() as u64,
            error: outcome.error,
            body_snippet: outcome.body_snippet,
        })
    }

    /// The write path. Order matters: the target is resolved to its id now
    /// (so a recreated container does not match an old approval); policy
    /// comes before the approval (a disabled action is refused whatever was
    /// signed); the nonce is consumed last, so a refused call does not burn
    /// a valid approval, and consuming it commits a record of who may do what
    /// to which container before Docker is called (a store that cannot be
    /// written stops the write).
    async fn write(
        &self,
        call: &mut Call,
        req: pb::WriteRequest,
        action: WriteAction,
    ) -> Result<pb::WriteResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        if let Some(a) = &req.approval {
            call.entry.key_id = truncate_for_audit(&redact::neutralise_controls(&a.key_id));
        }
        let target = self.resolve(call, &req.container).await?;
        let permit = self
            .policy
            .permit_write(action, &target)
            .map_err(|e| match e {
                PolicyError::TargetNotAllowed { .. } => invisible(&req.container, e),
                other => ExecError::Policy(other),
            })?;
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
        let record = NonceRecord {
            nonce: &approved.claims.nonce,
            approval_id: &approved.claims.approval_id,
            expires_at: approved.claims.expires_at,
            request_id: &req.request_id,
            action: action.as_str(),
            container_id: &target.id,
            caller: &call.entry.caller,
            key_id: &approved.key_id,
        };
        self.audit.consume_nonce(&record).map_err(|e| match e {
            AuditError::NonceReplayed => ExecError::Approval(ApprovalError::Replayed),
            other => ExecError::Audit(other),
        })?;
        match action {
            WriteAction::Restart => self.docker.restart(&permit).await?,
            WriteAction::Start => self.docker.start(&permit).await?,
            WriteAction::Stop => self.docker.stop(&permit).await?,
        }
        call.entry.result = format!("{action} done");
        Ok(pb::WriteResponse {
            container_id: target.id,
            action: action.as_str().into(),
            approval_id: approved.claims.approval_id,
        })
    }
}

fn invisible(container: &str, why: PolicyError) -> ExecError {
    ExecError::Invisible {
        container: truncate_for_audit(container),
        why,
    }
}

fn validate_filters(req: &pb::ListContainersRequest) -> Result<(), ExecError> {
    const STATUSES: &[&str] = &[
        "",
        "created",
        "running",
        "paused",
        "restarting",
        "removing",
        "exited",
        "dead",
    ];
    if !STATUSES.contains(&req.status.as_str()) {
        return Err(ExecError::InvalidArgument(format!(
            "status filter must be one of {}",
            STATUSES[1..].join(", ")
        )));
    }
    if req.name.len() > MAX_CONTAINER_REF_LEN || req.compose_project.len() > MAX_CONTAINER_REF_LEN {
        return Err(ExecError::InvalidArgument(format!(
            "name and compose_project filters are at most {MAX_CONTAINER_REF_LEN} characters"
        )));
    }
    if req.labels.len() > 16
        || req
            .labels
            .iter()
            .any(|(k, v)| k.is_empty() || k.len() > 256 || v.len() > 256)
    {
        return Err(ExecError::InvalidArgument(
            "at most 16 label filters, keys 1 to 256 and values up to 256 characters".into(),
        ));
    }
    Ok(())
}

fn matches_filters(c: &ContainerSummary, req: &pb::ListContainersRequest) -> bool {
    (req.name.is_empty() || glob_match::glob_match(&req.name, &c.name))
        && req.labels.iter().all(|(k, v)| {
            c.labels
                .get(k)
                .is_some_and(|have| v.is_empty() || have == v)
        })
        && (req.compose_project.is_empty()
            || c.labels.get(crate::policy::COMPOSE_PROJECT_LABEL) == Some(&req.compose_project))
        && (req.status.is_empty() || c.state == req.status)
}

/// Label values of secret-looking keys are withheld, others redacted.
fn shape_labels(labels: BTreeMap<String, String>) -> (HashMap<String, String>, u32) {
    let mut redactions = 0;
    let shaped = labels
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
    (shaped, redactions)
}

fn shape_health(h: Health) -> (pb::HealthState, u32) {
    let mut redactions = 0;
    let log = h
        .log
        .into_iter()
        .map(|p| {
            let (output, n) = redact::shape_multiline(&p.output);
            redactions += n;
            pb::HealthLogEntry {
                exit_code: p.exit_code,
                output,
                start: p.start,
                end: p.end,
            }
        })
        .collect();
    (
        pb::HealthState {
            status: h.status,
            failing_streak: h.failing_streak,
            log,
        },
        redactions,
    )
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
    let (labels, n) = shape_labels(d.labels);
    redactions += n;
    let (health, n) = shape_health(d.health);
    redactions += n;
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
        health: Some(health),
        healthcheck: d.healthcheck.map(shape_healthcheck),
        labels,
        env,
        restart_count: d.restart_count,
        restart_policy: d.restart_policy,
        networks: d.networks,
        aliases: d.aliases,
        created: d.created,
        memory_limit_bytes: d.memory_limit,
        requested_host_ports: d.requested_host_ports,
        ip_addresses: d.ip_addresses,
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

    async fn stop_container(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let mut call = self.begin(&request, "stop", Tier::Disruptive);
        let result = self
            .write(&mut call, request.into_inner(), WriteAction::Stop)
            .await;
        self.finish(call, result)
    }

    async fn container_stats(
        &self,
        request: Request<pb::ContainerRequest>,
    ) -> Result<Response<pb::StatsResponse>, Status> {
        let mut call = self.begin(&request, "stats", Tier::Read);
        let result = self.stats(&mut call, request.into_inner()).await;
        self.finish(call, result)
    }

    async fn check_http(
        &self,
        request: Request<pb::CheckHttpRequest>,
    ) -> Result<Response<pb::CheckHttpResponse>, Status> {
        let mut call = self.begin(&request, "check_http", Tier::Read);
        let result = self.check_http(&mut call, request.into_inner()).await;
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
