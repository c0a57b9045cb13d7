//! T0 reads. Each resolves the caller's reference among visible
//! containers, gets a read `Permit` from policy, calls Docker through the
//! adapter (which retries reads at most twice) and shapes the answer.

use super::shape::*;
use super::*;
use crate::docker::Resolved;

/// The widest window a `ContainerLogs` with `until` may ask for.
const MAX_LOGS_WINDOW_SECS: i64 = 86_400;

/// A logs call's checked bounds.
pub(super) struct LogWindow {
    tail: u32,
    since: i64,
    until: i64,
    stdout: bool,
    stderr: bool,
}

impl LogWindow {
    pub(super) fn query(&self, timestamps: bool) -> LogQuery {
        LogQuery {
            tail: self.tail,
            timestamps,
            since: self.since,
            until: self.until,
            stdout: self.stdout,
            stderr: self.stderr,
        }
    }
}

impl ExecutorService {
    /// Resolve a name or id to the container as it is now. A target outside
    /// the selectors is reported exactly like a missing one, for reads and
    /// writes alike, so a caller cannot learn what exists beyond its policy.
    pub(super) async fn resolve(
        &self,
        call: &mut Call,
        container: &str,
    ) -> Result<Resolved, ExecError> {
        validate_container_ref(container)?;
        let target = match self.docker.resolve(container).await {
            Ok(target) => target,
            // Every miss looks the same, whatever the engine said.
            Err(DockerError::NotFound(_)) => return Err(not_found(container)),
            // An id prefix that matches several containers. Some of them may
            // be hidden, so the answer must not depend on them: resolve the
            // prefix among the visible containers only.
            Err(DockerError::Ambiguous(_)) => self.resolve_among_visible(container).await?,
            Err(e) => return Err(e.into()),
        };
        call.entry.container_id = target.target.id.clone();
        Ok(target)
    }

    /// An exact name or a unique id prefix among the containers the policy
    /// shows. Anything else is "not found", exactly like a missing one.
    async fn resolve_among_visible(&self, reference: &str) -> Result<Resolved, ExecError> {
        let name = reference.trim_start_matches('/');
        let visible: Vec<ContainerSummary> = self
            .docker
            .list(true)
            .await?
            .into_iter()
            .filter(|c| self.policy.target_allowed(&c.name, &c.labels))
            .filter(|c| c.name == name || c.id.starts_with(&name.to_ascii_lowercase()))
            .collect();
        match visible.as_slice() {
            [one] => match self.docker.resolve(&one.id).await {
                Ok(target) => Ok(target),
                Err(DockerError::NotFound(_)) => Err(not_found(reference)),
                Err(e) => Err(e.into()),
            },
            [] => Err(not_found(reference)),
            _ => Err(ExecError::InvalidArgument(format!(
                "`{}` matches more than one container; use a longer id prefix or the name",
                truncate_for_audit(reference)
            ))),
        }
    }

    pub(super) async fn permit_read(
        &self,
        call: &mut Call,
        container: &str,
    ) -> Result<Permit<Read>, ExecError> {
        Ok(self.permit_read_resolved(call, container).await?.0)
    }

    /// A read permit, with the inspect that resolving made (so a read that
    /// needs the inspect makes no second engine call).
    pub(super) async fn permit_read_resolved(
        &self,
        call: &mut Call,
        container: &str,
    ) -> Result<(Permit<Read>, Option<ContainerDetails>), ExecError> {
        let resolved = self.resolve(call, container).await?;
        let permit = self
            .policy
            .permit_read(&resolved.target)
            .map_err(|why| invisible(container, why))?;
        let details = resolved.details(&permit);
        Ok((permit, details))
    }

    pub(super) async fn inspect(
        &self,
        call: &mut Call,
        req: pb::ContainerRequest,
    ) -> Result<pb::InspectContainerResponse, ExecError> {
        self.inspect_shaped(call, req, true).await
    }

    /// The shaped inspect; `image_check` also asks, for a container that
    /// is down, whether its image is still there (`InspectContainer`
    /// only: health has no use for it).
    async fn inspect_shaped(
        &self,
        call: &mut Call,
        req: pb::ContainerRequest,
        image_check: bool,
    ) -> Result<pb::InspectContainerResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let (permit, resolved) = self.permit_read_resolved(call, &req.container).await?;
        let details = match resolved {
            Some(d) => d,
            None => self.docker.inspect(&permit).await?,
        };
        // A container that is down may be down for good if its image is
        // gone; one that runs is not asked about (one engine trip less on
        // the hot path).
        let image_missing = image_check
            && !details.state.running
            && self.docker.image_present(&permit, &details.image_id).await == Some(false);
        let env_hashes = shape::env_hashes(&details.env, self.env_key()?);
        let mut shaped = shape_inspect(details, &self.env_policy);
        shaped.image_missing = image_missing;
        shaped.env_hashes = env_hashes;
        call.entry.result = format!(
            "state={} redactions={}{}",
            shaped
                .state
                .as_ref()
                .map(|s| s.status.as_str())
                .unwrap_or(""),
            shaped.redactions,
            if shaped.image_missing {
                " image_missing"
            } else {
                ""
            }
        );
        Ok(shaped)
    }

    pub(super) async fn health(
        &self,
        call: &mut Call,
        req: pb::ContainerRequest,
    ) -> Result<pb::HealthResponse, ExecError> {
        let inspected = self.inspect_shaped(call, req, false).await?;
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

    pub(super) async fn stats(
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

    pub(super) async fn logs(
        &self,
        call: &mut Call,
        req: pb::LogsRequest,
    ) -> Result<pb::LogsResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.entry.input = format!(
            "tail={} since={} until={} streams={}",
            req.tail, req.since, req.until, req.streams
        );
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let window = self.log_window(req.tail, req.since, req.until, req.streams)?;
        let (permit, details) = self.permit_read_resolved(call, &req.container).await?;
        // A TTY's lines get no time (docker/logs.rs says why); when the
        // inspect is not at hand, none either.
        let query = window.query(details.is_some_and(|d| !d.tty));
        let (raw, truncated) = self
            .docker
            .logs(&permit, query, self.limits.logs_max_bytes as usize)
            .await?;
        Ok(shape_log_lines(call, raw, truncated))
    }

    /// A logs call's bounds, checked: the tail within the executor's limit,
    /// times that are unix seconds, a window with `until` at most a day
    /// wide (the engine sends all of it), known streams.
    pub(super) fn log_window(
        &self,
        tail: u32,
        since: i64,
        until: i64,
        streams: i32,
    ) -> Result<LogWindow, ExecError> {
        if tail > self.limits.logs_max_lines {
            return Err(ExecError::InvalidArgument(format!(
                "tail {tail} exceeds the executor's limit of {} lines",
                self.limits.logs_max_lines
            )));
        }
        let latest = unix_now() + 86_400;
        if since < 0 || since > latest {
            return Err(ExecError::InvalidArgument(format!(
                "since {since} must be a unix time in seconds, 0 for no bound"
            )));
        }
        if until < 0 || until > latest {
            return Err(ExecError::InvalidArgument(format!(
                "until {until} must be a unix time in seconds, 0 for no bound"
            )));
        }
        if until != 0 && until < since {
            return Err(ExecError::InvalidArgument(format!(
                "until {until} is before since {since}: no line can be in between"
            )));
        }
        // With `until` the engine sends the whole window (its own tail
        // comes before `until`), so the window is bounded.
        if until != 0 && (since == 0 || until - since > MAX_LOGS_WINDOW_SECS) {
            return Err(ExecError::InvalidArgument(format!(
                "until {until} needs a since at most {} hours before it (since is {since})",
                MAX_LOGS_WINDOW_SECS / 3600
            )));
        }
        let (stdout, stderr) = match pb::LogStreams::try_from(streams) {
            Ok(pb::LogStreams::Both) => (true, true),
            Ok(pb::LogStreams::Stdout) => (true, false),
            Ok(pb::LogStreams::Stderr) => (false, true),
            Err(_) => {
                return Err(ExecError::InvalidArgument(format!(
                    "streams {streams} is not a known value"
                )))
            }
        };
        Ok(LogWindow {
            tail: if tail == 0 {
                self.limits.logs_default_tail
            } else {
                tail
            },
            since,
            until,
            stdout,
            stderr,
        })
    }

    pub(super) async fn list(
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
            .filter_map(|c| {
                // Filters compare against what the caller may see: a label
                // value the redactor withholds cannot be confirmed by
                // guessing it in a filter.
                let (labels, _) = shape_labels(c.labels.clone());
                matches_filters(&c, &labels, &req).then_some((c, labels))
            })
            .map(|(c, labels)| pb::ContainerSummary {
                id: c.id,
                name: redact::neutralise_controls(&c.name),
                image: redact::neutralise_controls(&c.image),
                state: c.state,
                status: c.status,
                labels,
                public_ports: c.public_ports,
                ip_addresses: c.ip_addresses,
            })
            .collect();
        call.entry.result = format!("containers={}", containers.len());
        Ok(pb::ListContainersResponse { containers })
    }

    pub(super) fn get_policy(
        &self,
        call: &mut Call,
        req: pb::GetPolicyRequest,
    ) -> Result<pb::PolicyResponse, ExecError> {
        call.record(&req.request_id, "");
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let actions = WriteAction::ALL
            .into_iter()
            .map(|a| pb::ActionPolicy {
                action: a.as_str().into(),
                enabled: self.policy.action_enabled(a),
                tier: Policy::tier(a) as u32,
                approval_required: true,
                approvers_required: self.approvals.quorum().required(a),
            })
            .collect();
        let services = self.policy.targets().services.as_ref();
        let host = self.approvals.host();
        Ok(pb::PolicyResponse {
            host: host.name.clone().unwrap_or_default(),
            host_required: host.require,
            actions,
            logs_max_lines: self.limits.logs_max_lines,
            logs_max_bytes: self.limits.logs_max_bytes,
            approver_ids: self.approvals.approver_ids(),
            http_checks: self.http_checks.keys().cloned().collect(),
            approvers: self
                .approvals
                .approver_keys()
                .into_iter()
                .map(|(id, public_key)| pb::Approver { id, public_key })
                .collect(),
            automation: Some(pb::Automation {
                update_grants: self.grants.update_grants(),
                utc_offset_secs: self.grants.local_time(unix_now()).1,
                enabled: self.grants.enabled(),
                max_grant_ttl_secs: self.grants.max_ttl().as_secs(),
                revoked: {
                    let mut ids: Vec<String> = self
                        .grants
                        .revoked()
                        .unwrap_or_default()
                        .into_iter()
                        .collect();
                    ids.sort();
                    ids
                },
            }),
            scope: Some(pb::TargetScope {
                allow_names: self.policy.targets().allow_names.clone(),
                allow_labels: self
                    .policy
                    .targets()
                    .allow_labels
                    .clone()
                    .into_iter()
                    .collect(),
                allow_compose_projects: self.policy.targets().allow_compose_projects.clone(),
                allow_service_names: services.map(|s| s.allow_names.clone()).unwrap_or_default(),
                allow_service_labels: services
                    .map(|s| s.allow_labels.clone().into_iter().collect())
                    .unwrap_or_default(),
                allow_stacks: services.map(|s| s.allow_stacks.clone()).unwrap_or_default(),
            }),
        })
    }

    /// Only endpoints from the executor's config: the caller names a service.
    pub(super) async fn check_http(
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
}

/// A reference that matches no container at all; the caller sees the same
/// answer as for a hidden one.
pub(super) fn not_found(container: &str) -> ExecError {
    ExecError::Docker(DockerError::NotFound(truncate_for_audit(container)))
}

pub(super) fn invisible(container: &str, why: PolicyError) -> ExecError {
    ExecError::Invisible {
        container: truncate_for_audit(container),
        why,
    }
}

/// `labels` are the shaped (redacted) labels, the ones the caller is shown.
pub(super) fn matches_filters(
    c: &ContainerSummary,
    labels: &HashMap<String, String>,
    req: &pb::ListContainersRequest,
) -> bool {
    (req.name.is_empty() || glob_match::glob_match(&req.name, &c.name))
        && req
            .labels
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|have| v.is_empty() || have == v))
        && (req.compose_project.is_empty()
            || labels.get(crate::policy::COMPOSE_PROJECT_LABEL) == Some(&req.compose_project))
        && (req.status.is_empty() || c.state == req.status)
}
